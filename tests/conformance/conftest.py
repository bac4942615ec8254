"""Shared by the conformance modules: the served digits model and AWS's handler's answers to CASES."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.cases import CASES
from tests.conftest import REPO
from tests.support.digits_model import make_model_dir


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
