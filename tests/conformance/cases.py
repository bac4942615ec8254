"""The requests both serving paths are judged on: name -> (body, headers, expected status)."""

from __future__ import annotations

import io
import json

import numpy as np


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


JSON, NPY, JSONL = "application/json", "application/x-npy", "application/jsonlines"
DEEP = 100_000  # deeper than any recursion limit


rng = np.random.default_rng(0)
ONE = rng.random((1, 8, 8)).astype(np.float32)
BATCH = rng.random((3, 1, 8, 8)).astype(np.float32)
# name: (body, headers, expected status)
CASES: dict[str, tuple[bytes, dict[str, str], int]] = {
    "json instances": (
        json.dumps({"instances": BATCH.tolist()}).encode(),
        {"Content-Type": JSON, "Accept": JSON},
        200,
    ),
    "json one sample": (json.dumps(ONE.tolist()).encode(), {"Content-Type": JSON, "Accept": JSON}, 200),
    "json, no accept": (json.dumps(ONE.tolist()).encode(), {"Content-Type": JSON}, 200),
    "json, accept */*": (json.dumps(ONE.tolist()).encode(), {"Content-Type": JSON, "Accept": "*/*"}, 200),
    "npy in, npy out": (_npy(BATCH), {"Content-Type": NPY, "Accept": NPY}, 200),
    "npy in, json out": (_npy(BATCH), {"Content-Type": NPY, "Accept": JSON}, 200),
    "bad json": (b"{not json", {"Content-Type": JSON, "Accept": JSON}, 400),
    "object without instances": (b'{"data": [1]}', {"Content-Type": JSON, "Accept": JSON}, 400),
    "ragged json": (b"[[1, 2], [3]]", {"Content-Type": JSON, "Accept": JSON}, 400),
    "wrong shape": (b"[[1, 2, 3]]", {"Content-Type": JSON, "Accept": JSON}, 400),
    "nan": (json.dumps([[[float("nan")] * 8] * 8]).encode(), {"Content-Type": JSON, "Accept": JSON}, 400),
    "npy garbage": (b"\x93NUMPY garbage", {"Content-Type": NPY, "Accept": JSON}, 400),
    "npy of strings": (_npy(np.array(["a", "b"])), {"Content-Type": NPY, "Accept": JSON}, 400),
    "unsupported content type": (b"1,2,3", {"Content-Type": "text/csv", "Accept": JSON}, 415),
    "unsupported accept": (
        json.dumps(ONE.tolist()).encode(),
        {"Content-Type": JSON, "Accept": "text/csv"},
        406,
    ),
    # What a batch transform sends with SplitType Line and MultiRecord: records joined by newlines.
    "json lines batch": (
        "\n".join(json.dumps(sample.tolist()) for sample in BATCH).encode(),
        {"Content-Type": "application/jsonlines", "Accept": "application/jsonlines"},
        200,
    ),
    "json lines, a bad line": (
        b"[[1, 2]]\n{not json",
        {"Content-Type": "application/jsonlines", "Accept": "application/jsonlines"},
        400,
    ),
    "oversized batch": (
        _npy(np.zeros((16385, 1, 8, 8), np.float32)),
        {"Content-Type": NPY, "Accept": NPY},
        413,
    ),
    # Hostile bodies (issue 26): each is the client's fault, so a 4xx on every path, never a 500
    # that Invocation5XXErrors (the rollback alarm's metric) would count.
    "a 400-digit integer": (
        json.dumps([[[10**399] * 8] * 8]).encode(),
        {"Content-Type": JSON, "Accept": JSON},
        400,
    ),
    "arrays nested 100,000 deep": (b"[" * DEEP + b"]" * DEEP, {"Content-Type": JSON, "Accept": JSON}, 400),
    "json that is not utf-8": (b"[[\xff]]", {"Content-Type": JSON, "Accept": JSON}, 400),
    "csv that is not utf-8": (b"1,\xff", {"Content-Type": "text/csv", "Accept": JSON}, 400),
    "json lines, a 400-digit integer": (
        json.dumps([[10**399] * 8] * 8).encode(),
        {"Content-Type": JSONL, "Accept": JSONL},
        400,
    ),
    "json lines nested 100,000 deep": (
        b"[" * DEEP + b"]" * DEEP,
        {"Content-Type": JSONL, "Accept": JSONL},
        400,
    ),
    "json lines that are not utf-8": (
        json.dumps(ONE.tolist()).encode() + b'\n{"instances": [], "note": "\xff"}',
        {"Content-Type": JSONL, "Accept": JSONL},
        400,
    ),
}
