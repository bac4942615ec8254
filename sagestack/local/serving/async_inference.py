"""Asynchronous inference as the cloud runs it, for `sagestack local serve --async`.

InvokeEndpointAsync names an input location and is answered at once (202, with the InferenceId and
where the result will be); one worker then reads the input, runs the model, and writes the result
to <output>/<InferenceId>.out, or a failure (the error, as the model answered it) to
<failures>/<InferenceId>-error.out. Each outcome is also appended to notifications.jsonl in the
shape of the SNS message SageMaker publishes.

Nothing outside the local S3 root is read or written, as the cloud confines an endpoint to buckets:
an InferenceId is what botocore's model of InvokeEndpointAsync allows (1 to 64 printable ASCII
characters), percent-encoded into one file name (so `../x` is `..%2Fx.out`, in the output folder);
an InputLocation is an s3:// URI, mapped under the root, and refused when its path — symlinks
resolved — leaves it. What the client got wrong is a 400 ValidationError at once, as the cloud's.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.private import open_private, private_dir, write_private_bytes
from sagestack.local.serving.asgi import Receive, Scope, Send, read_body, request_headers, respond
from sagestack.local.serving.handlers import ClientError, error_response

# What InvokeEndpointAsync gets from an endpoint that serves in real time only.
REAL_TIME_ONLY = b'{"message": "this endpoint is real-time; serve it with --async (or async: in the spec)"}'

# How the cloud's runtime names a refused request (boto3 raises ClientError with this code).
VALIDATION_ERROR = ((b"x-amzn-errortype", b"ValidationError"),)

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
        """Where s3://<bucket>/<key> lies here; a ClientError (400) for any other location, or one
        whose path, symlinks resolved, is not inside the local S3 root."""
        if len(location) > INPUT_LOCATION_MAX:
            raise ClientError(
                400, f"a location has at most {INPUT_LOCATION_MAX} characters; got {len(location)}"
            )
        bucket, _, key = location.removeprefix("s3://").partition("/")
        if not location.startswith("s3://") or not bucket or not key:
            raise ClientError(
                400,
                f"the location {location!r} is not an s3://<bucket>/<key> URI (a local endpoint reads "
                f"and writes only under its S3 root, {self.s3_root})",
            )
        root = self.s3_root.resolve()
        path = (root / bucket / key).resolve()
        if not path.is_relative_to(root / bucket) or path == root / bucket:
            raise ClientError(
                400, f"the location {location!r} leads outside the local S3 root {self.s3_root}"
            )
        return path

    def output(self, inference_id: str) -> str:
        return f"{self.output_uri.rstrip('/')}/{file_name(inference_id)}.out"

    def failure(self, inference_id: str) -> str:
        return f"{self.failure_uri.rstrip('/')}/{file_name(inference_id)}-error.out"


# botocore's model of InvokeEndpointAsync (sagemaker-runtime), held to it by a test: InferenceId
# has 1 to 64 characters, pattern \A\S[\p{Print}]*\z (Java's \p{Print} is printable ASCII);
# InputLocation at most 1024, pattern ^(https|s3)://([^/]+)/?(.*)$ (here s3:// only).
INFERENCE_ID_MAX = 64
INFERENCE_ID = re.compile(r"[^ \t\n\x0b\f\r][ -~]*")
INPUT_LOCATION_MAX = 1024


def check_inference_id(inference_id: str) -> str:
    """The id, or a ClientError (400) naming what InvokeEndpointAsync allows."""
    if not 1 <= len(inference_id) <= INFERENCE_ID_MAX or not INFERENCE_ID.fullmatch(inference_id):
        raise ClientError(
            400,
            f"X-Amzn-SageMaker-Inference-Id must be 1 to {INFERENCE_ID_MAX} printable ASCII characters, "
            f"the first not a space (InvokeEndpointAsync's InferenceId); got {inference_id[:80]!r}",
        )
    return inference_id


def file_name(inference_id: str) -> str:
    """One file name per id, never a path: every character but letters, digits and `_.-~` is
    percent-encoded (`/` too), and the suffix added to it rules out `.` and `..`."""
    return urllib.parse.quote(inference_id, safe="")


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
        capture: Any = None,  # a sagestack.local.serving.capture.CaptureWriter
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

        try:
            inference_id = check_inference_id(
                headers.get("x-amzn-sagemaker-inference-id") or str(uuid.uuid4())
            )
            self.options.local(location)  # refused now when it is not under the local S3 root
        except ClientError as e:
            await respond(send, 400, json.dumps({"message": e.message}).encode(), headers=VALIDATION_ERROR)
            return
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
                source = a.local(r.input_location)  # again: a symlink may have moved since
                if not source.is_file():
                    raise ClientError(400, f"the input location {r.input_location} does not exist")
                body = source.read_bytes()
                payload, out_type = await self.predict(body, r.content_type, r.accept)
                write_atomically(a.local(output), payload)
            except Exception as e:
                status, message = error_response(e)
                try:
                    write_atomically(a.local(failure), message.encode())
                except (ClientError, OSError) as unwritten:  # the notification still says why
                    message += f" (and the failure was not written: {error_response(unwritten)[1]})"
                self._notify(r, "Failed", failure, code=status, reason=message)
            else:
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
        private_dir(a.notifications.parent)
        with open_private(a.notifications) as f:
            f.write(json.dumps(message) + "\n")


def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary name, then rename: a reader polling for the result never sees half.
    The result holds request data: a 0600 file, in folders made 0700."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.tmp")
    write_private_bytes(tmp, data)
    tmp.replace(path)
