"""Every benchmark in bench/ runs in its smoke mode (`--smoke`: each measurement once, small inputs),
so that a change which breaks one fails here instead of on the day someone measures. The figures
are never asserted: on a shared test machine they mean nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHES = [
    pytest.param("synth.py", marks=pytest.mark.synth, id="synth"),
    pytest.param("cli.py", id="cli"),
    pytest.param("plan_path.py", id="plan_path"),
    pytest.param("load.py", id="load"),
    pytest.param("train.py", marks=pytest.mark.train, id="train"),
    pytest.param("serve.py", marks=pytest.mark.train, id="serve"),
    pytest.param("transform.py", marks=pytest.mark.train, id="transform"),
    pytest.param("llm_serve.py", marks=pytest.mark.train, id="llm_serve"),
    pytest.param("gpu.py", marks=pytest.mark.train, id="gpu"),  # prints "skipped" without CUDA
]


def test_every_bench_script_has_a_smoke_run():
    scripts = {p.name for p in (REPO / "bench").glob("*.py")}
    # handwritten_app.py is synth.py's baseline and ddp_loop.py train.py's: they run inside those.
    assert scripts - {"handwritten_app.py", "ddp_loop.py"} == {p.values[0] for p in BENCHES}


@pytest.mark.parametrize("script", BENCHES)
def test_bench_smoke(script):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--smoke"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"bench/{script} --smoke failed:\n{(done.stdout + done.stderr)[-4000:]}"
    assert done.stdout.strip(), f"bench/{script} --smoke printed nothing"
