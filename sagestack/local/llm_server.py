"""`sagestack local serve` of an LLM endpoint: the container's routes (GET /ping, POST
/invocations, streamed when the body asks) and the runtime API's — POST
/endpoints/<name>/invocations (InvokeEndpoint) and /endpoints/<name>/invocations-response-stream
(InvokeEndpointWithResponseStream, framed as the AWS event stream, local/response_stream.py) — so
boto3's own sagemaker-runtime client, pointed here, parses every answer. The container's own
schemas are local/llm_protocol.py's; a client's mistake reaches the runtime routes as the
service's ModelError (424, with the container's status and message), as it does in the cloud.

Generation runs token by token with the model's key/value cache in worker threads; requests
interleave a token at a time under one lock (a simple continuous batch: every client advances),
at most `max_batch_size` at once (the others wait, as the containers queue them). A client that
disconnects stops its generation at the next token."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sagestack.local.asgi import Receive, Scope, Send, read_body, respond
from sagestack.local.llm_protocol import (
    Generation,
    Limits,
    RequestError,
    Schema,
    Token,
    chunk,
    content_type,
    last,
    parse,
    whole,
)
from sagestack.local.response_stream import CONTENT_TYPE as EVENT_STREAM
from sagestack.local.response_stream import model_stream_error, payload_part

# InvokeEndpoint's answer names the variant that served it (the endpoint's one: AllTraffic)
INVOKED_VARIANT = ((b"x-amzn-invoked-production-variant", b"AllTraffic"),)


@dataclass
class Stats:
    generated: int = 0  # tokens, over every request
    cancelled: int = 0  # generations stopped because their client left


@dataclass
class LlmModelServer:
    """The model, its tokenizer and how the endpoint's container would serve it."""

    model: Any
    tokenizer: Any
    schema: Schema
    limits: Limits
    name: str = "model"
    max_batch_size: int = 8
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self) -> None:
        self._step = threading.Lock()
        self._slots = threading.Semaphore(self.max_batch_size)

    def tokens(self, g: Generation, cancelled: threading.Event) -> Iterator[tuple[Token, str]]:
        """Each new token and the finish reason so far ('' until the last)."""
        import torch

        eos = self.tokenizer.eos_token_id
        rng = torch.Generator().manual_seed(g.seed) if g.seed is not None else None
        ids = torch.tensor([g.prompt_ids])
        past, out_ids, text = None, [], ""
        with self._slots:
            for i in range(g.max_new_tokens):
                if cancelled.is_set():
                    self.stats.cancelled += 1
                    return
                with self._step, torch.no_grad():
                    result = self.model(
                        input_ids=ids if past is None else ids[:, -1:], past_key_values=past, use_cache=True
                    )
                past = result.past_key_values
                logprobs = torch.log_softmax(result.logits[0, -1].float(), dim=-1)
                nxt = _pick(logprobs, g, rng)
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
                out_ids.append(nxt)
                full = self.tokenizer.decode(out_ids, skip_special_tokens=True)
                piece, text = full[len(text) :], full
                self.stats.generated += 1
                finish = (
                    "eos_token"
                    if nxt == eos
                    else "stop_sequence"
                    if any(text.endswith(s) for s in g.stop)
                    else "length"
                    if i == g.max_new_tokens - 1
                    else ""
                )
                yield Token(nxt, piece, float(logprobs[nxt])), finish
                if finish:
                    return

    # ---- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
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
            await self._stream(g, receive, send, framed=framed)
        else:
            await self._whole(g, send, headers=INVOKED_VARIANT if runtime else ())

    async def _whole(self, g: Generation, send: Send, headers: tuple[tuple[bytes, bytes], ...]) -> None:
        g.stream = False
        text, count, finish = "", 0, "length"
        async for token, end in self._run(g, threading.Event()):
            text, count, finish = text + token.text, count + 1, end or finish
        await respond(send, 200, whole(self.schema, g, text, count, finish, self.name), headers=headers)

    async def _stream(self, g: Generation, receive: Receive, send: Send, *, framed: bool) -> None:
        kind = content_type(self.schema, g, streamed=True)
        headers = [(b"content-type", (EVENT_STREAM if framed else kind).encode())]
        if framed:
            headers.append((b"x-amzn-sagemaker-content-type", kind.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        cancelled = threading.Event()
        watcher = asyncio.ensure_future(_disconnected(receive, cancelled))
        text, count, finish = "", 0, "length"
        try:
            async for token, end in self._run(g, cancelled):
                data = chunk(self.schema, g, count, token, self.name)
                text, count, finish = text + token.text, count + 1, end or finish
                await send(
                    {
                        "type": "http.response.body",
                        "body": payload_part(data) if framed else data,
                        "more_body": True,
                    }
                )
            if cancelled.is_set():
                return
            data = last(self.schema, g, text, count, finish, self.name)
            await send({"type": "http.response.body", "body": payload_part(data) if framed else data})
        except Exception as e:  # the model failed after streaming began: the runtime's error event
            if framed:
                await send({"type": "http.response.body", "body": model_stream_error(str(e))})
            raise
        finally:
            watcher.cancel()

    async def _run(self, g: Generation, cancelled: threading.Event) -> Any:
        """The tokens of `g`, from a worker thread, as they come."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def work() -> None:
            try:
                for item in self.tokens(g, cancelled):
                    loop.call_soon_threadsafe(queue.put_nowait, item)
            except BaseException as e:
                loop.call_soon_threadsafe(queue.put_nowait, e)
            loop.call_soon_threadsafe(queue.put_nowait, None)

        threading.Thread(target=work, daemon=True).start()
        while (item := await queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item


def _pick(logprobs: Any, g: Generation, rng: Any) -> int:
    import torch

    if not g.do_sample:
        return int(torch.argmax(logprobs))
    scores = logprobs / g.temperature
    if g.top_k:
        kth = torch.topk(scores, min(g.top_k, scores.numel())).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if g.top_p < 1:
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, dim=-1) - ordered < g.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    return int(torch.multinomial(probs / probs.sum(), 1, generator=rng))


async def _disconnected(receive: Receive, cancelled: threading.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    cancelled.set()


async def _model_error(send: Send, e: RequestError) -> None:
    """The runtime's answer to a container's 4xx: ModelError (424), the container's status and body."""
    original = e.body().decode()
    body = {
        "Message": f'Received client error ({e.status}) from primary with message "{original}".',
        "OriginalStatusCode": e.status,
        "OriginalMessage": original,
    }
    await respond(send, 424, json.dumps(body).encode(), headers=((b"x-amzn-errortype", b"ModelError"),))
