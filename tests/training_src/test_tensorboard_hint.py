"""The `tensorboard --logdir …` line `local train` prints when the run wrote event files works as
printed: pasted into bash where the user stands, TensorBoard starts and serves the hosts' runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest
from torch.utils.tensorboard import SummaryWriter

from sagestack.local.training.processes import free_port
from sagestack.local.training.train import tensorboard_hint

pytestmark = pytest.mark.train


def test_no_event_files_no_hint(tmp_path):
    (tmp_path / "run" / "hosts" / "algo-1" / "output").mkdir(parents=True)
    assert tensorboard_hint(tmp_path / "run", cwd=tmp_path) is None


def test_the_printed_command_starts_tensorboard_on_the_hosts_runs(tmp_path):
    run = tmp_path / ".sagestack" / "local" / "dev" / "train"
    for host in ("algo-1", "algo-2"):
        writer = SummaryWriter(log_dir=str(run / "hosts" / host / "output" / "tensorboard"))
        for step in range(3):
            writer.add_scalar("train_loss", 1.0 / (step + 1), step)
        writer.close()
    hint = tensorboard_hint(run, cwd=tmp_path)
    assert hint is not None and hint.endswith(" --logdir .sagestack/local/dev/train/hosts"), hint
    port = free_port()  # the printed line, on a port of the test's own (6006 may be taken)
    server = subprocess.Popen(
        ["bash", "-c", f"{hint} --port {port}"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},  # the shell sagestack ran in
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline, runs = time.monotonic() + 120, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/data/runs", timeout=5) as response:
                    runs = json.loads(response.read())
                if len(runs) == 2:
                    break
            except OSError:
                pass
            time.sleep(1)
        assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
        assert sorted(runs or []) == ["algo-1/output/tensorboard", "algo-2/output/tensorboard"], runs
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
