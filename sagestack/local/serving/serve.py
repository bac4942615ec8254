"""`sagestack local serve`: the SageMaker serving contract on localhost, behind uvicorn (ASGI).

The container's routes (GET /ping, POST /invocations) and the runtime API's
(POST /endpoints/<name>/invocations, and with AsyncOptions POST /endpoints/<name>/async-invocations,
local/serving/async_inference.py), so boto3's sagemaker-runtime client can be pointed here; with a capture
folder every invocation is recorded in SageMaker's data-capture format (local/serving/capture.py).

GET /ping answers 200 once the model is loaded; POST /invocations runs the model's
code/inference.py with the toolkit's defaults where one is missing (local/serving/handlers.py), its
requests batched as the endpoint's `batching:` says (local/serving/batching.py). Errors are answered as the
inference toolkit's Transformer answers them. JSON and CSV bodies reach input_fn as text, others as
bytes; a missing or `*/*` Accept becomes SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT (application/json).
A TensorFlow SavedModel (`<version>/saved_model.pb`) is answered as the TensorFlow Serving container
answers it instead (local/serving/tf_serving.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.serving.asgi import (
    MAX_BODY,
    Receive,
    Scope,
    Send,
    read_body,
    request_headers,
    respond,
    respond_error,
)
from sagestack.local.serving.async_inference import REAL_TIME_ONLY, AsyncInvocations, AsyncOptions
from sagestack.local.serving.batching import Batcher
from sagestack.local.serving.capture import CaptureWriter
from sagestack.local.serving.handlers import (
    JSON,
    UTF8_TYPES,
    ClientError,
    Handlers,
    ServeError,
    load_handlers,
)
from sagestack.local.serving.tf_serving import load_tf_handlers, saved_model_version


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
        capture: Any = None,  # a sagestack.local.serving.capture.CaptureWriter
    ) -> None:
        self.handlers = handlers
        self.batcher = batcher
        self.default_accept = os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", JSON)
        self.capture = capture
        self.asynchronous = (
            AsyncInvocations(asynchronous, self._predict, default_accept=self.default_accept, capture=capture)
            if asynchronous is not None
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/ping":
            if method not in ("GET", "HEAD"):
                await respond(send, 405, b'{"error": "use GET /ping"}')
                return
            await respond(send, 200, b'{"status": "healthy"}')
            return
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "endpoints" and parts[2] == "async-invocations":
            if self.asynchronous is None:
                await read_body(receive)
                await respond(send, 400, REAL_TIME_ONLY)
                return
            await self.asynchronous.invoke(scope, receive, send)
            return
        if path != "/invocations" and not (
            len(parts) == 3 and parts[0] == "endpoints" and parts[2] == "invocations"
        ):
            await respond(
                send, 404, json.dumps({"error": f"no route {path}; use /ping or /invocations"}).encode()
            )
            return
        if method != "POST":
            await respond(send, 405, b'{"error": "use POST /invocations"}')
            return
        await self._invoke(scope, receive, send)

    async def _invoke(self, scope: Scope, receive: Receive, send: Send) -> None:
        """InvokeEndpoint: the model's answer (captured when capture is on), or the toolkit's error."""
        headers = request_headers(scope)
        body = await read_body(receive)
        if body is None:
            await respond(
                send, 413, json.dumps({"error": f"payloads are limited to {MAX_BODY} bytes"}).encode()
            )
            return
        content_type = headers.get("content-type")
        accept = headers.get("accept")
        if not accept or accept == "*/*":
            accept = self.default_accept
        try:
            payload, out_type = await self._predict(body, content_type, accept)
        except Exception as e:
            await respond_error(send, e)
            return
        if self.capture is not None:
            self.capture.capture(body, content_type, payload, out_type)
        await respond(send, 200, payload, out_type)

    async def _predict(self, body: bytes, content_type: str | None, accept: str) -> tuple[bytes, str]:
        h = self.handlers
        payload_in: bytes | str = body
        if content_type in UTF8_TYPES:  # as the toolkit's Transformer decodes them, but the client's
            try:  # mistake is a 400 (training_src/inference.py's own words), never a 500
                payload_in = body.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ClientError(400, f"the body is not UTF-8 text: {e}") from None
        data = h.input_fn(payload_in, content_type)
        prediction = await self.batcher.predict(data)
        result = h.output_fn(prediction, accept)
        payload, out_type = result if isinstance(result, tuple) else (result, accept)
        return (payload.encode() if isinstance(payload, str) else payload), out_type

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.batcher.start()
                if self.asynchronous is not None:
                    self.asynchronous.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.asynchronous is not None:
                    self.asynchronous.stop()
                await self.batcher.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


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


def load_model_handlers(model_dir: Path) -> Handlers:
    """The handlers of an unpacked model (`local serve` and `local transform`): a TensorFlow
    SavedModel's as TensorFlow Serving answers, else its code/inference.py's as the toolkit runs it."""
    return (
        load_tf_handlers(model_dir)
        if saved_model_version(model_dir) is not None
        else load_handlers(model_dir)
    )


def build_server(model_dir: Path, options: ServeOptions) -> tuple[Any, ServingApp]:
    """The server for an unpacked model: a TensorFlow SavedModel (`<version>/saved_model.pb`) as the
    TensorFlow Serving container answers it (local/serving/tf_serving.py: one request per prediction, its
    own batching not emulated), anything else with its code/inference.py as the PyTorch one does."""
    import uvicorn

    tf_model = saved_model_version(model_dir) is not None
    handlers = load_model_handlers(model_dir)
    capture = None
    if options.capture_dir is not None:
        capture = CaptureWriter(options.capture_dir, options.capture_percent)
    app = ServingApp(
        handlers,
        Batcher(
            handlers,
            max_batch=1 if tf_model else options.max_batch,
            max_delay_ms=0.0 if tf_model else options.max_delay_ms,
            workers=options.workers,
            threads=None if tf_model else options.threads,  # torch's threads
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


def runtime_client(url: str, config: Any = None) -> Any:
    """boto3's own SageMaker Runtime client, pointed at a server of this machine (`url`): the
    requests and the event-stream parsing are AWS's; the credentials are placeholders it never checks."""
    import boto3

    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=config,
    )


class BackgroundUvicorn:
    """A uvicorn server on a thread (tests, `--predict`, `--prompt`): `with … as url: …`."""

    def __init__(self, server: Any, host: str, port: int) -> None:
        self.server, self.host, self.port = server, host, port
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with contextlib.suppress(SystemExit):  # uvicorn exits a server that cannot bind: __enter__ says so
            self.server.run()

    def __enter__(self) -> str:
        import time

        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ServeError(f"the server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return f"http://{self.host}:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)


class BackgroundServer(BackgroundUvicorn):
    """The model server on a thread: `with BackgroundServer(dir, opts) as url: …`."""

    def __init__(self, model_dir: Path, options: ServeOptions) -> None:
        server, self.app = build_server(model_dir, options)
        self.options = options
        super().__init__(server, options.host, options.port)


def main(argv: list[str] | None = None) -> None:
    """`python -m sagestack.local.serving.serve MODEL_DIR [--port P] [--max-batch N] [--max-delay-ms D]`:
    serve an unpacked model directory (what benchmarks start in a process of its own)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sagestack.local.serving.serve")
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
