"""An operation moto lacks, answered in the boto3 client as botocore's Stubber answers it: the
request validated against the service model before it is "sent", the response validated too;
every other operation of the client still goes to the moto server."""

from __future__ import annotations

from typing import Any

Answers = dict[str, dict[str, dict[str, Any]]]  # service -> operation -> response (or {"Error": …})


def with_answers(monkeypatch: Any, answers: Answers) -> dict[str, list[dict[str, Any]]]:
    """boto3 clients made from now on answer `answers` here; the requests each operation got. A
    response with an "Error" ({"Code", "Message"}) is AWS's refusal (HTTP 400): a ClientError."""
    import boto3

    made, seen = boto3.client, {}

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        c = made(service, *args, **kwargs)
        for operation, response in answers.get(service, {}).items():
            seen[operation] = answered_here(c, operation, response)
        return c

    monkeypatch.setattr(boto3, "client", client)
    return seen


def answered_here(client: Any, operation: str, response: dict[str, Any]) -> list[dict[str, Any]]:
    from botocore.awsrequest import AWSResponse
    from botocore.validate import validate_parameters

    model = client.meta.service_model.operation_model(operation)
    refused = "Error" in response
    if refused:
        assert response["Error"]["Code"], response
    elif model.output_shape is not None:
        validate_parameters(response, model.output_shape)
    requests: list[dict[str, Any]] = []

    def check(params: dict[str, Any], **_: Any) -> None:
        validate_parameters(params, model.input_shape)
        requests.append(params)

    service = client.meta.service_model.service_name
    client.meta.events.register(f"before-parameter-build.{service}.{operation}", check)
    client.meta.events.register(
        f"before-call.{service}.{operation}",
        lambda **_: (AWSResponse(None, 400 if refused else 200, {}, None), response),
    )
    return requests
