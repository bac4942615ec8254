"""Data capture as a SageMaker endpoint writes it, for `sagestack local serve`.

SageMaker writes captured requests and responses as JSON Lines under
<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/<file>.jsonl, one record per invocation:

    {"captureData": {"endpointInput": {"observedContentType": …, "mode": "INPUT", "data": …,
                                       "encoding": "JSON" | "CSV" | "BASE64"},
                     "endpointOutput": {… "mode": "OUTPUT" …}},
     "eventMetadata": {"eventId": …, "inferenceTime": "2026-12-03T12:00:00Z"},
     "eventVersion": "0"}

JSON (and CSV) payloads are kept as text, anything else base64 — as the endpoint config's
CaptureContentTypeHeader says. `sagestack local monitor` reads these files back. They hold the
requests' data: the files are 0600 and the folders sagestack makes for them 0700 (local/private.py).
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagestack.local.private import open_private, private_dir

VARIANT = "AllTraffic"
JSON_TYPES = ("application/json", "application/jsonlines")
CSV_TYPES = ("text/csv",)


def _encode(body: bytes, content_type: str | None) -> tuple[str, str]:
    base = (content_type or "").split(";")[0].strip()
    if base in JSON_TYPES:
        return body.decode("utf-8", "replace"), "JSON"
    if base in CSV_TYPES:
        return body.decode("utf-8", "replace"), "CSV"
    return base64.b64encode(body).decode(), "BASE64"


def capture_record(
    request: bytes, request_type: str | None, response: bytes, response_type: str | None, when: datetime
) -> dict[str, Any]:
    data_in, enc_in = _encode(request, request_type)
    data_out, enc_out = _encode(response, response_type)
    return {
        "captureData": {
            "endpointInput": {
                "observedContentType": request_type or "",
                "mode": "INPUT",
                "data": data_in,
                "encoding": enc_in,
            },
            "endpointOutput": {
                "observedContentType": response_type or "",
                "mode": "OUTPUT",
                "data": data_out,
                "encoding": enc_out,
            },
        },
        "eventMetadata": {
            "eventId": str(uuid.uuid4()),
            "inferenceTime": when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        },
        "eventVersion": "0",
    }


@dataclass
class CaptureWriter:
    """Appends sampled invocations to this run's capture file of the hour."""

    root: Path  # <destination>/<endpoint>
    sampling_percent: int = 100
    seed: int | None = None
    written: int = 0
    _rng: random.Random = field(default_factory=random.Random)
    _run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    def __post_init__(self) -> None:
        if self.seed is not None:
            self._rng.seed(self.seed)

    def capture(
        self, request: bytes, request_type: str | None, response: bytes, response_type: str | None
    ) -> None:
        if self._rng.uniform(0, 100) >= self.sampling_percent:
            return
        now = datetime.now(UTC)
        folder = private_dir(self.root / VARIANT / now.strftime("%Y/%m/%d/%H"))
        record = capture_record(request, request_type, response, response_type, now)
        with open_private(folder / f"{now:%M}-{self._run}.jsonl") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.written += 1


def read_capture(root: Path) -> Iterator[dict[str, Any]]:
    """Every captured record under <destination>/<endpoint>, oldest file first."""
    for path in sorted(root.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def decoded(part: dict[str, Any]) -> bytes:
    data = part.get("data", "")
    return base64.b64decode(data) if part.get("encoding") == "BASE64" else str(data).encode()
