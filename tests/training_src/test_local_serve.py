"""Local compile and serve on a model trained here (real torch): traced == eager, the serving
contract (including the 4xx answers), dynamic batching, and a bounded load test."""

from __future__ import annotations

import io
import json
import tarfile
import urllib.error
import urllib.request

import numpy as np
import pytest

from sagestack.local.serving.compile import LocalCompileError, compile_locally
from sagestack.local.serving.handlers import unpack_model
from sagestack.local.serving.loadgen import load
from sagestack.local.serving.serve import BackgroundServer, ServeOptions
from tests.support.moto_server import free_port

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The example project, its classifier trained for 2 epochs on one host."""
    import shutil

    from sagestack.local.training.job import LocalTrainOptions
    from sagestack.local.training.train import run_local_training
    from sagestack.project import load_project
    from tests.conftest import REPO, Project

    project = Project(tmp_path_factory.mktemp("serve") / "digits")
    shutil.rmtree(project.root / "config")
    shutil.rmtree(project.root / "training_src")
    shutil.copytree(REPO / "config", project.root / "config")
    shutil.copytree(REPO / "containers", project.root / "containers")
    shutil.copytree(
        REPO / "training_src", project.root / "training_src", ignore=shutil.ignore_patterns("__pycache__")
    )
    loaded = load_project(project.root, "dev")
    result = run_local_training(loaded, "classifier", LocalTrainOptions(overrides={"epochs": 3}, threads=1))
    assert result.succeeded, result.failure
    return project, loaded


@pytest.fixture(scope="module")
def compiled(trained):
    _, loaded = trained
    return compile_locally(loaded, "digits")


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return (x / 16.0).reshape(-1, 1, 8, 8).astype(np.float32), y


@pytest.fixture(scope="module")
def server(compiled, tmp_path_factory):
    model_dir = unpack_model(compiled.archive, tmp_path_factory.mktemp("served") / "model")
    background = BackgroundServer(model_dir, ServeOptions(port=free_port(), max_batch=32))
    with background as url:
        yield url, background.app


def _post(url: str, body: bytes, content_type: str = "application/json", accept: str = "application/json"):
    req = urllib.request.Request(
        f"{url}/invocations", data=body, headers={"Content-Type": content_type, "Accept": accept}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def test_compiled_archive_is_neo_ready_and_matches_eager(trained, compiled, digits):
    import torch

    _, loaded = trained
    with tarfile.open(compiled.archive) as tar:
        names = sorted(tar.getnames())
        traced = torch.jit.load(io.BytesIO(tar.extractfile("model.pt").read()))
        info = json.loads(tar.extractfile("model_info.json").read())
    assert names == ["code", "code/inference.py", "model.pt", "model_info.json"]
    assert info["input_shapes"] == {"input0": [1, 1, 8, 8]} and info["compiled_for"] == "ml_c5"
    # the eager model, rebuilt from the state dict, against the traced one on real digits
    from sagestack.local.serving.compile import _eager_model

    eager = _eager_model(compiled.model_dir, loaded.root / "training_src", info)
    x, y = digits
    with torch.inference_mode():
        for i in range(0, 64, 8):
            batch = torch.from_numpy(x[i : i + 1])
            assert torch.allclose(eager(batch), traced(batch), atol=1e-5)
        accuracy = float((traced(torch.from_numpy(x)).argmax(1) == torch.from_numpy(y)).float().mean())
    assert accuracy > 0.8 and compiled.max_abs_diff <= 1e-5


def test_input_shapes_that_do_not_match_the_model_are_refused(trained):
    _, loaded = trained
    spec = loaded.spec.model_copy(
        update={
            "endpoints": {
                "digits": loaded.spec.endpoints["digits"].model_copy(
                    update={
                        "compile": loaded.spec.endpoints["digits"].compile.model_copy(
                            update={"input_shapes": {"input0": [1, 3, 224, 224]}}
                        )
                    }
                )
            }
        }
    )
    with pytest.raises(LocalCompileError) as e:
        compile_locally(loaded.__class__(**{**loaded.__dict__, "spec": spec}), "digits")
    assert str(e.value).startswith(
        "endpoints.digits.compile.input_shapes.input0: [1, 3, 224, 224] does not match the model, which takes "
        "[N, 1, 8, 8]"
    )


def _labels(server, x):
    """What the served model itself says (the handlers the server loaded), batch by batch."""
    import torch

    _, app = server
    with torch.inference_mode():
        return app.handlers.module.predict_fn(torch.from_numpy(x), app.handlers.model).argmax(1).numpy()


def test_ping_and_predictions_in_json_and_npy(server, digits):
    url, _ = server
    with urllib.request.urlopen(f"{url}/ping") as resp:
        assert resp.status == 200
    x, y = digits
    status, ctype, body = _post(url, json.dumps({"instances": x[:8].tolist()}).encode())
    assert status == 200 and ctype == "application/json"
    predictions = json.loads(body)["predictions"]
    assert [p["label"] for p in predictions] == list(_labels(server, x[:8]))
    assert all(abs(sum(p["probabilities"]) - 1) < 1e-4 for p in predictions)
    # one sample without the batch dimension, as a bare list
    status, _, body = _post(url, json.dumps(x[3].tolist()).encode())
    assert status == 200 and json.loads(body)["predictions"][0]["label"] == _labels(server, x[3:4])[0]
    buf = io.BytesIO()
    np.save(buf, x[:5])
    status, ctype, body = _post(url, buf.getvalue(), "application/x-npy", "application/x-npy")
    probs = np.load(io.BytesIO(body))
    assert status == 200 and ctype == "application/x-npy" and probs.shape == (5, 10)
    assert list(probs.argmax(1)) == list(_labels(server, x[:5]))
    assert (_labels(server, x[:200]) == y[:200]).mean() > 0.8  # a trained model, not noise


@pytest.mark.parametrize(
    ("body", "content_type", "accept", "status", "reason"),
    [
        (b"{not json", "application/json", "application/json", 400, "not valid JSON"),
        (b'{"rows": []}', "application/json", "application/json", 400, '"instances"'),
        (b"[[1, 2], [3]]", "application/json", "application/json", 400, "rectangular"),
        (
            json.dumps([[0.0] * 64]).encode(),
            "application/json",
            "application/json",
            400,
            "a sample has shape 1x8x8",
        ),
        (b"[NaN]", "application/json", "application/json", 400, "NaN"),
        (b"a,b\n1,2", "text/csv", "application/json", 415, "not supported"),
        (b"\x93NUMPY-broken", "application/x-npy", "application/json", 400, "not a .npy array"),
        (json.dumps([[[0.0] * 8] * 8]).encode(), "application/json", "text/html", 406, "cannot answer"),
    ],
)
def test_bad_payloads_get_a_4xx_with_the_reason(server, body, content_type, accept, status, reason):
    url, _ = server
    got, _, answer = _post(url, body, content_type, accept)
    assert got == status
    assert reason in json.loads(answer)["error"]


def test_routes_methods_and_size_limits(server):
    url, _ = server
    for path, method, status in (("/nope", "GET", 404), ("/invocations", "GET", 405), ("/ping", "POST", 405)):
        req = urllib.request.Request(f"{url}{path}", method=method, data=b"" if method == "POST" else None)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == status
    status, _, body = _post(url, b"[" + b"0," * (4 * 1024 * 1024) + b"0]")
    assert status == 413 and "limited to" in json.loads(body)["error"]


def test_concurrent_requests_are_batched_and_answered_as_if_alone(server, digits):
    url, app = server
    x, _ = digits
    payloads = [json.dumps({"instances": [x[i].tolist()]}).encode() for i in range(64)]
    alone = [json.loads(_post(url, p)[2])["predictions"][0] for p in payloads]
    before = app.batcher.stats.largest
    app.batcher.stats.largest = 0
    result = load(url, payloads, concurrency=32, total=64, keep_bodies=True)
    assert result.errors == []
    for i, body in result.bodies:
        got = json.loads(body)["predictions"][0]
        assert got["label"] == alone[i]["label"]
        assert np.allclose(got["probabilities"], alone[i]["probabilities"], atol=1e-5)
    assert app.batcher.stats.largest > 1, "32 concurrent clients never shared a batch"
    app.batcher.stats.largest = max(before, app.batcher.stats.largest)


def test_load_10k_requests_from_32_clients_without_an_error(server, digits):
    url, _ = server
    x, y = digits
    payloads = [json.dumps({"instances": [x[i].tolist()]}).encode() for i in range(200)]
    result = load(url, payloads, concurrency=32, total=10_000, keep_bodies=True)
    assert result.errors == [] and result.statuses == {200: 10_000}
    wrong = sum(json.loads(b)["predictions"][0]["label"] != y[i % 200] for i, b in result.bodies)
    assert wrong / 10_000 < 0.1  # the trained model's answers, not noise
