"""What `sagestack init` writes serves as it trains: the skeleton's train.py saves what the PyTorch
inference container loads (model.pt, model_info.json, code/inference.py), its spec names an endpoint
that serves it, and an unknown endpoint's error says how to add one — in lines that validate when
pasted. The whole sequence, as init prints it, runs in tests/synth/test_first_ten_minutes.py."""

from __future__ import annotations

import json
import re
from importlib import resources

from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.ops.init import NEXT_STEPS, init_project, next_steps
from tests.conftest import REPO


def _template(name: str) -> str:
    return resources.files("sagestack.templates").joinpath(name).read_text()


def test_the_skeleton_serves_with_the_repository_serving_contract():
    """One serving contract: the one the conformance tier runs in AWS's toolkit and TorchServe."""
    assert _template("inference.py") == (REPO / "training_src" / "inference.py").read_text()


def test_init_writes_the_serving_contract_and_an_endpoint_of_the_job(tmp_path):
    init_project(tmp_path / "p", "demo")
    root = tmp_path / "p"
    assert (root / "training_src" / "inference.py").read_text() == _template("inference.py")
    spec = (root / "config" / "sagestack.yaml").read_text()
    assert re.search(r"^endpoints:\n  digits:\n    model: \{from: train\}", spec, re.M), spec
    script = (root / "training_src" / "train.py").read_text()
    for saved in ('"model.pt"', '"model_info.json"', '"code"', '"inference.py"'):
        assert saved in script, saved
    assert "model.pth" not in script and "model.json" not in script  # what nothing loads


def test_init_prints_a_serve_step_for_the_endpoint_it_writes_and_a_deploy_with_its_stacks(tmp_path):
    out = CliRunner().invoke(app, ["init", "demo", "--dir", str(tmp_path / "demo")])
    assert out.exit_code == 0, out.output
    spec = (tmp_path / "demo" / "config" / "sagestack.yaml").read_text()
    commands = [command for command, _ in NEXT_STEPS]
    for command in commands:
        assert command in out.output
    serve = next(c for c in commands if c.startswith("sagestack local serve "))
    assert f"\n  {serve.split()[3]}:\n" in spec  # the endpoint it serves is the one init wrote
    assert "npm install && npx cdk deploy 'dev/*'" in commands  # a pattern: the CLI asks for one otherwise
    package = json.loads((tmp_path / "demo" / "package.json").read_text())
    assert set(package["devDependencies"]) == {"aws-cdk", "node"}


def test_a_framework_without_an_endpoint_prints_no_serve_step():
    assert [c for c, _ in next_steps("tensorflow") if "serve" in c] == []
    assert next_steps("pytorch") == NEXT_STEPS


def test_an_unknown_endpoint_says_how_to_add_one_in_lines_that_validate(tmp_path):
    init_project(tmp_path / "p", "demo")
    root = tmp_path / "p"
    spec_path = root / "config" / "sagestack.yaml"
    spec = spec_path.read_text()
    spec_path.write_text(spec[: spec.index("\nendpoints:")] + "\n")  # a project with no endpoint
    out = CliRunner().invoke(app, ["local", "serve", "scores", "--root", str(root)])
    assert out.exit_code == 2
    text = out.output
    assert "no endpoint 'scores' (defined: none)" in text, text
    snippet = text[text.index("endpoints:") :]
    assert "{from: train}" in snippet  # the project's own job
    spec_path.write_text(spec_path.read_text() + "\n" + snippet)
    valid = CliRunner().invoke(app, ["validate", "--root", str(root)])
    assert valid.exit_code == 0, valid.output


def test_an_unknown_entry_among_defined_ones_keeps_the_did_you_mean(tmp_path):
    init_project(tmp_path / "p", "demo")
    out = CliRunner().invoke(app, ["local", "serve", "digitz", "--root", str(tmp_path / "p")])
    assert out.exit_code == 2
    assert "no endpoint 'digitz'; did you mean 'digits'? (defined: digits)" in out.output
    assert "Add to" not in out.output


def test_the_skeletons_torchscript_model_compiles_for_its_endpoint_without_a_warning(tmp_path):
    """`local serve` compiles what train.py saved first: model.pt is TorchScript already, so it is not
    traced again (torch warned, on the serve screen, that tracing a ScriptModule does nothing)."""
    import importlib.util
    import warnings

    import torch

    from sagestack.local.serving.compile import compile_locally, trained_model_dir
    from sagestack.project import load_project

    init_project(tmp_path / "p", "demo")
    loaded = load_project(tmp_path / "p", "dev")
    spec = importlib.util.spec_from_file_location(
        "skeleton_train", tmp_path / "p" / "training_src" / "train.py"
    )
    assert spec is not None and spec.loader is not None
    skeleton = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(skeleton)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    skeleton.save(model, torch.zeros(1, 1, 8, 8), trained_model_dir(loaded, "train"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        result = compile_locally(loaded, "digits")
    assert result.input_shapes == {"input0": [1, 1, 8, 8]}
    assert result.checks > 0
