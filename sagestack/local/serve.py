"""`sagestack local serve`: the SageMaker serving contract on localhost, behind uvicorn (ASGI).

GET /ping answers 200 once the model is loaded; POST /invocations runs the model's
code/inference.py (model_fn / input_fn / predict_fn / output_fn; the toolkit's defaults where one
is missing). Requests are batched dynamically: while the model runs one batch, new requests
queue, and the next batch takes all of them (up to max_batch rows) — no added wait at low load,
bigger batches under load. `max_delay_ms` > 0 also waits that long for a batch to fill.

Errors are answered as the inference toolkit's Transformer answers them (sagemaker_inference/
transformer.py): an exception with a `status_code` (the toolkit's BaseInferenceToolkitError, which
training_src/inference.py raises for a payload it cannot take) gets that status and its message;
any other exception is a 500. JSON and CSV bodies reach input_fn as text, others as bytes; a missing
or `*/*` Accept becomes SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT (application/json).
"""

from __future__ import annotations

import asyncio
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


class Batcher:
    """Queues decoded requests and runs predict_fn on as many as are waiting, in one worker thread."""

    def __init__(self, handlers: Handlers, *, max_batch: int = 32, max_delay_ms: float = 0.0) -> None:
        self.handlers = handlers
        self.max_batch = max(1, max_batch)
        self.max_delay = max(0.0, max_delay_ms) / 1000
        self.stats = BatchStats()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="predict")

    def start(self) -> None:
        self._queue = asyncio.Queue()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._pool.shutdown(wait=False)

    async def predict(self, data: Any) -> Any:
        assert self._queue is not None, "start() the batcher first"
        rows = int(data.shape[0]) if hasattr(data, "shape") and len(data.shape) > 0 else 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(data, rows, future))
        return await future

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            first = await queue.get()
            batch, rows = [first], first.rows
            deadline = loop.time() + self.max_delay
            while rows < self.max_batch:
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
                if rows + item.rows > self.max_batch:
                    # Too big to join this batch: it leads the next one.
                    await self._execute(loop, batch)
                    batch, rows = [item], item.rows
                    deadline = loop.time() + self.max_delay
                    continue
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


class ServingApp:
    """A raw ASGI application: GET /ping, POST /invocations (uvicorn runs it)."""

    def __init__(self, handlers: Handlers, batcher: Batcher) -> None:
        self.handlers = handlers
        self.batcher = batcher
        self.default_accept = os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", JSON)

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
        if path != "/invocations":
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
        await _respond(send, 200, payload, out_type)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.batcher.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.batcher.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


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
    max_batch: int = 32
    max_delay_ms: float = 0.0


def build_server(model_dir: Path, options: ServeOptions) -> tuple[Any, ServingApp]:
    import uvicorn

    handlers = load_handlers(model_dir)
    app = ServingApp(
        handlers, Batcher(handlers, max_batch=options.max_batch, max_delay_ms=options.max_delay_ms)
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
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--max-delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    server, _ = build_server(
        args.model_dir,
        ServeOptions(
            host=args.host, port=args.port, max_batch=args.max_batch, max_delay_ms=args.max_delay_ms
        ),
    )
    server.run()


if __name__ == "__main__":
    main()
