"""The ASGI messages `sagestack local serve` reads and writes: a request's body (within SageMaker's
payload limit) and a response, with the errors answered as the inference toolkit answers them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from sagestack.local.serving.handlers import JSON, error_response

MAX_BODY = 6 * 1024 * 1024  # SageMaker real-time endpoints accept payloads up to 6 MB

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers, names in lower case."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


async def read_body(receive: Receive) -> bytes | None:
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


async def respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: str = JSON,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def respond_error(send: Send, e: Exception) -> None:
    """The toolkit's answer to an exception: its status, and {"error": message}."""
    status, message = error_response(e)
    await respond(send, status, json.dumps({"error": message}).encode())
