"""Real torch, real processes: `sagestack local train` on the example project.

Multi-process DDP over gloo on loopback; interruption the way a spot reclaim does it (every process
killed) and a resume that ends bitwise-equal to an uninterrupted run; bad input that fails clearly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from sagestack.local.errors import LocalRunError
from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import run_local_training

pytestmark = pytest.mark.train


# The example's torch_distributed job: the container starts torchrun, so --procs processes per host.
DDP = "classifier-spot"


def train(project, workdir: Path, *, job="classifier", hosts=1, procs=1, interrupt_at=None, **hps):
    loaded = project.load("dev")
    options = LocalTrainOptions(
        hosts=hosts, procs=procs, interrupt_at=interrupt_at, workdir=workdir, overrides=hps, tracking=False
    )
    return run_local_training(loaded, job, options)


def weights(result) -> dict[str, torch.Tensor]:
    return torch.load(result.model_dir / "state_dict.bin", weights_only=True)


def test_two_process_ddp_on_digits_reaches_90_percent(digits_project, tmp_path):
    result = train(digits_project, tmp_path / "w", job=DDP, hosts=2, procs=1, epochs=6)
    assert result.succeeded, (result.failure, result.log_files[0].read_text()[-2000:])
    assert result.last("val_accuracy") >= 0.9
    first = next(m for m in result.metrics if "train_loss" in m)
    assert first["total_steps"] == 6 * (1438 // 128)  # 1438 training samples, 2 processes x 64 per step
    assert (result.model_dir / "model.pt").exists() and (result.model_dir / "model_info.json").exists()
    scripted = torch.jit.load(str(result.model_dir / "model.pt"))
    assert scripted(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    # the world really had two ranks: the container's torchrun on each host
    assert result.launch is not None and result.launch.runner == "torchrun"
    assert "world_size=2" in result.log_files[0].read_text()


def test_interrupted_then_resumed_run_equals_an_uninterrupted_one(digits_project, tmp_path):
    # 110 steps: the kill (sent when the log reaches step 25, so a few steps later) lands mid-run.
    hps = {"epochs": 10, "checkpoint_every_steps": 10, "log_every": 5}
    straight = train(digits_project, tmp_path / "straight", job=DDP, procs=2, **hps)
    assert straight.succeeded, straight.failure

    workdir = tmp_path / "spot"
    killed = train(digits_project, workdir, job=DDP, procs=2, interrupt_at=25, **hps)
    assert killed.interrupted_at is not None and killed.interrupted_at >= 25
    assert not killed.succeeded and not (workdir / "model" / "state_dict.bin").exists()
    saved = sorted(int(p.stem.split("-")[1]) for p in (workdir / "checkpoints").glob("checkpoint-*.pt"))
    assert saved and 20 <= saved[-1] < 110  # progress was saved, and the run did not finish

    resumed = train(digits_project, workdir, job=DDP, procs=2, **hps)
    assert resumed.succeeded, resumed.failure
    log = resumed.log_files[0].read_text()
    assert "resumed from checkpoint at step" in log and "world_size=2" in log
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_truncated_newest_checkpoint_and_partial_writes_are_dealt_with_on_resume(digits_project, tmp_path):
    """A kill mid-write leaves a partial temp file (in the synced folder, as older runs wrote them,
    or beside it): the resumed run removes them before it writes, and still resumes bitwise."""
    import socket
    import subprocess

    # the spot job: its CheckpointConfig is what SageMaker syncs (and the local run shares)
    hps = {"epochs": 6, "checkpoint_every_steps": 10, "log_every": 5}
    straight = train(digits_project, tmp_path / "straight", job=DDP, **hps)
    workdir = tmp_path / "spot"
    killed = train(digits_project, workdir, job=DDP, interrupt_at=30, **hps)
    assert killed.interrupted_at is not None
    newest = max((workdir / "checkpoints").glob("checkpoint-*.pt"))
    newest.write_bytes(newest.read_bytes()[:100])
    ended = subprocess.Popen(["true"])
    ended.wait()
    partials = [
        workdir / "checkpoints" / ".tmp-checkpoint-q8w7e6.pt",
        workdir / ".checkpoints.partial" / f".tmp-checkpoint-{socket.gethostname()}-{ended.pid}-r5t4.pt",
    ]
    for partial in partials:
        partial.parent.mkdir(exist_ok=True)
        partial.write_bytes(newest.read_bytes()[:60])
    resumed = train(digits_project, workdir, job=DDP, **hps)
    assert resumed.succeeded, resumed.failure
    log = resumed.log_files[0].read_text()
    assert f"checkpoint {newest.name} is unreadable" in log and "resumed from checkpoint at step" in log
    # the two planted, and any the kill itself left mid-write (it may land during a save)
    removed = re.search(r"removed (\d+) partial checkpoint write\(s\) left by an earlier run", log)
    assert removed and int(removed.group(1)) >= 2, log[:500]
    assert not any(p.exists() for p in partials)
    assert not list(workdir.rglob(".tmp-checkpoint-*"))
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def _failure(result) -> str:
    assert result.exit_code != 0 and not result.succeeded
    return result.failure or ""


def test_wrong_hyperparameter_type_fails_clearly(digits_project, tmp_path):
    result = train(digits_project, tmp_path / "w", epochs="ten")
    assert "bad hyperparameter: argument --epochs: invalid int value: 'ten'" in _failure(result)


def test_world_size_the_data_cannot_be_split_over(digits_project, tmp_path):
    result = train(digits_project, tmp_path / "w", job=DDP, procs=2, batch_size_per_device=1000)
    assert "1438 training samples cannot be split over a world of 2 processes x batch 1000" in _failure(
        result
    )


def _with_channel(project, path: str) -> None:
    spec = project.root / "config/sagestack.yaml"
    text = spec.read_text().replace(
        "    entry_point: train.py\n",
        f"    entry_point: train.py\n    channels: {{train: {{local_path: {path}}}}}\n",
        1,
    )
    spec.write_text(text)


def test_missing_channel_fails_clearly(digits_project, tmp_path):
    _with_channel(digits_project, "data/none")
    # found while laying out the hosts, before any process starts (SageMaker would fail the
    # download of a missing S3 prefix the same way: before the script)
    with pytest.raises(LocalRunError, match=r"channel 'train': local_path .*data/none is not a folder"):
        train(digits_project, tmp_path / "w")


def test_unreadable_data_file_fails_clearly_and_keeps_checkpoints(digits_project, tmp_path):
    (digits_project.root / "data/bad").mkdir(parents=True)
    (digits_project.root / "data/bad/part-0.npz").write_bytes(b"not an npz file")
    _with_channel(digits_project, "data/bad")
    workdir = tmp_path / "w"
    (workdir / "checkpoints").mkdir(parents=True)
    (workdir / "checkpoints" / "checkpoint-000000010.pt").write_bytes(b"kept")
    result = train(digits_project, workdir)
    assert "part-0.npz: cannot read it as npz" in _failure(result)
    assert (workdir / "checkpoints" / "checkpoint-000000010.pt").read_bytes() == b"kept"


def test_training_channel_with_npz_data(digits_project, tmp_path):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    (digits_project.root / "data/train").mkdir(parents=True)
    np.savez(digits_project.root / "data/train/digits.npz", x=(x / 16.0).astype(np.float32), y=y)
    _with_channel(digits_project, "data/train")
    result = train(digits_project, tmp_path / "w", epochs=3)
    assert result.succeeded, result.failure
    assert (
        "data=" in result.log_files[0].read_text()
        and "digits (bundled)" not in result.log_files[0].read_text()
    )
    assert result.last("val_accuracy") > 0.8


def test_fsdp_with_bf16_autocast_trains_and_resumes(digits_project, tmp_path):
    hps = {"epochs": 4, "fsdp": True, "precision": "bf16", "checkpoint_every_steps": 10, "log_every": 5}
    workdir = tmp_path / "fsdp"
    killed = train(digits_project, workdir, job=DDP, procs=2, interrupt_at=15, **hps)
    assert killed.interrupted_at is not None
    resumed = train(digits_project, workdir, job=DDP, procs=2, **hps)
    assert resumed.succeeded, (resumed.failure, resumed.log_files[0].read_text()[-4000:])
    assert "resumed from checkpoint at step" in resumed.log_files[0].read_text()
    assert resumed.last("val_accuracy") > 0.8
    # the saved state dict is the plain (unsharded, unwrapped) model's
    assert all(not k.startswith(("module.", "_fsdp")) for k in weights(resumed))


def test_gradient_accumulation_matches_the_larger_batch(digits_project, tmp_path):
    """2 micro-batches of 32 make the same optimizer step as one batch of 64 (same samples, same
    global batch, so the same learning rate), up to float summation order."""
    common = {"max_steps": 3, "epochs": 1, "log_every": 1}
    big = train(digits_project, tmp_path / "big", batch_size_per_device=64, **common)
    accumulated = train(
        digits_project, tmp_path / "acc", batch_size_per_device=32, grad_accum_steps=2, **common
    )
    assert big.succeeded and accumulated.succeeded, (big.failure, accumulated.failure)
    a, b = weights(big), weights(accumulated)
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    moved = weights(train(digits_project, tmp_path / "small", batch_size_per_device=32, **common))
    assert not all(torch.allclose(a[k], moved[k], atol=1e-5) for k in a)  # the check can fail


def test_tensorboard_and_profiler_write_their_files(digits_project, tmp_path):
    result = train(digits_project, tmp_path / "w", epochs=1, profile=True, log_every=2)
    assert result.succeeded, result.failure
    board = result.workdir / "hosts" / "algo-1" / "output" / "tensorboard"
    assert list(board.glob("events.out.tfevents.*"))
    assert list((board / "profiler").glob("*.pt.trace.json*"))


def test_unmet_requirements_refuse_the_run_and_say_what_to_do(digits_project, tmp_path):
    (digits_project.root / "training_src/requirements.txt").write_text("surely-not-a-package-here==1.0\n")
    with pytest.raises(LocalRunError) as info:
        train(digits_project, tmp_path / "w", max_steps=2)
    message = str(info.value)
    assert message.startswith(
        "training_src/requirements.txt: the container installs these with pip before training, and this "
        "environment lacks them:\n  surely-not-a-package-here==1.0: not installed\n"
    )
    assert "--install-requirements" in message


def test_install_requirements_runs_pip_as_the_container_does(digits_project, tmp_path):
    # an option line cannot be checked without pip; --no-index keeps pip offline here
    (digits_project.root / "training_src/requirements.txt").write_text("--no-index\nscikit-learn\n")
    with pytest.raises(LocalRunError, match="--no-index: not checked"):
        train(digits_project, tmp_path / "w", max_steps=2)
    loaded = digits_project.load("dev")
    options = LocalTrainOptions(
        workdir=tmp_path / "w", install_requirements=True, overrides={"max_steps": 2}, tracking=False
    )
    result = run_local_training(loaded, "classifier", options)
    assert result.succeeded, result.failure
    assert result.requirements is not None and result.requirements.unchecked == ("--no-index",)


def test_mlflow_store_holds_the_run_and_a_resumed_run_continues_it(digits_project, tmp_path):
    """tracking.mlflow (the example has it): the local store gets a run named after the job, with its
    parameters, metrics per logged step and the model; an interrupted run resumed continues the same
    run instead of starting another, and the steps it replays from its checkpoint (20) up to where it
    was killed (35: 25 and 30 were logged before) are not logged twice."""
    import mlflow

    loaded = digits_project.load("dev")

    def run(interrupt_at=None):
        options = LocalTrainOptions(
            workdir=tmp_path / "w",
            interrupt_at=interrupt_at,
            overrides={"epochs": 2, "log_every": 5, "checkpoint_every_steps": 20},
        )
        return run_local_training(loaded, "classifier", options)

    first = run(interrupt_at=35)
    assert first.interrupted_at is not None
    resumed = run()
    assert resumed.succeeded, resumed.failure
    store = f"sqlite:///{digits_project.root}/.sagestack/local/dev/mlflow.db"
    assert resumed.tracking is not None and resumed.tracking.uri == store  # what `local train` prints
    client = mlflow.MlflowClient(store)
    experiment = client.get_experiment_by_name("digits-dev-classifier")
    assert experiment is not None
    assert (
        experiment.artifact_location.startswith("file://")
        and ".sagestack/local/dev" in experiment.artifact_location
    )
    (run_,) = client.search_runs([experiment.experiment_id])  # one run, resumed
    import json

    request = json.loads((tmp_path / "w" / "request.json").read_text())
    assert run_.info.run_name == request["TrainingJobName"]
    assert run_.info.status == "FINISHED"
    assert run_.data.params["epochs"] == "2" and run_.data.params["checkpoint_every_steps"] == "20"
    steps = [m.step for m in client.get_metric_history(run_.info.run_id, "train_loss")]
    assert steps == sorted(set(steps)) and steps[0] == 5 and steps[-1] == resumed.metrics[-1]["step"]
    assert {25, 30} <= set(steps) and any(s > 35 for s in steps)  # both halves in one run, 25 and 30 once
    accuracies = client.get_metric_history(run_.info.run_id, "val_accuracy")
    assert accuracies[-1].value == pytest.approx(resumed.last("val_accuracy"), abs=1e-6)
    assert sorted(a.path for a in client.list_artifacts(run_.info.run_id, "model")) == [
        "model/model.pt",
        "model/model_info.json",
    ]
