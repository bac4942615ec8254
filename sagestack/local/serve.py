"""`sagestack local serve`: the SageMaker serving contract on localhost, behind uvicorn (ASGI).

The container's routes (GET /ping, POST /invocations) and the runtime API's
(POST /endpoints/<name>/invocations, and with AsyncOptions POST /endpoints/<name>/async-invocations),
so boto3's sagemaker-runtime client can be pointed here; with a capture folder every invocation is
recorded in SageMaker's data-capture format (sagestack.local.capture).

GET /ping answers 200 once the model is loaded; POST /invocations runs the model's
code/inference.py (model_fn / input_fn / predict_fn / output_fn; the toolkit's defaults where one
is missing). Requests are batched as the endpoint's `batching:` says, with TorchServe's meaning: each
of `workers` takes up to `max_batch` waiting requests (never more than MAX_ROWS samples), waiting at
most `max_delay_ms` for the batch to fill, and runs one predict_fn for them; without `batching:`
one request per forward pass, as the container does by default.

Errors are answered as the inference toolkit's Transformer answers them (sagemaker_inference/
transformer.py): an exception with a `status_code` (the toolkit's BaseInferenceToolkitError, which
training_src/inference.py raises for a payload it cannot take) gets that status and its message;
any other exception is a 500. JSON and CSV bodies reach input_fn as text, others as bytes; a missing
or `*/*` Accept becomes SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT (application/json).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import io
import json
import os
import tarfile
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

MAX_BODY = 6 * 1024 * 1024  # SageMaker real-time endpoints accept payloads up to 6 MB
MAX_ROWS = 16384  # samples per forward pass, as training_src/inference.py's handler slices them
JSON = "application/json"
UTF8_TYPES = (JSON, "text/csv")  # sagemaker_inference.content_types: decoded to str for input_fn

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ServeError(Exception):
    """The model cannot be served; the message says why."""


@dataclass
class Handlers:
    model: Any
    input_fn: Callable[[bytes | str, str | None], Any]
    predict_fn: Callable[[Any, Any], Any]
    output_fn: Callable[[Any, str], Any]
    module: ModuleType | None = None


def unpack_model(archive: Path, dest: Path) -> Path:
    """model.tar.gz -> dest (replacing what was there), as SageMaker lays out /opt/ml/model."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def load_handlers(model_dir: Path) -> Handlers:
    """Import model_dir/code/inference.py and call its model_fn, as the inference toolkit does."""
    script = model_dir / "code" / "inference.py"
    module = None
    if script.exists():
        spec = importlib.util.spec_from_file_location(f"_sagestack_inference_{abs(hash(model_dir))}", script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    model_fn = getattr(module, "model_fn", None) or _default_model_fn
    model = model_fn(str(model_dir))
    return Handlers(
        model=model,
        input_fn=getattr(module, "input_fn", None) or _default_input_fn,
        predict_fn=getattr(module, "predict_fn", None) or _default_predict_fn,
        output_fn=getattr(module, "output_fn", None) or _default_output_fn,
        module=module,
    )


# The toolkit's defaults (TorchScript model.pt, JSON / npy in, JSON out), for scripts that omit some.
def _default_model_fn(model_dir: str) -> Any:
    import torch

    path = Path(model_dir) / "model.pt"
    if not path.exists():
        raise ServeError(f"no model_fn in code/inference.py and no TorchScript {path}")
    return torch.jit.load(str(path), map_location="cpu").eval()  # type: ignore[no-untyped-call]


def _default_input_fn(body: bytes | str, content_type: str | None) -> Any:
    import numpy as np
    import torch

    kind = (content_type or JSON).split(";")[0].strip()
    if kind == "application/json":
        return torch.from_numpy(np.asarray(json.loads(body), dtype=np.float32))
    if kind == "application/x-npy":
        raw = body.encode() if isinstance(body, str) else body
        return torch.from_numpy(np.load(io.BytesIO(raw), allow_pickle=False))
    raise _status_error(f"content type '{kind}' is not supported", 415)


def _default_predict_fn(data: Any, model: Any) -> Any:
    import torch

    with torch.inference_mode():
        return model(data)


def _default_output_fn(prediction: Any, accept: str) -> Any:
    return json.dumps(prediction.tolist()).encode(), "application/json"


class ClientError(Exception):
    """The toolkit's GenericInferenceToolkitError, for the default handlers here."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def _status_error(message: str, status: int) -> ClientError:
    return ClientError(status, message)


def error_response(e: BaseException) -> tuple[int, str]:
    """(status, message) as the toolkit's Transformer answers an exception."""
    status = getattr(e, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status, str(getattr(e, "message", e))
    return 500, f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- dynamic batching


@dataclass
class _Pending:
    data: Any
    rows: int
    future: asyncio.Future[Any]


@dataclass
class BatchStats:
    batches: int = 0
    requests: int = 0
    largest: int = 0
    sizes: dict[int, int] = field(default_factory=dict)


def _set_threads(threads: int) -> None:
    """torch's threads for the calling (predict) thread: each worker's forward passes use this many."""
    import torch

    torch.set_num_threads(max(1, threads))


class Batcher:
    """Queues decoded requests; each of `workers` takes up to max_batch of them (waiting at most
    max_delay_ms for a batch to fill) and runs predict_fn once for them, on a thread of its own."""

    def __init__(
        self,
        handlers: Handlers,
        *,
        max_batch: int = 1,
        max_delay_ms: float = 0.0,
        workers: int = 1,
        threads: int | None = None,
    ) -> None:
        self.handlers = handlers
        self.max_batch = max(1, max_batch)
        self.max_delay = max(0.0, max_delay_ms) / 1000
        self.workers = max(1, workers)
        self.stats = BatchStats()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._carry: list[_Pending] = []  # a request too big for the batch it came to leads the next one
        self._pool = ThreadPoolExecutor(
            max_workers=self.workers,
            thread_name_prefix="predict",
            initializer=functools.partial(_set_threads, threads) if threads else None,
        )

    def start(self) -> None:
        self._queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run()) for _ in range(self.workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._pool.shutdown(wait=False)

    async def predict(self, data: Any) -> Any:
        assert self._queue is not None, "start() the batcher first"
        rows = int(data.shape[0]) if hasattr(data, "shape") and len(data.shape) > 0 else 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(data, rows, future))
        return await future

    async def _run(self) -> None:
        """One worker: TorchServe's batch aggregation (the first request, then up to max_batch - 1
        more until the delay since the first has passed), then one predict_fn."""
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            first = self._carry.pop() if self._carry else await queue.get()
            batch, rows = [first], first.rows
            deadline = loop.time() + self.max_delay
            while len(batch) < self.max_batch:
                if queue.empty():
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(queue.get(), remaining)
                    except TimeoutError:
                        break
                else:
                    item = queue.get_nowait()
                if rows + item.rows > MAX_ROWS:
                    self._carry.append(item)  # too many samples to join this batch: it leads the next
                    break
                batch.append(item)
                rows += item.rows
            await self._execute(loop, batch)

    async def _execute(self, loop: asyncio.AbstractEventLoop, batch: list[_Pending]) -> None:
        self.stats.batches += 1
        self.stats.requests += len(batch)
        total = sum(p.rows for p in batch)
        self.stats.largest = max(self.stats.largest, total)
        self.stats.sizes[total] = self.stats.sizes.get(total, 0) + 1
        try:
            results = await loop.run_in_executor(self._pool, self._predict_batch, batch)
        except Exception as e:  # the model's own fault: every request of the batch gets it
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(e)
            return
        for p, r in zip(batch, results, strict=True):
            if not p.future.done():
                p.future.set_result(r)

    def _predict_batch(self, batch: list[_Pending]) -> list[Any]:
        h = self.handlers
        if len(batch) == 1:
            return [h.predict_fn(batch[0].data, h.model)]
        import torch

        joined = torch.cat([p.data for p in batch])
        out = h.predict_fn(joined, h.model)
        return list(torch.split(out, [p.rows for p in batch]))


# ---------------------------------------------------------------- the ASGI app


@dataclass(frozen=True)
class AsyncOptions:
    """Asynchronous inference as the cloud runs it: InvokeEndpointAsync names an input location;
    the result is written to <output>/<InferenceId>.out, a failure (the error, as the model
    answered it) to <failures>/<InferenceId>-error.out; each outcome is also appended to
    notifications.jsonl in the shape of the SNS message SageMaker publishes."""

    endpoint: str
    s3_root: Path  # s3://<bucket>/<key> is <s3_root>/<bucket>/<key> here
    output_uri: str  # s3://…/output/
    failure_uri: str  # s3://…/failures/
    notifications: Path

    def local(self, location: str) -> Path:
        if location.startswith("s3://"):
            return self.s3_root / location.removeprefix("s3://")
        return Path(location.removeprefix("file://"))


@dataclass
class _AsyncRequest:
    inference_id: str
    input_location: str
    content_type: str | None
    accept: str


class ServingApp:
    """A raw ASGI application: GET /ping, POST /invocations (also as the runtime API's
    /endpoints/<name>/invocations), and with async options POST /endpoints/<name>/async-invocations
    (uvicorn runs it)."""

    def __init__(
        self,
        handlers: Handlers,
        batcher: Batcher,
        *,
        asynchronous: AsyncOptions | None = None,
        capture: Any = None,  # a sagestack.local.capture.CaptureWriter
    ) -> None:
        self.handlers = handlers
        self.batcher = batcher
        self.default_accept = os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", JSON)
        self.asynchronous = asynchronous
        self.capture = capture
        self._async_queue: asyncio.Queue[_AsyncRequest] | None = None
        self._async_worker: asyncio.Task[None] | None = None
        self.async_done = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/ping":
            if method not in ("GET", "HEAD"):
                await _respond(send, 405, b'{"error": "use GET /ping"}')
                return
            await _respond(send, 200, b'{"status": "healthy"}')
            return
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "endpoints" and parts[2] == "async-invocations":
            await self._invoke_async(scope, receive, send)
            return
        if path != "/invocations" and not (
            len(parts) == 3 and parts[0] == "endpoints" and parts[2] == "invocations"
        ):
            await _respond(
                send, 404, json.dumps({"error": f"no route {path}; use /ping or /invocations"}).encode()
            )
            return
        if method != "POST":
            await _respond(send, 405, b'{"error": "use POST /invocations"}')
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = await _read_body(receive)
        if body is None:
            await _respond(
                send, 413, json.dumps({"error": f"payloads are limited to {MAX_BODY} bytes"}).encode()
            )
            return
        content_type = headers.get("content-type")
        accept = headers.get("accept")
        if not accept or accept == "*/*":
            accept = self.default_accept
        h = self.handlers
        try:
            payload_in: bytes | str = body.decode("utf-8") if content_type in UTF8_TYPES else body
            data = h.input_fn(payload_in, content_type)
            prediction = await self.batcher.predict(data)
            result = h.output_fn(prediction, accept)
        except Exception as e:
            await _error(send, e)
            return
        payload, out_type = result if isinstance(result, tuple) else (result, accept)
        if isinstance(payload, str):
            payload = payload.encode()
        if self.capture is not None:
            self.capture.capture(body, content_type, payload, out_type)
        await _respond(send, 200, payload, out_type)

    async def _predict(self, body: bytes, content_type: str | None, accept: str) -> tuple[bytes, str]:
        h = self.handlers
        payload_in: bytes | str = body.decode("utf-8") if content_type in UTF8_TYPES else body
        data = h.input_fn(payload_in, content_type)
        prediction = await self.batcher.predict(data)
        result = h.output_fn(prediction, accept)
        payload, out_type = result if isinstance(result, tuple) else (result, accept)
        return (payload.encode() if isinstance(payload, str) else payload), out_type

    async def _invoke_async(self, scope: Scope, receive: Receive, send: Send) -> None:
        """InvokeEndpointAsync: 202 with the InferenceId and where the result or failure will be."""
        await _read_body(receive)
        a = self.asynchronous
        if a is None or self._async_queue is None:
            await _respond(
                send,
                400,
                b'{"message": "this endpoint is real-time; serve it with --async (or async: in the spec)"}',
            )
            return
        if scope["method"] != "POST":
            await _respond(send, 405, b'{"message": "use POST"}')
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        location = headers.get("x-amzn-sagemaker-inputlocation")
        if not location:
            await _respond(send, 400, b'{"message": "X-Amzn-SageMaker-InputLocation is required"}')
            return
        import uuid

        inference_id = headers.get("x-amzn-sagemaker-inference-id") or str(uuid.uuid4())
        accept = headers.get("x-amzn-sagemaker-accept") or self.default_accept
        request = _AsyncRequest(inference_id, location, headers.get("x-amzn-sagemaker-content-type"), accept)
        await self._async_queue.put(request)
        output = f"{a.output_uri.rstrip('/')}/{inference_id}.out"
        failure = f"{a.failure_uri.rstrip('/')}/{inference_id}-error.out"
        body = json.dumps({"InferenceId": inference_id, "OutputLocation": output}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 202,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-amzn-sagemaker-outputlocation", output.encode()),
                    (b"x-amzn-sagemaker-failurelocation", failure.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _run_async(self) -> None:
        assert self._async_queue is not None and self.asynchronous is not None
        a = self.asynchronous
        while True:
            r = await self._async_queue.get()
            output = f"{a.output_uri.rstrip('/')}/{r.inference_id}.out"
            failure = f"{a.failure_uri.rstrip('/')}/{r.inference_id}-error.out"
            try:
                source = a.local(r.input_location)
                if not source.is_file():
                    raise ClientError(400, f"the input location {r.input_location} does not exist")
                body = source.read_bytes()
                payload, out_type = await self._predict(body, r.content_type, r.accept)
            except Exception as e:
                status, message = error_response(e)
                _write_atomically(a.local(failure), message.encode())
                self._notify(r, "Failed", failure, code=status, reason=message)
            else:
                _write_atomically(a.local(output), payload)
                if self.capture is not None:
                    self.capture.capture(body, r.content_type, payload, out_type)
                self._notify(r, "Completed", output, content_type=out_type)
            self.async_done += 1

    def _notify(self, r: _AsyncRequest, status: str, location: str, **detail: Any) -> None:
        """The SNS message SageMaker publishes for an async result (appended to a local file)."""
        import datetime

        a = self.asynchronous
        assert a is not None
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

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.batcher.start()
                if self.asynchronous is not None:
                    self._async_queue = asyncio.Queue()
                    self._async_worker = asyncio.get_running_loop().create_task(self._run_async())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._async_worker is not None:
                    self._async_worker.cancel()
                await self.batcher.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


async def _read_body(receive: Receive) -> bytes | None:
    """The request body; None when it is over MAX_BODY (read to the end and dropped, so that the
    client, still sending, gets the 413 rather than a reset connection)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_BODY:
            chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks) if size <= MAX_BODY else None


async def _error(send: Send, e: Exception) -> None:
    status, message = error_response(e)
    await _respond(send, status, json.dumps({"error": message}).encode())


async def _respond(send: Send, status: int, body: bytes, content_type: str = "application/json") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- running it


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    max_batch: int = 1  # requests per forward pass (the endpoint's batching.max_batch_size)
    max_delay_ms: float = 0.0
    workers: int = 1
    threads: int = 1  # torch threads per worker
    asynchronous: AsyncOptions | None = None
    capture_dir: Path | None = None  # <destination>/<endpoint>: capture as the endpoint would
    capture_percent: int = 100


def build_server(model_dir: Path, options: ServeOptions) -> tuple[Any, ServingApp]:
    import uvicorn

    handlers = load_handlers(model_dir)
    capture = None
    if options.capture_dir is not None:
        from sagestack.local.capture import CaptureWriter

        capture = CaptureWriter(options.capture_dir, options.capture_percent)
    app = ServingApp(
        handlers,
        Batcher(
            handlers,
            max_batch=options.max_batch,
            max_delay_ms=options.max_delay_ms,
            workers=options.workers,
            threads=options.threads,
        ),
        asynchronous=options.asynchronous,
        capture=capture,
    )
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_level="warning",
        access_log=False,
        # Nothing sits in front of a local endpoint: skip the proxy-header middleware and the
        # per-response Server/Date headers (each costs every request a little).
        proxy_headers=False,
        server_header=False,
        date_header=False,
    )
    return uvicorn.Server(config), app


def batching_options(batching: Any, cpus: int) -> dict[str, Any]:
    """ServeOptions' batching, from an endpoint's `batching:` (a BatchingSpec or None), as the
    container would run on a machine of `cpus` CPUs: without it one request per forward pass and a
    worker per CPU (TorchServe's default), with it its size, delay, workers and threads."""
    if batching is None:
        return {"max_batch": 1, "max_delay_ms": 0.0, "workers": max(1, cpus), "threads": 1}
    return {
        "max_batch": batching.max_batch_size,
        "max_delay_ms": float(batching.max_delay_ms),
        "workers": batching.workers or max(1, cpus),
        "threads": batching.threads_per_worker,
    }


class BackgroundServer:
    """The server on a thread (tests, `--predict`): `with BackgroundServer(dir, opts) as url: …`."""

    def __init__(self, model_dir: Path, options: ServeOptions) -> None:
        self.server, self.app = build_server(model_dir, options)
        self.options = options
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        import time

        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ServeError(f"the server did not start on {self.options.host}:{self.options.port}")
            time.sleep(0.02)
        return f"http://{self.options.host}:{self.options.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """`python -m sagestack.local.serve MODEL_DIR [--port P] [--max-batch N] [--max-delay-ms D]`:
    serve an unpacked model directory (what benchmarks start in a process of its own)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sagestack.local.serve")
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-batch", type=int, default=1, help="requests per forward pass")
    parser.add_argument("--max-delay-ms", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    args = parser.parse_args(argv)
    server, _ = build_server(
        args.model_dir,
        ServeOptions(
            host=args.host,
            port=args.port,
            max_batch=args.max_batch,
            max_delay_ms=args.max_delay_ms,
            workers=args.workers,
            threads=args.threads,
        ),
    )
    server.run()


if __name__ == "__main__":
    main()
