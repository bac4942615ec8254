"""The `runs:` hint `sagestack local train` prints for a project with tracking.mlflow works exactly as
printed: pasted into a shell in the project, it starts MLflow's UI on the local store, whose page
loads and whose API lists the run that was just trained. (mlflow-skinny, pinned before, has no UI:
the printed command failed with `No module named 'aiohttp'` and the page said `index.html not
found`.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sagestack.local.training.processes import free_port

BIN = Path(sys.executable).parent


def _runs_hint(root: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [
            str(BIN / "sagestack"),
            "local",
            "train",
            "classifier",
            "--env",
            "dev",
            "--fresh",
            "--set",
            "epochs=1",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (hint,) = [line.split("runs:", 1)[1].strip() for line in done.stdout.splitlines() if "runs:" in line]
    return hint


def _get(url: str, body: dict[str, object] | None = None) -> str:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def test_the_printed_mlflow_ui_command_serves_the_local_run(digits_project):
    # A user's shell with the project's environment activated.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    hint = _runs_hint(digits_project.root, env)
    assert hint.startswith("mlflow ui --backend-store-uri sqlite:///.sagestack/local/dev/mlflow.db"), hint

    port = free_port()
    server = subprocess.Popen(
        ["bash", "-c", hint],  # exactly as printed; the port through MLflow's own MLFLOW_PORT
        cwd=digits_project.root,
        env={**env, "MLFLOW_PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                page = _get(base + "/")
                break
            except OSError:
                assert server.poll() is None, server.communicate()[0][-3000:]
                assert time.monotonic() < deadline, "mlflow ui did not answer in 90 s"
                time.sleep(0.5)
        assert "<!doctype html>" in page.lower() and "index.html not found" not in page
        found = json.loads(_get(base + "/ajax-api/2.0/mlflow/experiments/search", {"max_results": 50}))
        (experiment,) = [e for e in found["experiments"] if e["name"] == "digits-dev-classifier"]
        runs = json.loads(
            _get(base + "/ajax-api/2.0/mlflow/runs/search", {"experiment_ids": [experiment["experiment_id"]]})
        )
        (run,) = runs["runs"]
        assert run["info"]["status"] == "FINISHED"
        assert any(m["key"] == "val_accuracy" for m in run["data"]["metrics"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_hint_names_this_environments_mlflow_when_the_shell_would_not_find_it(tmp_path, monkeypatch):
    """Run as `.venv/bin/sagestack …` without activating: a bare `mlflow` would be another (or
    none), so the hint names this environment's by its path; a store outside the folder the
    command runs in is named by its absolute path."""
    from sagestack.local.training.tracking import LocalStore

    store = LocalStore(tmp_path / "elsewhere" / "dev", "p-dev-train")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    hint = store.ui_hint(cwd=tmp_path / "project")
    assert (
        hint
        == f"{BIN / 'mlflow'} ui --backend-store-uri sqlite:///{tmp_path / 'elsewhere' / 'dev' / 'mlflow.db'}"
    )
