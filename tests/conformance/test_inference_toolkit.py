"""AWS's inference toolkit is the judge of training_src/inference.py and `sagestack local serve`.

The same model folder is served two ways: by the PyTorch inference container's handler service
(sagemaker-pytorch-inference 2.0.25 over sagemaker-inference 1.10: the Transformer that TorchServe
calls in the cloud, driven in a process of its own by handler_driver.py), and by `sagestack local
serve` over HTTP. Every case, good and malformed, must get the same status; a good one the same
bytes and content type, a refused one the same message (the toolkit adds a traceback below it).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from sagestack.local.serve import BackgroundServer, ServeOptions
from tests.conftest import REPO
from tests.support.digits_model import make_model_dir
from tests.support.moto_server import free_port

pytestmark = [pytest.mark.conformance, pytest.mark.train]

pytest.importorskip("sagemaker_pytorch_serving_container", reason="make setup installs the inference toolkit")

JSON, NPY = "application/json", "application/x-npy"


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


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
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("served") / "model")


@pytest.fixture(scope="module")
def toolkit_answers(model_dir: Path, tmp_path_factory) -> dict[str, dict]:
    work = tmp_path_factory.mktemp("handler")
    cases = [
        {"body": base64.b64encode(body).decode(), "headers": headers} for body, headers, _ in CASES.values()
    ]
    (work / "cases.json").write_text(json.dumps(cases))
    env = {
        **os.environ,
        "PYTHONPATH": f"{model_dir / 'code'}{os.pathsep}{REPO}",
        "SAGEMAKER_PROGRAM": "inference.py",
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("handler_driver.py")),
            str(model_dir),
            str(work / "cases.json"),
            str(work / "results.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((work / "results.json").read_text())
    return {name: {**r, "body": base64.b64decode(r["body"])} for name, r in zip(CASES, results, strict=True)}


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

    from sagestack.local.serve import error_response

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
