"""Asynchronous inference as the cloud runs it, for `sagestack local serve --async`.

InvokeEndpointAsync names an input location and is answered at once (202, with the InferenceId and
where the result will be); one worker then reads the input, runs the model, and writes the result
to <output>/<InferenceId>.out, or a failure (the error, as the model answered it) to
<failures>/<InferenceId>-error.out. Each outcome is also appended to notifications.jsonl in the
shape of the SNS message SageMaker publishes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.asgi import Receive, Scope, Send, read_body, request_headers, respond
from sagestack.local.handlers import ClientError, error_response

# What InvokeEndpointAsync gets from an endpoint that serves in real time only.
REAL_TIME_ONLY = b'{"message": "this endpoint is real-time; serve it with --async (or async: in the spec)"}'

# (body, content type, accept) -> (payload, its content type): the model, as /invocations runs it
Predict = Callable[[bytes, str | None, str], Awaitable[tuple[bytes, str]]]


@dataclass(frozen=True)
class AsyncOptions:
    """Where an async endpoint's inputs are read and its results, failures and notifications go."""

    endpoint: str
    s3_root: Path  # s3://<bucket>/<key> is <s3_root>/<bucket>/<key> here
    output_uri: str  # s3://…/output/
    failure_uri: str  # s3://…/failures/
    notifications: Path

    def local(self, location: str) -> Path:
        if location.startswith("s3://"):
            return self.s3_root / location.removeprefix("s3://")
        return Path(location.removeprefix("file://"))

    def output(self, inference_id: str) -> str:
        return f"{self.output_uri.rstrip('/')}/{inference_id}.out"

    def failure(self, inference_id: str) -> str:
        return f"{self.failure_uri.rstrip('/')}/{inference_id}-error.out"


@dataclass
class AsyncRequest:
    inference_id: str
    input_location: str
    content_type: str | None
    accept: str


class AsyncInvocations:
    """POST /endpoints/<name>/async-invocations, and the worker that answers them in turn."""

    def __init__(
        self,
        options: AsyncOptions,
        predict: Predict,
        *,
        default_accept: str,
        capture: Any = None,  # a sagestack.local.capture.CaptureWriter
    ) -> None:
        self.options = options
        self.predict = predict
        self.default_accept = default_accept
        self.capture = capture
        self.done = 0
        self._queue: asyncio.Queue[AsyncRequest] | None = None
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()

    async def invoke(self, scope: Scope, receive: Receive, send: Send) -> None:
        """InvokeEndpointAsync: 202 with the InferenceId and where the result or failure will be."""
        await read_body(receive)
        if self._queue is None:
            await respond(send, 400, REAL_TIME_ONLY)
            return
        if scope["method"] != "POST":
            await respond(send, 405, b'{"message": "use POST"}')
            return
        headers = request_headers(scope)
        location = headers.get("x-amzn-sagemaker-inputlocation")
        if not location:
            await respond(send, 400, b'{"message": "X-Amzn-SageMaker-InputLocation is required"}')
            return
        import uuid

        inference_id = headers.get("x-amzn-sagemaker-inference-id") or str(uuid.uuid4())
        accept = headers.get("x-amzn-sagemaker-accept") or self.default_accept
        request = AsyncRequest(inference_id, location, headers.get("x-amzn-sagemaker-content-type"), accept)
        await self._queue.put(request)
        output = self.options.output(inference_id)
        body = json.dumps({"InferenceId": inference_id, "OutputLocation": output}).encode()
        locations = (
            (b"x-amzn-sagemaker-outputlocation", output.encode()),
            (b"x-amzn-sagemaker-failurelocation", self.options.failure(inference_id).encode()),
        )
        await respond(send, 202, body, headers=locations)

    async def _run(self) -> None:
        assert self._queue is not None
        a = self.options
        while True:
            r = await self._queue.get()
            output, failure = a.output(r.inference_id), a.failure(r.inference_id)
            try:
                source = a.local(r.input_location)
                if not source.is_file():
                    raise ClientError(400, f"the input location {r.input_location} does not exist")
                body = source.read_bytes()
                payload, out_type = await self.predict(body, r.content_type, r.accept)
            except Exception as e:
                status, message = error_response(e)
                write_atomically(a.local(failure), message.encode())
                self._notify(r, "Failed", failure, code=status, reason=message)
            else:
                write_atomically(a.local(output), payload)
                if self.capture is not None:
                    self.capture.capture(body, r.content_type, payload, out_type)
                self._notify(r, "Completed", output, content_type=out_type)
            self.done += 1

    def _notify(self, r: AsyncRequest, status: str, location: str, **detail: Any) -> None:
        """The SNS message SageMaker publishes for an async result (appended to a local file)."""
        import datetime

        a = self.options
        key = "outputLocation" if status == "Completed" else "failureLocation"
        message: dict[str, Any] = {
            "awsRegion": "local",
            "eventTime": datetime.datetime.now(datetime.UTC).isoformat(),
            "invocationStatus": status,
            "requestParameters": {
                "contentType": r.content_type,
                "endpointName": a.endpoint,
                "inputLocation": r.input_location,
            },
            "responseParameters": {
                key: location,
                **({"contentType": detail["content_type"]} if "content_type" in detail else {}),
            },
            "inferenceId": r.inference_id,
            "eventVersion": "1.0",
            "eventSource": "aws:sagemaker",
            "eventName": "InferenceResult",
        }
        if status != "Completed":
            message["failureReason"] = (
                f'ClientError: Received client error ({detail.get("code")}) from model with message "{detail.get("reason")}".'
            )
        a.notifications.parent.mkdir(parents=True, exist_ok=True)
        with open(a.notifications, "a") as f:
            f.write(json.dumps(message) + "\n")


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary name, then rename: a reader polling for the result never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
