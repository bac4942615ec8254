"""The project `sagestack init --framework tensorflow` writes, trained by `sagestack local train` on two
simulated hosts with MultiWorkerMirroredStrategy (TF_CONFIG per host, as the TensorFlow container
sets it), killed mid-run as a spot reclaim kills it, and resumed from its checkpoint by the same
command: one model, the chief's, in model/1/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import run_local_training
from sagestack.ops.init import init_project
from sagestack.project import load_project

pytestmark = pytest.mark.train

RESUMED = re.compile(r"resumed from backup at step (\d+) \(epoch (\d+) of (\d+)\)")


def keras_project(root: Path) -> Path:
    init_project(root, "kerasdemo", framework="tensorflow")
    spec = root / "config" / "sagestack.yaml"
    spec.write_text(
        spec.read_text().replace(
            "    max_run: 1h\n",
            "    max_run: 1h\n"
            "    instance_count: 2\n"
            "    distribution: {multi_worker_mirrored_strategy: {}}\n"
            "    use_spot_instances: true\n"
            "    max_wait: 2h\n"
            "    checkpoint: {}\n",
        )
    )
    return root


def test_the_keras_skeleton_on_two_hosts_is_killed_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    root = keras_project(tmp_path / "kerasdemo")
    loaded = load_project(root, "dev")
    request_hps = {"epochs": 3}
    options = LocalTrainOptions(hosts=2, overrides=request_hps, threads=1, tracking=False)

    first = run_local_training(loaded, "train", LocalTrainOptions(**{**options.__dict__, "interrupt_at": 14}))
    assert first.interrupted_at is not None and first.interrupted_at >= 14
    assert [launch.runner for launch in first.launches] == ["mwms", "mwms"]
    logs = [p.read_text() for p in first.log_files]
    for log in logs:  # both workers in one cluster of two, the batch and learning rate scaled with it
        assert "workers=2 replicas=2 global_batch=128 (per replica 64) lr=0.02 (x2)" in log, log[-2000:]
    assert "task=worker:0 chief=true" in logs[0] and "task=worker:1 chief=false" in logs[1]
    shared = first.workdir / "checkpoints" / "keras_backup"
    backup = json.loads((shared / "backup.json").read_text())
    assert backup["epochs_done"] >= 1
    # the chief's backup alone: the other worker writes to a folder of its own (TF's multi-worker rule)
    assert sorted(p.name for p in shared.iterdir()) == [
        "backup.json",
        f"epoch-{backup['epochs_done']:04d}.weights.h5",
    ]
    assert not (first.workdir / "model").exists()  # an interrupted run keeps no model

    second = run_local_training(loaded, "train", options)
    assert second.succeeded, (second.failure, [p.read_text()[-3000:] for p in second.log_files])
    for log in (p.read_text() for p in second.log_files):
        match = RESUMED.search(log)
        assert match, log[-2000:]
        assert int(match[2]) == backup["epochs_done"] and int(match[3]) == 3
        assert "epoch=0 " not in log.split(match[0], 1)[1]  # it did not start over
    # one model, the chief's, where TensorFlow Serving looks for it; the other host saved none
    assert (second.model_dir / "1" / "saved_model.pb").exists()
    assert not (second.hosts[1].model / "1").exists()
    assert second.series.last("val_accuracy") is not None and second.series.last("val_accuracy") > 0.8
    # one model: both workers report the same reduced metrics at the end
    finals = [re.findall(r"val_accuracy=([0-9.]+)", p.read_text())[-1] for p in second.log_files]
    assert finals[0] == finals[1]
