"""`sagestack local serve` of an LLM endpoint: the container's routes (GET /ping, POST
/invocations, streamed when the body asks) and the runtime API's — POST
/endpoints/<name>/invocations (InvokeEndpoint) and /endpoints/<name>/invocations-response-stream
(InvokeEndpointWithResponseStream, framed as the AWS event stream, local/llm/response_stream.py) — so
boto3's own sagemaker-runtime client, pointed here, parses every answer. The container's own
schemas are local/llm/protocol.py's; a client's mistake reaches the runtime routes as the
service's ModelError (424, with the container's status and message), as it does in the cloud.

Generation runs in local/llm/batcher.py's engine: requests that arrive together, or while others
run, share one batched forward pass a step (continuous batching, at most `max_batch_size`
sequences at once; the others wait, as the containers queue them). A streamed answer sends every
token the engine made since its last write in one write (the same frames, fewer system calls); a
buffered one hears from the engine only at its end. A client that disconnects stops its generation
at the next step."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from sagestack.local.llm.batcher import Batcher, Outcome, Stats
from sagestack.local.llm.protocol import (
    Generation,
    Limits,
    RequestError,
    Schema,
    chunk,
    content_type,
    error_chunk,
    last,
    parse,
    whole,
)
from sagestack.local.llm.response_stream import CONTENT_TYPE as EVENT_STREAM
from sagestack.local.llm.response_stream import model_stream_error, payload_part
from sagestack.local.serving.asgi import Receive, Scope, Send, read_body, respond

_log = logging.getLogger("sagestack.local.llm")

# InvokeEndpoint's answer names the variant that served it (the endpoint's one: AllTraffic)
INVOKED_VARIANT = ((b"x-amzn-invoked-production-variant", b"AllTraffic"),)


@dataclass
class LlmModelServer:
    """The model, its tokenizer and how the endpoint's container would serve it."""

    model: Any
    tokenizer: Any
    schema: Schema
    limits: Limits
    name: str = "model"
    max_batch_size: int = 8
    engine: Batcher = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.engine = Batcher(self.model, self.tokenizer, self._deliver, max_batch_size=self.max_batch_size)
        self._pending: dict[Any, list[tuple[Any, Any]]] = {}  # per event loop, items not yet handed over
        self._lock = threading.Lock()

    @property
    def stats(self) -> Stats:
        return self.engine.stats

    # ---- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
                if kind == "shutdown":  # the engine's thread ends before the server says it has
                    await asyncio.to_thread(self.engine.close)
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] != "http":
            return
        path, parts = scope["path"], scope["path"].strip("/").split("/")
        if path == "/ping":
            await respond(send, 200, b'{"status": "healthy"}')
            return
        runtime = len(parts) == 3 and parts[0] == "endpoints"
        if scope["method"] != "POST" or not (
            path == "/invocations" or (runtime and parts[2] in ("invocations", "invocations-response-stream"))
        ):
            await respond(send, 404, json.dumps({"error": f"no route {scope['method']} {path}"}).encode())
            return
        body = await read_body(receive)
        try:
            if body is None:
                raise RequestError(self.schema, "payloads are limited to 6 MB", status=413)
            g = parse(self.schema, body, self.tokenizer, self.limits)
        except RequestError as e:
            await (_model_error(send, e) if runtime else respond(send, e.status, e.body()))
            return
        framed = runtime and parts[2] == "invocations-response-stream"
        if framed or (g.stream and not runtime):
            await self._stream(g, receive, send, runtime=framed)
        else:
            await self._whole(g, send, runtime=runtime)

    async def _whole(self, g: Generation, send: Send, *, runtime: bool) -> None:
        g.stream = False
        sink = self._submit(g, threading.Event(), streamed=False)
        try:
            end = await sink.get()
            if isinstance(end, Exception):
                raise end
        except Exception as e:  # the model's fault, not the client's: the container's 500
            await self._fault(send, e, runtime=runtime)
            return
        answer = whole(self.schema, g, end.text, end.tokens, end.finish, self.name)
        await respond(send, 200, answer, headers=INVOKED_VARIANT if runtime else ())

    async def _fault(self, send: Send, e: Exception, *, runtime: bool) -> None:
        _log.error("the model failed: %s: %s", type(e).__name__, e)
        fault = RequestError(self.schema, f"{type(e).__name__}: {e}", status=500)
        await (_model_error(send, fault) if runtime else respond(send, 500, fault.body()))

    async def _stream(self, g: Generation, receive: Receive, send: Send, *, runtime: bool) -> None:
        """Streamed: the first token is made before the 200 goes out, so that what fails at the
        start is a status; what fails later ends the stream with the container's error chunk, or
        on the runtime's route with its ModelStreamError event (boto3 raises it)."""
        framed = runtime  # the runtime's route frames the stream as the AWS event stream
        cancelled = threading.Event()
        watcher = asyncio.ensure_future(_disconnected(receive, cancelled))
        sink = self._submit(g, cancelled, streamed=True)
        first = await sink.get()
        if isinstance(first, Exception):
            watcher.cancel()
            await self._fault(send, first, runtime=runtime)
            return
        kind = content_type(self.schema, g, streamed=True)
        headers = [(b"content-type", (EVENT_STREAM if framed else kind).encode())]
        if framed:
            headers.append((b"x-amzn-sagemaker-content-type", kind.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        count, item = 0, first
        try:
            while True:
                out = []  # every token made since the last write: one write
                while isinstance(item, tuple):
                    data = chunk(self.schema, g, count, item[0], self.name)
                    out.append(payload_part(data) if framed else data)
                    count += 1
                    item = sink.get_nowait() if not sink.empty() else None
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, Outcome):
                    if item.finish == "cancelled":
                        return
                    data = last(self.schema, g, item.text, item.tokens, item.finish, self.name)
                    out.append(payload_part(data) if framed else data)
                    await send({"type": "http.response.body", "body": b"".join(out)})
                    return
                await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
                item = await sink.get()
        except Exception as e:  # the model failed after streaming began
            _log.error("the model failed mid-stream: %s: %s", type(e).__name__, e)
            message = f"{type(e).__name__}: {e}"
            end_of_stream = (
                model_stream_error(message) if framed else error_chunk(self.schema, g, 500, message)
            )
            await send({"type": "http.response.body", "body": b"".join(out) + end_of_stream})
        finally:
            watcher.cancel()

    def _deliver(self, items: list[tuple[Any, Any]]) -> None:
        """From the engine's thread: each item to its request's queue. One wake-up of the event loop
        a step however many sequences ran, and none while the last one is still pending (a loop
        that fell behind takes several steps' items at once)."""
        for (loop, queue), item in items:
            with self._lock:
                pending = self._pending.get(loop)
                if pending is None:
                    self._pending[loop] = pending = []
                    wake = True
                else:
                    wake = False
                pending.append((queue, item))
            if wake and loop.is_closed():  # the server stopped: nobody waits for these
                with self._lock:
                    self._pending.pop(loop, None)
            elif wake:
                loop.call_soon_threadsafe(self._hand_over, loop)

    def _hand_over(self, loop: Any) -> None:
        with self._lock:
            pending = self._pending.pop(loop, [])
        for queue, item in pending:
            queue.put_nowait(item)

    def _submit(self, g: Generation, cancelled: threading.Event, *, streamed: bool) -> asyncio.Queue[Any]:
        """`g` handed to the engine; its items arrive on the queue returned."""
        sink: asyncio.Queue[Any] = asyncio.Queue()
        self.engine.submit(g, (asyncio.get_running_loop(), sink), cancelled, streamed=streamed)
        return sink


async def _disconnected(receive: Receive, cancelled: threading.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    cancelled.set()


async def _model_error(send: Send, e: RequestError) -> None:
    """The runtime's answer to a container's 4xx or 5xx: ModelError (424), the container's status
    and body."""
    original = e.body().decode()
    side = "server" if e.status >= 500 else "client"
    body = {
        "Message": f'Received {side} error ({e.status}) from primary with message "{original}".',
        "OriginalStatusCode": e.status,
        "OriginalMessage": original,
    }
    await respond(send, 424, json.dumps(body).encode(), headers=((b"x-amzn-errortype", b"ModelError"),))
