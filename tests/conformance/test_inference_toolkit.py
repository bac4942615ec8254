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

from sagestack.local.serve import BackgroundServer, ServeOptions
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

    from sagestack.local.handlers import error_response

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
