"""A new project without this repository: the package is built as a wheel, installed into a fresh
virtual environment (its dependencies borrowed from this one, never sagestack itself), then
`sagestack init` writes a project that validates and synthesizes with what the wheel carries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.synth


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300):  # type: ignore[no-untyped-def]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "sagestack", src / "sagestack", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        cwd=src,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = out.glob("sagestack-*.whl")
    return path


def test_the_wheel_carries_stacks_catalog_data_templates_and_no_tests(wheel):
    """Everything installed lives under sagestack/: no top-level `stacks` beside a CDK app's own."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "sagestack/app/builder.py",
        "sagestack/core/catalog/data/instances.json",
        "sagestack/core/catalog/data/debugger_rules.json",
        "sagestack/templates/train.py",
        "sagestack/templates/train_keras.py",  # init --framework tensorflow
        "sagestack/constructs/training_pipeline.py",
        "sagestack/cli/__main__.py",
        "sagestack/py.typed",  # PEP 561: a user's mypy reads the constructs' hints
    ):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "examples/", "training_src/", "stacks/")) for n in names)
    assert {n.split("/")[0] for n in names if not n.startswith("sagestack-")} == {"sagestack"}


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A venv with only the wheel installed; dependencies through a .pth line to this venv's
    site-packages (a plain path: that folder's own .pth files, the editable sagestack among them,
    are not processed)."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=venv
        ).stdout.strip()
    )
    (site / "borrowed-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
        cwd=venv,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


def _env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return env


def test_init_then_validate_and_synthesize_from_the_installed_package(installed, tmp_path):
    env = _env(installed)
    where = _run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import sagestack.app; print(sagestack.__file__, sagestack.app.__file__)",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert str(installed) in where.stdout and str(REPO) not in where.stdout, where.stdout + where.stderr

    init = _run([str(installed / "bin" / "sagestack"), "init", "demo"], cwd=tmp_path, env=env)
    assert init.returncode == 0, init.stdout + init.stderr
    project = tmp_path / "demo"
    assert (project / "training_src" / "train.py").exists()
    assert (
        json.loads((project / "cdk.json").read_text())["context"]
        == json.loads((REPO / "cdk.json").read_text())["context"]
    )
    # the CDK CLI that deploys it and the Node.js it runs on, pinned as this repository pins its own
    # (`npm install && npx cdk deploy 'dev/*'`)
    ours = json.loads((REPO / "package.json").read_text())
    theirs = json.loads((project / "package.json").read_text())
    # (the repository's own also pins what builds its docs, @mermaid-js/tiny: not a project's)
    deploys = {k: v for k, v in ours["devDependencies"].items() if k in ("aws-cdk", "node")}
    assert theirs["devDependencies"] == deploys and len(deploys) == 2
    assert theirs["allowScripts"] == ours["allowScripts"]

    validate = _run([str(installed / "bin" / "sagestack"), "validate"], cwd=project, env=env)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert "demo in us-east-1" in validate.stdout

    synth = _run(
        [str(installed / "bin" / "sagestack"), "synth", "-o", "cdk.out"], cwd=project, env=env, timeout=600
    )
    assert synth.returncode == 0, synth.stdout + synth.stderr
    templates = sorted(p.name for p in (project / "cdk.out").glob("assembly-dev/*.template.json"))
    assert any("Foundation" in t for t in templates) and any("Training" in t for t in templates), templates

    again = _run([str(installed / "bin" / "sagestack"), "init", "demo"], cwd=tmp_path, env=env)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_init_refuses_a_bad_name_with_the_rule(installed, tmp_path):
    bad = _run(
        [str(installed / "bin" / "sagestack"), "init", "My_Project"], cwd=tmp_path, env=_env(installed)
    )
    assert bad.returncode == 2
    assert "not a valid project name" in bad.stderr and not (tmp_path / "My_Project").exists()


USER_APP = """\
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_kms as kms

from sagestack.constructs import ArtifactBucket, ExecutionRole

app = App()
stack = Stack(app, "Typed")
key = kms.Key(stack, "Key", enable_key_rotation=True)
artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
role = ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)
timeout: Duration = Duration.hours(2)
"""


def test_a_users_mypy_reads_the_installed_packages_types(installed, tmp_path):
    """With py.typed in the wheel, a user's `mypy --strict` follows sagestack.constructs (no "Cannot
    find implementation or library stub"): a correct app passes, and a prop of the wrong type is
    mypy's error at the call, as it is for aws-cdk-lib's own props."""
    (tmp_path / "app.py").write_text(USER_APP)
    (tmp_path / "wrong.py").write_text(
        USER_APP + 'ArtifactBucket(stack, "Other", encryption_key="alias/mine")\n'
    )
    mypy = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--python-executable",
        str(installed / "bin" / "python"),
    ]
    mypy += ["--cache-dir", str(tmp_path / ".mypy_cache")]
    # one run for both files (mypy reads aws-cdk-lib's hints once: minutes on 2 CPUs)
    done = _run([*mypy, "app.py", "wrong.py"], cwd=tmp_path, env=_env(installed), timeout=900)
    assert "library stub" not in done.stdout and "py.typed" not in done.stdout, done.stdout
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors and all(line.startswith("wrong.py:") for line in errors), done.stdout + done.stderr
    assert done.returncode == 1 and any('Argument "encryption_key"' in line for line in errors), done.stdout
