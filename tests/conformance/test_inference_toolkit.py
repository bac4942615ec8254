"""AWS's inference toolkit is the judge of training_src/inference.py and `sagestack local serve`.

The same model folder is served two ways: by the PyTorch inference container's handler service
(sagemaker-pytorch-inference 2.0.25 over sagemaker-inference 1.10: the Transformer that TorchServe
calls in the cloud, driven in a process of its own by handler_driver.py), and by `sagestack local
serve` over HTTP. Every case, good and malformed, must get the same status; a good one the same
bytes and content type, a refused one the same message (the toolkit adds a traceback below it).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sagestack.local.serving.serve import BackgroundServer, ServeOptions
from tests.conformance.cases import CASES
from tests.conftest import REPO
from tests.support.moto_server import free_port

pytestmark = [pytest.mark.conformance, pytest.mark.train]

pytest.importorskip("sagemaker_pytorch_serving_container", reason="make setup installs the inference toolkit")


@pytest.fixture(scope="module")
def local_answers(model_dir: Path) -> dict[str, dict]:
    answers = {}
    with BackgroundServer(model_dir, ServeOptions(port=free_port(), max_batch=1)) as url:
        for name, (body, headers, _) in CASES.items():
            req = urllib.request.Request(f"{url}/invocations", data=body, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    answers[name] = {
                        "status": resp.status,
                        "content_type": resp.headers["Content-Type"],
                        "body": resp.read(),
                    }
            except urllib.error.HTTPError as e:
                answers[name] = {
                    "status": e.code,
                    "content_type": e.headers["Content-Type"],
                    "body": e.read(),
                }
    return answers


@pytest.mark.parametrize("name", list(CASES))
def test_the_toolkit_and_local_serve_answer_alike(name: str, toolkit_answers, local_answers) -> None:
    theirs, ours = toolkit_answers[name], local_answers[name]
    expected = CASES[name][2]
    assert theirs["status"] == expected, theirs["body"][:2000]
    assert ours["status"] == expected, ours["body"][:2000]
    if expected == 200:
        assert ours["content_type"] == theirs["content_type"]
        assert ours["body"] == theirs["body"]
    else:
        # the toolkit answers "<message>\n<traceback>"; local serve {"error": "<message>"}
        message = theirs["body"].decode().split("\n", 1)[0]
        assert json.loads(ours["body"])["error"] == message


def test_a_fault_that_is_not_the_clients_is_a_500_in_both(model_dir: Path, tmp_path) -> None:
    """An exception that is not a toolkit error (a bug in the handler, a fault in the model) is a
    500 under the toolkit's Transformer, and so locally; a toolkit error keeps its status."""
    from sagemaker_inference.errors import GenericInferenceToolkitError

    from sagestack.local.serving.handlers import error_response

    assert error_response(ValueError("a bug in predict_fn")) == (500, "ValueError: a bug in predict_fn")
    assert error_response(GenericInferenceToolkitError(415, "nope")) == (415, "nope")


def test_payload_errors_keep_their_status_without_the_toolkit(monkeypatch) -> None:
    """Where sagemaker_inference is absent (local serve without the extra), inference.py's own
    stand-in carries the same status_code and message."""
    monkeypatch.setitem(sys.modules, "sagemaker_inference", None)
    monkeypatch.setitem(sys.modules, "sagemaker_inference.errors", None)
    spec = importlib.util.spec_from_file_location(
        "inference_without_toolkit", REPO / "training_src" / "inference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    error = module.PayloadError("cannot answer in 'text/csv'", status=406)
    assert (error.status_code, error.message, str(error)) == (
        406,
        "cannot answer in 'text/csv'",
        "cannot answer in 'text/csv'",
    )
    assert "sagemaker_inference" not in type(error).__mro__[1].__module__


# ---------------------------------------------------------------- the batched handler's 500s


def _inference_module():
    spec = importlib.util.spec_from_file_location(
        "inference_batched_faults", REPO / "training_src" / "inference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Context:
    """TorchServe's context for one batch: each request's headers, each answer's status and type."""

    def __init__(self, headers: list[dict[str, str]]) -> None:
        self.request_processor = [_Request(h) for h in headers]
        self.status: dict[int, int] = {}
        self.types: dict[int, str] = {}

    def set_response_status(self, code: int = 200, phrase: str = "", idx: int = 0) -> None:
        self.status[idx] = code

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.types[idx] = value


class _Request:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    def get_request_properties(self) -> dict[str, str]:
        return self.headers


class _BrokenModule:
    """A model that fails whatever it is given: the server's fault, not the client's."""

    def __call__(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


BATCH_NAMES = ["json instances", "bad json", "npy in, npy out", "arrays nested 100,000 deep"]


def _answer(module, model) -> tuple[list[int], list[bytes]]:
    context = _Context([CASES[n][1] for n in BATCH_NAMES])
    bodies = module.answer_batch(model, [{"body": bytearray(CASES[n][0])} for n in BATCH_NAMES], context)
    return [context.status[i] for i in range(len(BATCH_NAMES))], bodies


def test_a_fault_that_is_not_the_clients_stays_a_500_on_the_batched_path(
    model_dir: Path, monkeypatch
) -> None:
    """handle()/answer_batch (what `batching:` runs in the cloud) answers the client's mistakes with
    their 4xx and a fault of the model or of the handler's own code with a 500, which the endpoint's
    rollback alarm sees: a bug answered as a 4xx would hide from it."""
    module = _inference_module()
    model = module.model_fn(str(model_dir))
    statuses, _ = _answer(module, model)
    assert statuses == [200, 400, 200, 400]

    broken = module.Model(_BrokenModule(), model.sample_shape, model.device)
    statuses, bodies = _answer(module, broken)
    assert statuses == [500, 400, 500, 400]
    assert bodies[0].startswith(b"RuntimeError: CUDA error") and bodies[2].startswith(b"RuntimeError")

    def buggy_output_fn(prediction, accept):
        return {"predictions": prediction}["labels"]  # a KeyError: the handler's bug

    monkeypatch.setattr(module, "output_fn", buggy_output_fn)
    statuses, bodies = _answer(module, model)
    assert statuses == [500, 400, 500, 400] and bodies[0].startswith(b"KeyError")
    monkeypatch.undo()

    def buggy_input_fn(body, content_type):
        raise AttributeError("'NoneType' object has no attribute 'shape'")

    monkeypatch.setattr(module, "input_fn", buggy_input_fn)
    statuses, _ = _answer(module, model)
    assert statuses == [500, 500, 500, 500]
