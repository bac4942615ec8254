"""The SageMaker serving contract for the models train.py writes (sagemaker-inference toolkit):
model_fn / input_fn / predict_fn / output_fn. Runs in the PyTorch (or Neo) inference container,
from model.tar.gz's code/ folder, and under `sagestack local serve`.

Payloads: application/json ({"instances": [...]} or a bare nested list) or application/x-npy,
one sample (the model's input shape without the batch dimension) or a batch of them; or
application/jsonlines, one JSON document (a sample, or {"instances": [...]}) per line — what a batch
transform sends when it splits a file by lines and batches records (MultiRecord). Responses:
application/json ({"predictions": [{"label": k, "probabilities": [...]}, ...]}),
application/jsonlines (one {"label", "probabilities"} line per sample, so a transform can join each
output to its input record) or application/x-npy (the probabilities). A bad payload raises an error with an HTTP `status`
(400, 406, 413, 415), never a crash: it is the inference toolkit's own error type
(sagemaker_inference.errors.GenericInferenceToolkitError), the only kind the toolkit's Transformer
answers with its status — any other exception is a 500 there, which an endpoint counts in
Invocation5XXErrors, the metric its rollback alarm watches.

`handle(data, context)` is a TorchServe handler over the same four functions, for the PyTorch
inference container when the endpoint batches (`batching:` sets TS_DEFAULT_SERVICE_HANDLER to
it): the toolkit's own handler calls input_fn / predict_fn / output_fn once per request even in a
batch, reads every request's headers from the first, and answers a batch with one malformed
request by failing all of them. This one decodes each request alone, runs one forward pass for
the batch, and gives each request its own status, body and Content-Type.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

JSON = "application/json"
NPY = "application/x-npy"
JSONL = "application/jsonlines"
_UTF8_TYPES = (JSON, "text/csv")  # what the toolkit decodes to str before input_fn
# A guard against a runaway request, not a batching limit: a batch transform's MultiRecord request
# (6 MB by default) holds about 10,000 digits records as JSON Lines, and each must fit.
MAX_BATCH_ROWS = 16384


try:  # in SageMaker's PyTorch / Neo inference containers
    from sagemaker_inference import content_types as _toolkit_types
    from sagemaker_inference.errors import GenericInferenceToolkitError as _ToolkitError

    # The toolkit's Transformer decodes a JSON or CSV body as UTF-8 itself, before input_fn and
    # outside any handler, so a body that is not UTF-8 would be a 500 (which Invocation5XXErrors, the
    # rollback alarm's metric, counts). It looks the list up at each request: emptied, every body
    # reaches input_fn as bytes, and input_fn decodes it and refuses what is not UTF-8 with a 400.
    _toolkit_types.UTF8_TYPES = []
except ImportError:  # elsewhere (`sagestack local serve`, tests): the same shape

    class _ToolkitError(Exception):  # type: ignore[no-redef]
        def __init__(self, status_code: int, message: str | None = None, phrase: str | None = None) -> None:
            self.status_code = status_code
            self.message = message or "Invalid Request"
            self.phrase = phrase or self.message
            super().__init__(status_code, self.message, self.phrase)


class PayloadError(_ToolkitError, ValueError):
    """The request cannot be served as sent: the server answers `status_code` with the message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(status, message)

    @property
    def status(self) -> int:
        return int(self.status_code)

    def __str__(self) -> str:
        return str(self.message)


class Model:
    """The TorchScript module with what the payload checks need."""

    def __init__(
        self, module: torch.jit.ScriptModule, sample_shape: tuple[int, ...] | None, device: torch.device
    ) -> None:
        self.module = module
        self.sample_shape = sample_shape
        self.device = device


_EXPECTED: dict[str, tuple[int, ...] | None] = {"sample_shape": None}


def model_fn(model_dir: str) -> Model:
    torch.set_num_threads(int(os.environ.get("SAGESTACK_SERVE_THREADS", "1")))
    path = Path(model_dir)
    try:  # the Neo runtime (in SageMaker's Neo inference images) must be told about the model first
        import neopytorch  # type: ignore[import-not-found]

        neopytorch.config(model_dir=model_dir, neo_runtime=True)
    except ImportError:
        pass
    # model.pt: as trained or traced by `sagestack local compile`; model.pth: what Neo compiled it to.
    name = "model.pt" if (path / "model.pt").exists() else "model.pth"
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    module = torch.jit.load(str(path / name), map_location=device)
    module.eval()
    sample_shape = None
    info = path / "model_info.json"
    if info.exists():
        shape = json.loads(info.read_text()).get("input_shape")
        if shape:
            sample_shape = tuple(int(d) for d in shape[1:])
    _EXPECTED["sample_shape"] = sample_shape
    return Model(module, sample_shape, device)


def _base(content_type: str | None) -> str:
    return (content_type or JSON).split(";")[0].strip().lower()


def input_fn(request_body: bytes | str, content_type: str = JSON) -> torch.Tensor:
    kind = _base(content_type)
    if kind in _UTF8_TYPES or kind == JSONL:  # text: what the toolkit would have decoded, and more
        request_body = _utf8(request_body)
    if kind == JSON:
        array = _array(_instances(_json(request_body, "the body")))
    elif kind == JSONL:
        rows: list = []
        for number, line in enumerate(str(request_body).splitlines(), 1):
            if not line.strip():
                continue
            data = _json(line, f"line {number}")
            samples = _instances(data)
            rows += samples if isinstance(data, dict) else [samples]
        if not rows:
            raise PayloadError("the JSON Lines body holds no records")
        array = _array(rows)
    elif kind == NPY:
        body = request_body.encode() if isinstance(request_body, str) else request_body
        try:
            array = np.load(io.BytesIO(body), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise PayloadError(f"the body is not a .npy array: {e}") from None
        if array.dtype.kind not in "fiub":
            raise PayloadError(f"a .npy payload must hold numbers, not {array.dtype}")
        array = array.astype(np.float32, copy=False)
    else:
        raise PayloadError(
            f"content type '{kind}' is not supported; send {JSON}, {JSONL} or {NPY}", status=415
        )
    if not np.isfinite(array).all():
        raise PayloadError("the payload holds NaN or infinite values")
    return _batched(torch.from_numpy(np.ascontiguousarray(array)))


def _utf8(body: bytes | bytearray | str) -> str:
    """JSON text is UTF-8 (RFC 8259); anything else is the client's mistake, a 400."""
    if isinstance(body, str):
        return body
    try:
        return bytes(body).decode("utf-8")
    except UnicodeDecodeError as e:
        raise PayloadError(f"the body is not UTF-8 text: {e}") from None


def _json(text: str, what: str) -> object:
    try:
        return json.loads(text)
    except ValueError as e:
        raise PayloadError(f"{what} is not valid JSON: {e}") from None
    except RecursionError:  # arrays nested deeper than Python's recursion limit
        raise PayloadError(f"{what} is nested too deeply to be an array of samples") from None


def _instances(data: object) -> object:
    if isinstance(data, dict):
        if "instances" not in data:
            raise PayloadError('a JSON object needs "instances": [sample, ...]')
        return data["instances"]
    return data


def _array(data: object) -> np.ndarray:
    try:
        return np.asarray(data, dtype=np.float32)
    except (ValueError, TypeError):
        raise PayloadError("the JSON must be a rectangular array of numbers") from None
    except OverflowError:  # an integer beyond float's range (Python reads any number of digits)
        raise PayloadError("the JSON holds a number too large for float32") from None
    except RecursionError:
        raise PayloadError("the JSON is nested too deeply to be an array of samples") from None


def _batched(x: torch.Tensor) -> torch.Tensor:
    expected = _EXPECTED["sample_shape"]
    if expected is None:
        return x
    if tuple(x.shape) == expected:
        x = x.unsqueeze(0)
    if tuple(x.shape[1:]) != expected or x.shape[0] < 1:
        want = "x".join(map(str, expected))
        raise PayloadError(
            f"a sample has shape {want} (a batch: N x {want}); got {'x'.join(map(str, x.shape)) or 'a scalar'}"
        )
    if x.shape[0] > MAX_BATCH_ROWS:
        raise PayloadError(f"at most {MAX_BATCH_ROWS} samples per request; got {x.shape[0]}", status=413)
    return x


def predict_fn(input_data: torch.Tensor, model: Model) -> torch.Tensor:
    with torch.inference_mode():
        return torch.softmax(model.module(input_data.to(model.device)), dim=1)


def output_fn(prediction: torch.Tensor, accept: str = JSON) -> tuple[bytes, str]:
    kind = _base(accept)
    if kind in ("*/*", ""):
        kind = JSON
    probs = prediction.detach().cpu().numpy()
    if kind == JSON:
        labels = probs.argmax(axis=1).tolist()
        rounded = np.round(probs.astype(np.float64), 6).tolist()
        out = [{"label": k, "probabilities": row} for k, row in zip(labels, rounded, strict=True)]
        return json.dumps({"predictions": out}).encode(), JSON
    if kind == JSONL:
        labels = probs.argmax(axis=1).tolist()
        rounded = np.round(probs.astype(np.float64), 6).tolist()
        lines = [
            json.dumps({"label": k, "probabilities": row}) for k, row in zip(labels, rounded, strict=True)
        ]
        return ("\n".join(lines) + "\n").encode(), JSONL
    if kind == NPY:
        buf = io.BytesIO()
        np.save(buf, probs, allow_pickle=False)
        return buf.getvalue(), NPY
    raise PayloadError(f"cannot answer in '{kind}'; accept {JSON}, {JSONL} or {NPY}", status=406)


# ---------------------------------------------------------------- TorchServe: one forward per batch

_CONTENT_TYPE = re.compile("^[Cc]ontent-?[Tt]ype")  # the toolkit's spellings (sagemaker_inference.utils)
_SERVED: dict[str, Model] = {}


def handle(data: list[dict[str, Any]] | None, context: Any) -> list[bytes] | None:
    """TorchServe's entry point (`inference:handle`): `handle(None, context)` loads the model;
    then each call answers one batch of requests, in order."""
    if data is None or "model" not in _SERVED:
        properties = context.system_properties
        gpu = properties.get("gpu_id")
        if gpu is not None and torch.cuda.is_available():
            torch.cuda.set_device(int(gpu))  # the device TorchServe gave this worker
        _SERVED["model"] = model_fn(properties.get("model_dir"))
        if data is None:
            return None
    return answer_batch(_SERVED["model"], data, context)


def answer_batch(model: Model, data: list[dict[str, Any]], context: Any) -> list[bytes]:
    default_accept = os.environ.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", JSON)
    answers: list[tuple[int, bytes, str] | None] = [None] * len(data)
    decoded: list[tuple[int, torch.Tensor, str]] = []
    for i, request in enumerate(data):
        headers = context.request_processor[i].get_request_properties()
        content_type = next((v for k, v in headers.items() if _CONTENT_TYPE.match(k)), None)
        accept = headers.get("Accept") or headers.get("accept")
        if not accept or accept == "*/*":
            accept = default_accept
        try:
            body = request.get("body")
            if body is None:
                body = request.get("data", b"")
            if isinstance(body, bytearray):
                body = bytes(body)
            if content_type in _UTF8_TYPES:
                body = _utf8(body)  # as the toolkit decodes them, but a 400 for what is not UTF-8
            decoded.append((i, input_fn(body, content_type), accept))
        except Exception as e:
            answers[i] = _failure(e)
    if os.environ.get("SAGESTACK_SERVE_LOG_BATCHES") == "1":  # to size batching: what each batch held
        rows = sum(int(t.shape[0]) for _, t, _ in decoded)
        print(f"sagestack batch: requests={len(data)} decoded={len(decoded)} rows={rows}", flush=True)
    for i, prediction, accept in _predict_together(model, decoded, answers):
        try:
            result = output_fn(prediction, accept)
            payload, kind = result if isinstance(result, tuple) else (result, accept)
            answers[i] = (200, payload.encode() if isinstance(payload, str) else payload, kind)
        except Exception as e:
            answers[i] = _failure(e)
    bodies = []
    for i, answer in enumerate(answers):
        assert answer is not None
        status, payload, kind = answer
        context.set_response_status(code=status, phrase=_phrase(status), idx=i)
        context.set_response_content_type(i, kind)
        bodies.append(payload)
    return bodies


def _predict_together(
    model: Model, decoded: list[tuple[int, torch.Tensor, str]], answers: list[tuple[int, bytes, str] | None]
) -> list[tuple[int, torch.Tensor, str]]:
    """One predict_fn over every decoded request of the same sample shape (in slices of at most
    MAX_BATCH_ROWS rows), split back per request. Should a joint forward fail, each of its requests
    is predicted alone, so that a fault is answered to the request that caused it."""
    groups: dict[tuple[Any, ...], list[tuple[int, torch.Tensor, str]]] = {}
    for item in decoded:
        tensor = item[1]
        groups.setdefault((tuple(tensor.shape[1:]), tensor.dtype), []).append(item)
    out: list[tuple[int, torch.Tensor, str]] = []
    for members in groups.values():
        start = 0
        while start < len(members):
            chunk, rows = [members[start]], int(members[start][1].shape[0])
            start += 1
            while start < len(members) and rows + int(members[start][1].shape[0]) <= MAX_BATCH_ROWS:
                chunk.append(members[start])
                rows += int(members[start][1].shape[0])
                start += 1
            try:
                joined = chunk[0][1] if len(chunk) == 1 else torch.cat([t for _, t, _ in chunk])
                parts = torch.split(predict_fn(joined, model), [int(t.shape[0]) for _, t, _ in chunk])
                out += [(i, part, accept) for (i, _, accept), part in zip(chunk, parts, strict=True)]
            except Exception:
                for i, tensor, accept in chunk:
                    try:
                        out.append((i, predict_fn(tensor, model), accept))
                    except Exception as e:
                        answers[i] = _failure(e)
    return out


def _failure(error: BaseException) -> tuple[int, bytes, str]:
    """(status, body, content type) as the toolkit's Transformer answers an exception: a toolkit
    error's own status and message, anything else a 500 naming it (no traceback to the client)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        message = str(getattr(error, "message", error))
    else:
        status, message = 500, f"{type(error).__name__}: {error}"
    return status, (message + "\n").encode(), "text/plain"


def _phrase(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
