"""`local serve` of a Keras model exported as a SavedModel (real TensorFlow CPU): answered as
SageMaker's TensorFlow Serving container answers it (its nginx/njs front, TF Serving's REST predict
API), predictions equal to the model's own, and every mistake of the client a 4xx."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import numpy as np
import pytest

from sagestack.local.serving.serve import BackgroundServer, ServeOptions, runtime_client
from tests.support.moto_server import free_port

pytestmark = pytest.mark.train
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
keras = pytest.importorskip("keras")


@pytest.fixture(scope="module")
def keras_model(tmp_path_factory):
    """A small digits classifier (8x8 in, 10 softmax probabilities out), exported as model/1/."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input(shape=(8, 8), name="pixels"),
            keras.layers.Flatten(),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model_dir = tmp_path_factory.mktemp("tf") / "model"
    model.export(str(model_dir / "1"), verbose=False)
    return model, model_dir


@pytest.fixture(scope="module")
def served(keras_model):
    model, model_dir = keras_model
    with BackgroundServer(model_dir, ServeOptions(port=free_port(), workers=2)) as url:
        yield model, url


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    x, _ = load_digits(return_X_y=True)
    return (x[:6] / 16.0).reshape(-1, 8, 8).astype(np.float32)


def _post(url: str, body: bytes, content_type: str | None = "application/json", accept: str | None = None):
    headers = {"Content-Type": content_type} if content_type else {}
    if accept:
        headers["Accept"] = accept
    req = urllib.request.Request(f"{url}/invocations", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], json.loads(e.read())


def test_ping_and_instances_answer_the_models_own_predictions(served, digits):
    """boto3's sagemaker-runtime client (its request checked against botocore's model) gets
    {"predictions": [...]} equal to the Keras model's own outputs."""
    model, url = served
    with urllib.request.urlopen(f"{url}/ping", timeout=10) as resp:
        assert resp.status == 200
    client = runtime_client(url)
    response = client.invoke_endpoint(
        EndpointName="keras",
        Body=json.dumps({"instances": digits.tolist()}),
        ContentType="application/json",
    )
    assert response["ContentType"] == "application/json"
    predictions = np.asarray(json.loads(response["Body"].read())["predictions"], dtype=np.float32)
    np.testing.assert_allclose(predictions, model(digits).numpy(), rtol=1e-6, atol=1e-7)


def test_the_containers_other_request_shapes(served, digits):
    """Columnar inputs -> outputs; JSON Lines, CSV and a bare list made into instances as the
    container's njs script makes them; a JSON Lines Accept names the response's type."""
    model, url = served
    expected = model(digits).numpy()
    status, kind, body = _post(url, json.dumps({"inputs": digits[:2].tolist()}).encode())
    assert (status, kind) == (200, "application/json")
    np.testing.assert_allclose(body["outputs"], expected[:2], rtol=1e-6, atol=1e-7)

    lines = "\n".join(json.dumps(d.tolist()) for d in digits[:3]).encode()
    status, kind, body = _post(url, lines, "application/jsonlines", accept="application/jsonlines")
    assert (status, kind) == (200, "application/jsonlines")
    np.testing.assert_allclose(body["predictions"], expected[:3], rtol=1e-6, atol=1e-7)

    # A bare list starting [[ is the instances list itself: one 8x8 sample is 8 rows, none 8x8.
    status, _, body = _post(url, json.dumps(digits[0].tolist()).encode())
    assert status == 400, body

    status, _, body = _post(url, json.dumps([digits[0].tolist()]).encode())
    assert status == 200
    np.testing.assert_allclose(body["predictions"], expected[:1], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("body", "content_type", "status", "says"),
    [
        (b'{"instances": [1, 2', "application/json", 400, "JSON Parse error"),
        # No instances: the njs script wraps the object as one instance, and TF Serving finds no such input.
        (b'{"signature_name": "serving_default"}', "application/json", 400, "must only have keys: pixels"),
        (b'{"examples": [{"a": 1}]}', "application/json", 400, "Missing 'inputs' or 'instances' key"),
        (b'{"instances": []}', "application/json", 400, "No values in 'instances'"),
        (b'{"instances": {"a": 1}}', "application/json", 400, "to be an list/array"),
        (b'{"instances": [[1, 2, 3]]}', "application/json", 400, "takes shape [?,8,8]"),
        (
            json.dumps({"instances": [[["x"] * 8] * 8]}).encode(),
            "application/json",
            400,
            "expected type: float",
        ),
        (b'{"instances": [1], "inputs": [1]}', "application/json", 400, "only one of"),
        (b'{"instances": [[1]], "signature_name": "nope"}', "application/json", 400, "not found"),
        (b"1,2,3\n4,5,6\n", "text/csv", 400, "takes shape"),
        (b"\x93NUMPY", "application/x-npy", 415, "Unsupported Media Type: application/x-npy"),
        (b"{}", "application/json; charset=utf-8", 415, "Unsupported Media Type"),
        (b"{}", None, 415, "Unsupported Media Type"),
    ],
)
def test_client_mistakes_are_4xx_with_tf_servings_error_body(served, body, content_type, status, says):
    _, url = served
    got, kind, answer = _post(url, body, content_type)
    assert got == status and kind == "application/json", answer
    assert set(answer) == {"error"} and says in answer["error"], answer


def test_no_accept_is_refused_as_the_container_refuses_none(served, digits):
    """The container's njs script never answers 406: any Accept gets TF Serving's JSON, named
    application/json unless the Accept asks for JSON or JSON Lines first."""
    _, url = served
    status, kind, body = _post(
        url, json.dumps({"instances": digits[:1].tolist()}).encode(), accept="text/csv"
    )
    assert (status, kind) == (200, "application/json") and len(body["predictions"]) == 1


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    """A model of named inputs (a float and an int32 one) and two outputs, served."""
    features = keras.Input(shape=(3,), name="features")
    count = keras.Input(shape=(1,), name="count", dtype="int32")
    scores = keras.layers.Dense(2)(features)
    model = keras.Model(
        {"features": features, "count": count},
        {"scores": scores, "scaled": scores * keras.ops.cast(count, "float32")},
    )
    model_dir = tmp_path_factory.mktemp("tf2") / "model"
    model.export(str(model_dir / "1"), verbose=False)
    background = BackgroundServer(model_dir, ServeOptions(port=free_port()))
    with background as url:
        yield model, url, background.app.handlers.model


def test_named_inputs_and_outputs_in_row_and_columnar_form(two_inputs):
    """Row format: one object per instance in, one per prediction out; columnar: a tensor per
    input in, a tensor per output out (TF Serving's two forms)."""
    model, url, _ = two_inputs
    features = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=np.float32)
    count = np.array([[2], [3]], dtype=np.int32)
    expected = {k: v.numpy() for k, v in model({"features": features, "count": count}).items()}
    rows = [{"features": f.tolist(), "count": c.tolist()} for f, c in zip(features, count, strict=True)]
    status, _, body = _post(url, json.dumps({"instances": rows}).encode())
    assert status == 200, body
    for name in ("scores", "scaled"):
        got = [p[name] for p in body["predictions"]]
        np.testing.assert_allclose(got, expected[name], rtol=1e-6, atol=1e-6)
    columns = {"features": features.tolist(), "count": count.tolist()}
    status, _, body = _post(url, json.dumps({"inputs": columns}).encode())
    assert status == 200 and set(body["outputs"]) == {"scores", "scaled"}, body
    np.testing.assert_allclose(body["outputs"]["scaled"], expected["scaled"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("request_body", "says"),
    [
        ({"instances": [{"features": [1, 2, 3], "count": [1.5]}]}, "is not of expected type: int32"),
        ({"instances": [[1, 2, 3]]}, "instances is a plain list, but expecting list of objects"),
        ({"instances": [{"features": [1, 2, 3]}]}, "must only have keys: count,features"),
        ({"inputs": {"features": [[1, 2, 3]]}}, "Missing named input: count in 'inputs' object."),
        ({"inputs": [[1, 2, 3]]}, "inputs is a plain value/list, but expecting an object"),
    ],
)
def test_named_input_mistakes_are_400(two_inputs, request_body, says):
    _, url, _ = two_inputs
    status, _, body = _post(url, json.dumps(request_body).encode())
    assert status == 400 and says in body["error"], body


def test_local_serve_predict_serves_a_tf_jobs_savedmodel_as_trained(keras_model, tmp_path):
    """`local serve ENDPOINT --predict N --json` of a TensorFlow job's endpoint: the SavedModel the
    local training left (no compile step), each digit shaped as the model's input, the answers
    the model's own."""
    import shutil
    import subprocess
    import sys

    from sklearn.datasets import load_digits

    from tests.conftest import Project
    from tests.unit.test_tf_serving_rules import tf_spec

    model, model_dir = keras_model
    project = Project(tmp_path / "p").spec(tf_spec("2.19")).env("dev")
    shutil.copytree(model_dir, project.root / ".sagestack" / "local" / "dev" / "classifier" / "model")
    port = str(free_port())
    args = ["local", "serve", "digits", "--env", "dev", "--port", port, "--predict", "3", "--json"]
    result = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *args, "--root", str(project.root)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80", "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["url"] == f"http://127.0.0.1:{port}/invocations"
    x, y = load_digits(return_X_y=True)
    expected = model((x[:3] / 16.0).reshape(-1, 8, 8).astype(np.float32)).numpy()
    assert [r["label"] for r in doc["predictions"]] == y[:3].tolist()
    assert [r["predicted"] for r in doc["predictions"]] == expected.argmax(axis=1).tolist()
    np.testing.assert_allclose(
        [r["probability"] for r in doc["predictions"]], expected.max(axis=1), rtol=1e-6
    )


def test_local_transform_of_a_savedmodel_answers_as_tf_serving(keras_model, digits, tmp_path):
    """A batch transform (JSON Lines split by line, records batched) of the SavedModel: each request
    made into instances by the container's rules, answered with TF Serving's predictions."""
    from sagestack.local.serving.serve import load_model_handlers
    from sagestack.local.serving.transform import run_transform
    from sagestack.transforms.models import TransformSpec

    model, model_dir = keras_model
    (tmp_path / "in").mkdir()
    lines = "\n".join(json.dumps(d.tolist()) for d in digits) + "\n"
    (tmp_path / "in" / "digits.jsonl").write_text(lines)
    spec = TransformSpec.model_validate(
        {
            "model_package": "arn:aws:sagemaker:us-east-1:111111111111:model-package/keras-dev/1",
            "instance_type": "ml.m5.xlarge",
            "content_type": "application/jsonlines",
            "split_type": "Line",
        }
    )
    result = run_transform(load_model_handlers(model_dir), spec, tmp_path / "in", tmp_path / "out")
    assert len(result.files) == 1
    answers = [json.loads(line) for line in (tmp_path / "out" / "digits.jsonl.out").read_text().splitlines()]
    predictions = [p for a in answers for p in a["predictions"]]
    np.testing.assert_allclose(predictions, model(digits).numpy(), rtol=1e-6, atol=1e-7)


def test_predict_refuses_a_model_that_takes_no_digit(two_inputs):
    """--predict shapes digits to the model's one input; a model of named inputs is told, not sent."""
    from sagestack.cli.common import UserError
    from sagestack.cli.local_serving import _tf_sample_shape

    with pytest.raises(UserError, match=r"takes 2 inputs \(count, features\) per sample") as info:
        _tf_sample_shape(two_inputs[2])
    assert info.value.code == 2


def test_a_savedmodel_with_an_inference_script_is_refused_by_name(keras_model, tmp_path):
    """The container would run code/inference.py in its python service, which is not emulated: the
    server says so rather than serving the model without the script's pre- and post-processing."""
    import shutil

    from sagestack.local.serving.handlers import ServeError
    from sagestack.local.serving.serve import load_model_handlers

    model_dir = tmp_path / "model"
    shutil.copytree(keras_model[1], model_dir)
    (model_dir / "code").mkdir()
    (model_dir / "code" / "inference.py").write_text("def input_handler(data, context):\n    return data\n")
    with pytest.raises(ServeError, match="python service"):
        load_model_handlers(model_dir)
