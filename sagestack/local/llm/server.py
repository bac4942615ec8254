"""`sagestack local serve` of an LLM endpoint: the container's routes (GET /ping, POST
/invocations, streamed when the body asks) and the runtime API's — POST
/endpoints/<name>/invocations (InvokeEndpoint) and /endpoints/<name>/invocations-response-stream
(InvokeEndpointWithResponseStream, framed as the AWS event stream, local/llm/response_stream.py) — so
boto3's own sagemaker-runtime client, pointed here, parses every answer. The container's own
schemas are local/llm/protocol.py's; a client's mistake reaches the runtime routes as the
service's ModelError (424, with the container's status and message), as it does in the cloud.

Generation runs token by token with the model's key/value cache in worker threads; requests
interleave a token at a time under one lock (a simple continuous batch: every client advances),
at most `max_batch_size` at once (the others wait, as the containers queue them). A client that
disconnects stops its generation at the next token."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sagestack.local.llm.protocol import (
    Generation,
    Limits,
    RequestError,
    Schema,
    Token,
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
            await self._stream(g, receive, send, runtime=framed)
        else:
            await self._whole(g, send, runtime=runtime)

    async def _whole(self, g: Generation, send: Send, *, runtime: bool) -> None:
        g.stream = False
        text, count, finish = "", 0, "length"
        try:
            async for token, end in self._run(g, threading.Event()):
                text, count, finish = text + token.text, count + 1, end or finish
        except Exception as e:  # the model's fault, not the client's: the container's 500
            await self._fault(send, e, runtime=runtime)
            return
        answer = whole(self.schema, g, text, count, finish, self.name)
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
        tokens = self._run(g, cancelled)
        try:
            first = await anext(tokens, None)
        except Exception as e:
            watcher.cancel()
            await self._fault(send, e, runtime=runtime)
            return
        kind = content_type(self.schema, g, streamed=True)
        headers = [(b"content-type", (EVENT_STREAM if framed else kind).encode())]
        if framed:
            headers.append((b"x-amzn-sagemaker-content-type", kind.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        text, count, finish = "", 0, "length"
        try:
            item = first
            while item is not None:
                token, end = item
                data = chunk(self.schema, g, count, token, self.name)
                text, count, finish = text + token.text, count + 1, end or finish
                body = payload_part(data) if framed else data
                await send({"type": "http.response.body", "body": body, "more_body": True})
                item = await anext(tokens, None)
            if cancelled.is_set():
                return
            data = last(self.schema, g, text, count, finish, self.name)
            await send({"type": "http.response.body", "body": payload_part(data) if framed else data})
        except Exception as e:  # the model failed after streaming began
            _log.error("the model failed mid-stream: %s: %s", type(e).__name__, e)
            message = f"{type(e).__name__}: {e}"
            end_of_stream = (
                model_stream_error(message) if framed else error_chunk(self.schema, g, 500, message)
            )
            await send({"type": "http.response.body", "body": end_of_stream})
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

    greedy = int(torch.argmax(logprobs))
    if not g.do_sample:
        return greedy
    # In float64, less the best score: the best token's score stays 0 at any temperature the
    # request may give (1e-300 included), so softmax never sees inf - inf.
    scores = logprobs.double()
    scores = (scores - scores.max()) / g.temperature
    if g.top_k:
        kth = torch.topk(scores, min(g.top_k, scores.numel())).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if g.top_p < 1:
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, dim=-1) - ordered < g.top_p
        keep[0] = True  # the most likely token, whatever the top_p (1e-300 keeps it alone)
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    total = probs.sum()
    if not bool(torch.isfinite(probs).all()) or not float(total) > 0:
        return greedy  # the model's scores were not numbers: nothing to sample from
    return int(torch.multinomial(probs / total, 1, generator=rng))


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
