"""`sagestack local serve` of an LLM endpoint (or `endpoint/component`): its weights made here when
the project has none, then the container's schema and the runtime API on localhost; `--prompt`
streams one generation through boto3's own client and stops."""

from __future__ import annotations

from typing import Any

import typer

from sagestack.cli.common import console, print_lines

# How long the first `local serve` of an LLM trains its weights (106 s of CPU measured on a 2-core
# machine: docs/guide/llm.md).
FIRST_BUILD = "~2 min"


def llm_keys(spec: Any) -> list[str]:
    """What `local serve` accepts as an LLM: endpoints with llm:, and endpoint/component for LLM components."""
    keys = [k for k, ep in spec.endpoints.items() if ep.llm is not None]
    for k, ep in spec.endpoints.items():
        keys += [f"{k}/{n}" for n, c in ep.components.items() if c.llm is not None]
    return keys


def is_llm(spec: Any, key: str) -> bool:
    endpoint = key.partition("/")[0]
    ep = spec.endpoints.get(endpoint)
    return ep is not None and (ep.llm is not None or any(c.llm for c in ep.components.values()) or "/" in key)


def serve_llm(loaded: Any, key: str, *, host: str, port: int, prompt: str | None, max_tokens: int) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from sagestack.local.llm.endpoint import (
        BackgroundLlm,
        LlmServeError,
        ensure_weights,
        local_llm,
        model_server,
        uvicorn_server,
    )
    from sagestack.local.llm.weights import has_weights
    from sagestack.local.pasteable import shown_path
    from sagestack.local.serving.handlers import ServeError

    out, err = console(), console(stderr=True)
    try:
        llm = local_llm(loaded, key)
    except LlmServeError as e:
        print_lines(err, str(e))
        raise typer.Exit(2) from None
    if not has_weights(llm.weights):
        # said before the bar, whole: the bar's label is short (a path cut to fit read like an error)
        print_lines(
            err,
            f"{key} has no weights here yet: training a small model on text bundled with sagestack, "
            f"once (about two minutes on a laptop's CPU), into {shown_path(llm.weights)}",
        )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=16),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as progress:
        task = progress.add_task(f"building weights for {key} (first run, {FIRST_BUILD})", total=None)

        def step(done: int, total: int, loss: float) -> None:
            progress.update(task, completed=done, total=total)

        if ensure_weights(llm, step):
            print_lines(err, f"made local weights for {key} (the cloud reads {llm.spec.weights.s3})")
    app = model_server(llm)
    print_lines(
        out,
        f"serving {key} ({llm.spec.container}: the {llm.schema.upper()} schema) on http://{host}:{port} — "
        f"GET /ping, POST /invocations, POST /endpoints/{llm.name}/invocations[-response-stream]; "
        f"at most {app.limits.max_total_tokens} tokens a sequence",
    )
    if prompt is None:
        uvicorn_server(app, host, port).run()
        return
    from botocore.exceptions import ClientError

    try:
        with BackgroundLlm(app, port, host) as url:
            _stream(out, url, llm.name, llm.schema, prompt, max_tokens)
    except ServeError as e:  # the port is taken, say
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    except ClientError as e:  # the container refused the prompt (ModelError), or failed mid-stream
        error = e.response.get("Error", {})
        err.print(f"\n{error.get('Code', 'error')}: {_said(e.response, error)}", markup=False)
        raise typer.Exit(1) from None


def _said(response: dict[str, Any], error: dict[str, Any]) -> str:
    """The container's own message, out of the family's error body that ModelError carries."""
    import json

    original = response.get("OriginalMessage") or error.get("Message", "")
    try:
        body = json.loads(original)
    except ValueError:
        return str(original)
    return str(body.get("message") or body.get("error") or original) if isinstance(body, dict) else original


def _stream(out: Any, url: str, name: str, schema: str, prompt: str, max_tokens: int) -> None:
    """One generation through boto3's InvokeEndpointWithResponseStream, printed as it comes."""
    import json

    from sagestack.local.serving.serve import runtime_client

    client = runtime_client(url)
    request = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    response = client.invoke_endpoint_with_response_stream(
        EndpointName=name, ContentType="application/json", Body=json.dumps(request)
    )
    out.print(f"$ invoke_endpoint_with_response_stream({name}): {prompt}", markup=False)
    for event in response["Body"]:
        for line in event["PayloadPart"]["Bytes"].decode().split("\n\n"):
            data = line.removeprefix("data:").strip()
            if data and data != "[DONE]":
                delta = json.loads(data)["choices"][0].get("delta", {}).get("content", "")
                out.print(delta, end="", markup=False, highlight=False, soft_wrap=True)
                out.file.flush()
    out.print()
