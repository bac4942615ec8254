"""`sagestack init NAME --framework tensorflow`: the same project as the PyTorch default, with the
TensorFlow training image, the Keras script and its hyperparameters; a spec that validates and
renders (the image resolved by sagemaker-core, as CreateTrainingJob receives it). The Keras script
itself trains in tests/training_src/test_keras_skeleton.py."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.cli.spec import Framework
from sagestack.ops.init import FRAMEWORKS, InitError, init_project

TF_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.21-cpu-py312"


def _template(name: str) -> str:
    return resources.files("sagestack.templates").joinpath(name).read_text()


@pytest.fixture
def tf_project(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["init", "kdemo", "--dir", str(tmp_path / "kdemo"), "--framework", "tensorflow"])
    assert out.exit_code == 0, out.output
    return tmp_path / "kdemo", out.output


def test_init_tensorflow_writes_the_keras_script_and_a_spec_that_validates(tf_project):
    root, screen = tf_project
    assert (root / "training_src" / "train.py").read_text() == _template("train_keras.py")
    spec = (root / "config" / "sagestack.yaml").read_text()
    assert 'train: {dlc: {framework: tensorflow, version: "2.21", py_version: py312}}' in spec
    # every next step init prints is one a TensorFlow project has too
    for command in ("sagestack validate", "sagestack plan", "sagestack local train train"):
        assert command in screen
    valid = CliRunner().invoke(app, ["validate", "--root", str(root)])
    assert valid.exit_code == 0, valid.output


def test_the_tensorflow_spec_renders_the_tensorflow_image_and_the_script_arguments(tf_project):
    root, _ = tf_project
    out = CliRunner().invoke(app, ["render", "train", "--json", "--root", str(root)])
    assert out.exit_code == 0, out.output
    (request,) = [r["request"] for r in json.loads(out.stdout)["requests"]]
    assert request["AlgorithmSpecification"]["TrainingImage"] == TF_IMAGE
    hyperparameters = request["HyperParameters"]
    assert {k: hyperparameters[k] for k in ("epochs", "lr", "batch_size")} == {
        "epochs": "5",
        "lr": "0.01",
        "batch_size": "64",
    }
    script = _template("train_keras.py")
    for name in ("epochs", "lr", "batch_size", "model_dir"):  # model_dir: the SDK's, for TensorFlow
        assert f'"--{name}"' in script, name
    regexes = {d["Name"]: d["Regex"] for d in request["AlgorithmSpecification"]["MetricDefinitions"]}
    assert regexes == {
        "val_accuracy": "val_accuracy=([0-9.]+)",
        "train_loss": "train_loss=([0-9.]+)",
        "val_loss": "val_loss=([0-9.]+)",
    }


def test_the_pytorch_default_is_unchanged(tmp_path):
    init_project(tmp_path / "p", "demo")
    assert (tmp_path / "p" / "training_src" / "train.py").read_text() == _template("train.py")
    spec = (tmp_path / "p" / "config" / "sagestack.yaml").read_text()
    assert 'train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}' in spec
    assert "hyperparameters: {epochs: 5, lr: 0.01}\n" in spec
    assert "distribution" not in spec and "tensorflow" not in spec


def test_an_unknown_framework_is_refused_with_the_choices(tmp_path):
    out = CliRunner().invoke(app, ["init", "demo", "--dir", str(tmp_path / "d"), "--framework", "jax"])
    assert out.exit_code == 2
    assert "'jax' is not one of 'pytorch', 'tensorflow'" in out.output
    assert not (tmp_path / "d").exists()
    with pytest.raises(InitError, match="unknown framework 'jax': choose one of pytorch, tensorflow"):
        init_project(tmp_path / "e", "demo", framework="jax")


def test_the_cli_choices_are_the_frameworks_init_knows():
    assert [f.value for f in Framework] == list(FRAMEWORKS)
