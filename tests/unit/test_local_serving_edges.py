"""The boundaries of `sagestack local serve` that its end-to-end tests (a trained model, a running
server: tests/training_src) never reach: which SavedModel version TF Serving would load, how many
samples one forward pass may hold, and what a `*/*` Accept is answered in. Each was seen to pass
those tests under a one-character slip (issue 37); these run in a second, without a model."""

from __future__ import annotations

import asyncio
import importlib.util
import io
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from sagestack.local.serving.batching import MAX_ROWS, Batcher
from sagestack.local.serving.handlers import Handlers
from sagestack.local.serving.serve import ServingApp
from sagestack.local.serving.tf_serving import SAVED_MODEL, saved_model_version
from tests.conftest import REPO


def _saved_models(root: Path, *relative: str) -> Path:
    for rel in relative:
        (root / rel).mkdir(parents=True)
        (root / rel / SAVED_MODEL).write_bytes(b"")
    return root


def test_tf_serving_loads_the_highest_version_by_number_not_by_name(tmp_path: Path) -> None:
    """tfs_utils.find_models / TF Serving's latest policy: version folders are integers (9 < 10)."""
    model = _saved_models(tmp_path / "model", "digits/9", "digits/10", "digits/2")
    assert saved_model_version(model) == model / "digits" / "10"
    flat = _saved_models(tmp_path / "flat", "9", "10")
    assert saved_model_version(flat) == flat / "10"
    # a folder whose name is not a number is no version; the first model folder (sorted) is served
    both = _saved_models(tmp_path / "both", "b/7", "a/3", "a/export", "a/11")
    (both / "a" / "latest").mkdir()
    assert saved_model_version(both) == both / "a" / "11"
    assert saved_model_version(_saved_models(tmp_path / "none", "digits/export")) is None
    assert saved_model_version(tmp_path / "absent") is None


class _Recorder:
    def __init__(self) -> None:
        self.batches: list[int] = []

    def predict(self, data: torch.Tensor, model: object) -> torch.Tensor:
        self.batches.append(int(data.shape[0]))
        return data


def _batches(rows: list[int], max_batch: int) -> list[int]:
    """The forward passes' sizes; a delay long enough for any machine, never waited out: each batch
    here fills to max_batch or is cut by the row limit."""
    recorder = _Recorder()
    handlers = Handlers(
        model=None, input_fn=lambda b, c: b, predict_fn=recorder.predict, output_fn=lambda p, a: p
    )
    batcher = Batcher(handlers, max_batch=max_batch, max_delay_ms=5000)

    async def send() -> None:
        batcher.start()
        try:
            await asyncio.gather(*(batcher.predict(torch.zeros(n, 1)) for n in rows))
        finally:
            await batcher.stop()

    asyncio.run(send())
    return recorder.batches


def test_requests_of_exactly_max_rows_samples_together_share_one_forward_pass() -> None:
    assert _batches([MAX_ROWS - 1, 1], max_batch=2) == [MAX_ROWS]
    assert _batches([MAX_ROWS], max_batch=1) == [MAX_ROWS]
    # one sample more: the request that would pass the limit leads the next batch
    assert _batches([MAX_ROWS - 1, 2, 1, 1], max_batch=3) == [MAX_ROWS - 1, 4]


def _inference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("inference_rows", REPO / "training_src" / "inference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_handler_takes_exactly_max_batch_rows_samples_and_refuses_one_more() -> None:
    """training_src/inference.py (the model's handler in the cloud as here) slices nothing: a request
    of MAX_BATCH_ROWS samples is one forward pass, one more is the client's 413."""
    inference = _inference()
    inference._EXPECTED["sample_shape"] = (1, 8, 8)
    assert inference.MAX_BATCH_ROWS == MAX_ROWS  # local/serving/batching.py's limit is the handler's

    def npy(rows: int) -> bytes:
        out = io.BytesIO()
        np.save(out, np.zeros((rows, 1, 8, 8), dtype=np.float32))
        return out.getvalue()

    assert inference.input_fn(npy(inference.MAX_BATCH_ROWS), "application/x-npy").shape[0] == MAX_ROWS
    with pytest.raises(inference.PayloadError, match=f"at most {MAX_ROWS} samples per request") as refused:
        inference.input_fn(npy(inference.MAX_BATCH_ROWS + 1), "application/x-npy")
    assert refused.value.status == 413


def _invoke(app: ServingApp, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    sent: list[dict[str, Any]] = []

    async def run() -> None:
        app.batcher.start()
        body = [{"type": "http.request", "body": b"[1]", "more_body": False}]

        async def receive() -> dict[str, Any]:
            return body.pop(0) if body else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "method": "POST",
            "path": "/invocations",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        }
        try:
            await app(scope, receive, send)
        finally:
            await app.batcher.stop()

    asyncio.run(run())
    start = sent[0]
    answer = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], answer, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("accept", [None, "*/*"])
def test_any_accept_is_answered_in_the_containers_default_accept_type(monkeypatch, accept) -> None:
    """The toolkit replaces a missing or `*/*` Accept with SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT
    (sagemaker_inference/transformer.py), so output_fn sees the container's default, not JSON."""
    monkeypatch.setenv("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", "text/csv")
    seen: list[str] = []

    def output_fn(prediction: Any, accept_type: str) -> tuple[bytes, str]:
        seen.append(accept_type)
        return b"1\n", accept_type

    handlers = Handlers(model=None, input_fn=lambda b, c: [1], predict_fn=lambda d, m: d, output_fn=output_fn)
    headers = {"content-type": "application/json", **({"accept": accept} if accept else {})}
    status, answer, body = _invoke(ServingApp(handlers, Batcher(handlers)), headers)
    assert (status, answer["content-type"], body, seen) == (200, "text/csv", b"1\n", ["text/csv"])
    # an Accept the client names is passed as it is
    named = {"content-type": "application/json", "accept": "application/json"}
    status, answer, _ = _invoke(ServingApp(handlers, Batcher(handlers)), named)
    assert (status, answer["content-type"], seen[-1]) == (200, "application/json", "application/json")


def test_without_a_default_accept_the_container_answers_json(monkeypatch) -> None:
    monkeypatch.delenv("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", raising=False)
    handlers = Handlers(
        model=None, input_fn=lambda b, c: [1], predict_fn=lambda d, m: d, output_fn=lambda p, a: (b"[1]", a)
    )
    status, answer, _ = _invoke(ServingApp(handlers, Batcher(handlers)), {"accept": "*/*"})
    assert (status, answer["content-type"]) == (200, "application/json")
