"""InvokeEndpointWithResponseStream's body as the SageMaker runtime frames it: the AWS event
stream (application/vnd.amazon.eventstream), one `PayloadPart` event per chunk of what the
container streamed, or a `ModelStreamError` exception when the model fails mid-stream. Each message:
a prelude (total length, headers length, the prelude's CRC32), the headers (name, type 7 =
string, value), the payload, the message's CRC32 — what botocore's eventstream parser reads."""

from __future__ import annotations

import json
import struct
import zlib

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _header(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return struct.pack("!B", len(n)) + n + struct.pack("!BH", _STRING, len(v)) + v


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message."""
    return _framed(b"".join(_header(k, v) for k, v in headers.items()), payload)


def _framed(encoded: bytes, payload: bytes) -> bytes:
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack("!I", zlib.crc32(head))


_PAYLOAD_PART = b"".join(
    _header(k, v)
    for k, v in {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }.items()
)


def payload_part(data: bytes) -> bytes:
    """A PayloadPart event carrying `data` (its Bytes member); its headers are encoded once."""
    return _framed(_PAYLOAD_PART, data)


def model_stream_error(text: str, code: str = "StreamBroken") -> bytes:
    """The ModelStreamError the runtime sends when the container fails after streaming began: an
    exception message (the ResponseStream's member marked `exception` in botocore's model), which
    boto3 raises as EventStreamError with the code ModelStreamError. `code` is its ErrorCode, one of
    the model's documented two (StreamBroken, ModelInvocationTimeExceeded)."""
    return message(
        {
            ":exception-type": "ModelStreamError",
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"Message": text, "ErrorCode": code}).encode(),
    )
