"""`sagestack local bench` on the example project: the digits endpoint's batching and workers, and
the chat LLM's batch size and users, swept against their slo: (seconds-long: --quick, few
requests); the table read at 80 columns, --json, and the chart opened as a PNG with Pillow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.charts import assert_a_chart

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The example project's config in a folder of its own, with a digits model made here (the
    traced CNN training_src/model.py builds, untrained: the bench measures speed, not accuracy)."""
    from bench.serve import build_model_dir

    root = tmp_path_factory.mktemp("bench") / "digits"
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "containers", root / "containers")
    shutil.copytree(
        REPO / "training_src", root / "training_src", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root, build_model_dir(root / "model")


def bench(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", "local", "bench", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_local_bench_digits_prints_the_table_and_writes_the_chart(example):
    root, model = example
    png = root / "digits.png"
    result = bench(
        root, "digits", "--env", "dev", "--quick", "--model", str(model), "--chart", str(png),
        "--clients", "1,4", "--requests", "40",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = result.stdout
    assert "target: p95_ms 20, p99_ms 50, requests_per_second 100" in " ".join(text.split())
    assert "configuration" in text and "no batching, 1" in text and "batch 16, delay 5" in text
    assert "latency p95 (ms) (target 20: ---)" in text and f"chart: {png}" in text
    assert "measured 4/4" in result.stderr  # progress, one whole line a point in a pipe
    assert_a_chart(png, (640, 480))


def test_local_bench_json_is_the_table(example):
    root, model = example
    result = bench(
        root, "digits", "--env", "dev", "--quick", "--model", str(model), "--clients", "2",
        "--requests", "20", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["targets"] == {"p95_ms": 20.0, "p99_ms": 50.0, "requests_per_second": 100.0}
    assert [p["configuration"] for p in doc["points"]] == [
        "no batching, 1 worker",
        doc["points"][1]["configuration"],
    ]
    for p in doc["points"]:
        assert p["requests"] == 20 and p["failed"] == 0 and p["clients"] == 2
        assert p["p50_ms"] <= p["p95_ms"] <= p["p99_ms"]
        assert p["meets"] == (not p["misses"])
        assert ("p95_ms" in p["misses"]) == (p["p95_ms"] > 20)
    assert Path(doc["chart"]).is_file()
    assert doc["llm"] is False
    from sagestack.local.bench.report import Sweep

    assert Sweep.from_json(doc).to_json() == doc  # what the docs' recorded runs are read back by


def test_local_bench_without_an_input_shape_asks_for_payloads(example, tmp_path):
    root, model = example
    bad = tmp_path / "bodies.jsonl"
    bad.write_text('{"instances": [1]}\nnot json\n')
    result = bench(root, "digits", "--env", "dev", "--quick", "--model", str(model), "--payload", str(bad))
    assert result.returncode == 1
    assert "request 2 is not JSON" in result.stderr and "Traceback" not in result.stderr


def test_local_bench_without_compile_sends_requests_of_the_models_own_shape(example, tmp_path):
    """An endpoint with no compile: (the init skeleton's) is benched with requests of the input
    shape its model states (model_info.json), as `local compile` / `local serve` use it; it said
    "states no input shape: give --payload" while `local serve --predict` served the same model."""
    root, model = example
    project = tmp_path / "nocompile"
    shutil.copytree(root, project, ignore=shutil.ignore_patterns(".sagestack"))
    spec = project / "config" / "sagestack.yaml"
    text = spec.read_text()
    start, end = text.index("    compile:  "), text.index("    instance_type: ml.c5.xlarge")
    block = text[start:end]
    spec.write_text(text.replace(block, "", 1))
    result = bench(
        project, "digits", "--env", "dev", "--quick", "--model", str(model), "--clients", "1",
        "--requests", "10", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "input0 1x1x8x8" in json.loads(result.stdout)["workload"], result.stdout[:300]


def test_local_bench_chat_measures_time_to_first_token_and_tokens_per_user(example):
    """The LLM: tiny weights made first (what `local serve` would make, trained for a few steps)."""
    from sagestack.local.llm.endpoint import local_llm
    from sagestack.local.llm.weights import WeightsRecipe, build_weights
    from sagestack.project import load_project

    root, _ = example
    build_weights(local_llm(load_project(root, "staging"), "chat").weights, WeightsRecipe(steps=5))
    png = root / "chat.png"
    result = bench(root, "chat", "--env", "staging", "--quick", "--clients", "1,2", "--chart", str(png))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = " ".join(result.stdout.split())
    assert "prompts of 32 tokens answered in up to 8 (the slo's 512 and 128" in text
    assert "ttft ms" in text and "tok/s user" in text and "batch 1" in text and "batch 8" in text
    assert "time to first token, p95 (ms) (target 500: ---)" in text
    assert "tokens/s per user (median) (target 30: ---)" in text
    assert_a_chart(png, (1280, 480))
