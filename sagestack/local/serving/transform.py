"""`sagestack local transform`: a SageMaker batch transform over a folder, on this machine.

The same semantics as CreateTransformJob, applied to the model's own inference.py handlers
(input_fn / predict_fn / output_fn, as `local serve` loads them):

- every file under the input folder becomes `<output>/<relative path>.out`;
- SplitType Line splits a file into records at newlines (None: the file is one record);
- InputFilter (JSONPath) selects what of each record is sent;
- BatchStrategy MultiRecord sends as many records per request as fit in MaxPayloadInMB (joined
  by newlines), SingleRecord one each;
- AssembleWith Line ends each response with a newline; None concatenates them;
- JoinSource Input joins each record with its output line — a JSON object gains "SageMakerOutput",
  another JSON value becomes {"SageMakerInput", "SageMakerOutput"}, a CSV row gains the output
  columns — which needs one output line per record (SageMaker fails the file otherwise);
- OutputFilter (JSONPath) selects what of the joined record is written.

A request the model refuses fails its file (as SageMaker fails the job, naming the file), and the
transform goes on with the other files and reports every failure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.local.private import private_dir, write_private_bytes
from sagestack.local.serving.handlers import Handlers, error_response
from sagestack.transforms.models import TransformSpec

TEXT_TYPES = ("application/json", "application/jsonlines", "text/csv")
CSV = "text/csv"


class TransformError(Exception):
    """The transform cannot run as asked (the message says what to change)."""


@dataclass
class FileResult:
    source: Path
    output: Path | None
    records: int
    requests: int
    error: str | None = None


@dataclass
class TransformResult:
    files: list[FileResult] = field(default_factory=list)

    @property
    def failed(self) -> list[FileResult]:
        return [f for f in self.files if f.error]

    @property
    def records(self) -> int:
        return sum(f.records for f in self.files)


# ---------------------------------------------------------------- JSONPath (the subset SageMaker documents)

_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([^\]]+)\]")


def _indices(selector: str, length: int) -> list[int]:
    out: list[int] = []
    for part in selector.split(","):
        part = part.strip()
        if ":" in part:
            lo, hi = (p.strip() for p in part.split(":", 1))
            out += list(range(length))[slice(int(lo) if lo else None, int(hi) if hi else None)]
        else:
            i = int(part)
            if not -length <= i < length:
                raise TransformError(f"index {i} is outside a record of {length} fields")
            out.append(i % length)
    return out


def json_path(expression: str, value: Any) -> Any:
    """Apply a filter: '$', '$.a.b', "$['a','b']", '$[1:]', '$[0,5:]' (on lists and CSV rows)."""
    if not expression.startswith("$"):
        raise TransformError(f"a filter starts with '$': got {expression!r}")
    rest = expression[1:]
    position = 0
    while position < len(rest):
        m = _SEGMENT.match(rest, position)
        if m is None:
            raise TransformError(f"cannot read the filter {expression!r} at {rest[position:]!r}")
        position = m.end()
        if m.group(1) is not None:
            if not isinstance(value, dict) or m.group(1) not in value:
                raise TransformError(f"{expression}: the record has no field {m.group(1)!r}")
            value = value[m.group(1)]
            continue
        selector = m.group(2)
        if selector.strip().startswith(("'", '"')):
            keys = [k.strip().strip("'\"") for k in selector.split(",")]
            if not isinstance(value, dict):
                raise TransformError(
                    f"{expression}: keys select from a JSON object, not {type(value).__name__}"
                )
            missing = [k for k in keys if k not in value]
            if missing:
                raise TransformError(f"{expression}: the record has no field(s) {', '.join(missing)}")
            value = value[keys[0]] if len(keys) == 1 else {k: value[k] for k in keys}
            continue
        if not isinstance(value, list):
            raise TransformError(f"{expression}: indexes select from an array, not {type(value).__name__}")
        picked = [value[i] for i in _indices(selector, len(value))]
        value = picked[0] if ("," not in selector and ":" not in selector) else picked
    return value


# ---------------------------------------------------------------- records


def _records(data: bytes, split_type: str) -> list[bytes]:
    if split_type == "None":
        return [data]
    if split_type == "Line":
        return [line for line in data.split(b"\n") if line.strip()]
    raise TransformError(
        f"split_type {split_type} is not emulated locally (Line and None are); "
        "run the transform in the cloud or split your files by line"
    )


def _is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip() in ("application/json", "application/jsonlines")


def _filter_input(record: bytes, spec: TransformSpec) -> bytes:
    if not spec.input_filter or spec.input_filter == "$":
        return record
    if _is_json(spec.content_type):
        return json.dumps(json_path(spec.input_filter, json.loads(record))).encode()
    if spec.content_type.startswith(CSV):
        fields = record.decode().split(",")
        picked = json_path(spec.input_filter, fields)
        return ",".join(picked if isinstance(picked, list) else [picked]).encode()
    raise TransformError(f"input_filter works on JSON and CSV records, not {spec.content_type}")


def _join(record: bytes, output: bytes, spec: TransformSpec) -> Any:
    if _is_json(spec.content_type):
        source = json.loads(record)
        result = json.loads(output) if (spec.accept and _is_json(spec.accept)) else output.decode()
        if isinstance(source, dict):
            return {**source, "SageMakerOutput": result}
        return {"SageMakerInput": source, "SageMakerOutput": result}
    return record.decode().split(",") + output.decode().split(",")


def _batches(records: list[bytes], spec: TransformSpec) -> Iterator[list[bytes]]:
    if spec.batch_strategy == "SingleRecord":
        for r in records:
            yield [r]
        return
    limit = spec.max_payload_mb * 1024 * 1024 if spec.max_payload_mb else None
    batch: list[bytes] = []
    size = 0
    for r in records:
        grown = size + len(r) + (1 if batch else 0)
        if batch and limit is not None and grown > limit:
            yield batch
            batch, size = [], 0
            grown = len(r)
        batch.append(r)
        size = grown
    if batch:
        yield batch


# ---------------------------------------------------------------- the transform


def _invoke(handlers: Handlers, body: bytes, spec: TransformSpec) -> bytes:
    kind = spec.content_type.split(";")[0].strip()
    payload: bytes | str = body.decode("utf-8") if kind in ("application/json", CSV) else body
    data = handlers.input_fn(payload, spec.content_type)
    prediction = handlers.predict_fn(data, handlers.model)
    result = handlers.output_fn(prediction, spec.accept or "application/json")
    out = result[0] if isinstance(result, tuple) else result
    return out.encode() if isinstance(out, str) else bytes(out)


def transform_file(handlers: Handlers, source: Path, target: Path, spec: TransformSpec) -> FileResult:
    records = _records(source.read_bytes(), spec.split_type)
    limit = spec.max_payload_mb * 1024 * 1024
    requests = 0
    pieces: list[bytes] = []
    for batch in _batches(records, spec):
        sent = [_filter_input(r, spec) for r in batch]
        body = b"\n".join(sent)
        if limit and len(body) > limit:
            raise TransformError(
                f"a record of {len(body)} bytes exceeds max_payload_mb {spec.max_payload_mb}"
            )
        try:
            response = _invoke(handlers, body, spec)
        except Exception as e:
            status, message = error_response(e)
            raise TransformError(f"the model answered {status}: {message}") from None
        requests += 1
        if spec.join_source == "Input" or spec.output_filter:
            lines = [line for line in response.split(b"\n") if line.strip()]
            if len(lines) != len(batch):
                raise TransformError(
                    f"{len(batch)} record(s) sent, {len(lines)} output line(s) returned: joining needs one output "
                    "line per record (answer in application/jsonlines or text/csv)"
                )
            for record, line in zip(batch, lines, strict=True):
                joined: Any = _join(record, line, spec) if spec.join_source == "Input" else json.loads(line)
                if spec.output_filter:
                    joined = json_path(spec.output_filter, joined)
                text = (
                    ",".join(map(str, joined))
                    if isinstance(joined, list) and not _is_json(spec.content_type)
                    else json.dumps(joined)
                )
                pieces.append(text.encode() + b"\n")
            continue
        if spec.assemble_with == "Line" and not response.endswith(b"\n"):
            response += b"\n"
        pieces.append(response)
    private_dir(target.parent)  # the model's answers on the user's data: the user's alone
    tmp = target.with_suffix(target.suffix + ".tmp")
    write_private_bytes(tmp, b"".join(pieces))
    tmp.replace(target)  # a file's output appears whole or not at all
    return FileResult(source, target, len(records), requests)


def run_transform(
    handlers: Handlers,
    spec: TransformSpec,
    input_dir: Path,
    output_dir: Path,
    progress: Callable[[Path], None] | None = None,
) -> TransformResult:
    if not input_dir.is_dir():
        raise TransformError(f"{input_dir} is not a folder of input files")
    files = sorted(p for p in input_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise TransformError(f"{input_dir} holds no input files")
    result = TransformResult()
    for source in files:
        target = output_dir / (str(source.relative_to(input_dir)) + ".out")
        try:
            result.files.append(transform_file(handlers, source, target, spec))
        except (TransformError, ValueError) as e:
            result.files.append(FileResult(source, None, 0, 0, str(e)))
        if progress:
            progress(source)
    return result
