"""The Keras script `sagestack init --framework tensorflow` writes, run as the TensorFlow container
runs it (real TensorFlow CPU, in child processes): the SM_* folders and the checkpoint folder in a
tmp folder, the job's hyperparameters and the SDK's --model_dir as arguments, TF_CONFIG as the
container builds it for multi_worker_mirrored_strategy and parameter_server. It trains, its lines
feed the spec's metric_definitions, the SavedModel in model/1/ predicts, two workers train one
model, and a run killed after a backup resumes from it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sagestack.ops.init import init_project
from sagestack.project.loader import load_project
from tests.support.moto_server import free_port

pytestmark = pytest.mark.train
tf = pytest.importorskip("tensorflow")

TIMEOUT = 300
TRAINING = re.compile(r"^training: (.*)$", re.M)
RESUMED = re.compile(r"^resumed from backup at step (\d+) \(epoch (\d+) of (\d+)\): (.+)$", re.M)


@dataclass
class Host:
    """One simulated host's folders (the checkpoint folder may be shared, as S3 sync makes it)."""

    base: Path
    checkpoints: Path

    @property
    def model(self) -> Path:
        return self.base / "model"

    @property
    def output(self) -> Path:
        return self.base / "output" / "data"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "OMPI_COMM_WORLD_SIZE")}
        env.update(
            SAGEMAKER_BASE_DIR=str(self.base),
            SM_MODEL_DIR=str(self.model),
            SM_OUTPUT_DATA_DIR=str(self.output),
            SAGESTACK_CHECKPOINT_DIR=str(self.checkpoints),
            TF_CPP_MIN_LOG_LEVEL="2",
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("keras") / "kdemo"
    init_project(root, "kdemo", framework="tensorflow")
    return root


def _arguments(project: Path, **override: object) -> list[str]:
    """The job's hyperparameters as the container passes them, and the SDK's --model_dir."""
    hyperparameters = {**load_project(project, "dev").spec.jobs["train"].hyperparameters, **override}
    args = [token for k, v in hyperparameters.items() for token in (f"--{k}", str(v))]
    return [*args, "--model_dir", "s3://bucket/kdemo/output/train/model"]


def _start(project: Path, host: Host, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(project / "training_src" / "train.py"), *args],
        cwd=project / "training_src",
        env=host.env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the run did not end in {TIMEOUT}s:\n{out}")
    assert proc.returncode == 0, out
    return out


def _metrics(log: str) -> list[dict[str, float]]:
    return [
        {k: float(v) for k, _, v in (p.partition("=") for p in line.split()[1:])}
        for line in log.splitlines()
        if line.startswith("metrics: ")
    ]


@pytest.fixture(scope="module")
def single(project, tmp_path_factory) -> tuple[Host, str]:
    base = tmp_path_factory.mktemp("single")
    host = Host(base, base / "checkpoints")
    return host, _finish(_start(project, host, *_arguments(project), "--unknown_flag", "1"))


def test_one_process_trains_reports_through_metric_definitions_and_exports(project, single):
    host, log = single
    (training,) = TRAINING.findall(log)
    assert "strategy=local" in training and "chief=true" in training and "replicas=1" in training
    assert "global_batch=64 (per replica 64)" in training and "lr=0.01 (x1)" in training
    assert "warning: ignoring unknown arguments ['--unknown_flag', '1']" in log
    definitions = load_project(project, "dev").spec.jobs["train"].metric_definitions
    for name, regex in definitions.items():
        values = [float(m) for m in re.findall(regex, log)]
        assert len(values) >= 5, (name, log)  # at least one per epoch
    accuracy = [float(v) for v in re.findall(definitions["val_accuracy"], log)]
    assert 0.9 < accuracy[-1] <= 1.0, log
    progress = _metrics(log)
    assert progress[-1]["step"] == progress[-1]["total_steps"] > progress[0]["step"] > 0
    assert [p["epoch"] for p in progress if "val_loss" in p] == [0, 1, 2, 3, 4]
    assert (host.model / "1" / "saved_model.pb").is_file()
    assert round(json.loads((host.output / "metrics.json").read_text())["val_accuracy"], 4) == accuracy[-1]
    # trained to the end: no backup left to resume from, nothing half-written beside it
    assert not (host.checkpoints / "keras_backup").exists()
    assert not (host.base / ".checkpoints.partial").exists()


def test_the_saved_model_predicts_through_its_serving_signature(single):
    from sklearn.datasets import load_digits

    host, _ = single
    loaded = tf.saved_model.load(str(host.model / "1"))
    assert {"serving_default", "serve"} <= set(loaded.signatures)
    serving = loaded.signatures["serving_default"]
    (inputs,) = serving.structured_input_signature[1].items()
    assert (inputs[0], inputs[1].shape.as_list(), inputs[1].dtype) == ("features", [None, 64], tf.float32)
    assert list(serving.structured_outputs) == ["output_0"]
    x, y = load_digits(return_X_y=True)
    probabilities = serving(features=tf.constant(x[:200] / 16.0, tf.float32))["output_0"].numpy()
    assert probabilities.shape == (200, 10)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-4)
    assert (probabilities.argmax(axis=1) == y[:200]).mean() > 0.9


def _start_workers(project: Path, hosts: list[Host], *args: str) -> list[subprocess.Popen[str]]:
    """One process per host with the TF_CONFIG of the container's _build_tf_config_for_mwms
    (each algo-N:8890 a free loopback port here)."""
    ports = [free_port() for _ in hosts]
    procs = []
    for index, host in enumerate(hosts):
        tf_config = {
            "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
            "environment": "cloud",
            "task": {"index": index, "type": "worker"},
        }
        procs.append(_start(project, host, *args, TF_CONFIG=json.dumps(tf_config)))
    return procs


def _finish_all(procs: list[subprocess.Popen[str]]) -> list[str]:
    try:
        return [_finish(p) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_a_killed_run_resumes_from_its_last_backup(project, tmp_path):
    host = Host(tmp_path / "algo-1", tmp_path / "checkpoints")
    backup = host.checkpoints / "keras_backup" / "backup.json"
    args = _arguments(project, epochs=30)  # long enough to be killed part-way
    first = _start(project, host, *args)
    deadline = time.monotonic() + TIMEOUT
    while not backup.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    killed_log, _ = first.communicate()
    assert first.returncode == -signal.SIGKILL, killed_log
    done = json.loads(backup.read_text())["epochs_done"]
    assert 1 <= done < 30
    assert not (host.model / "1").exists()

    log = _finish(_start(project, host, *args))
    ((step, epoch, epochs, folder),) = RESUMED.findall(log)
    steps_per_epoch = int(_metrics(log)[-1]["total_steps"]) // 30
    assert (int(step), int(epoch), int(epochs)) == (done * steps_per_epoch, done, 30)
    assert Path(folder) == host.checkpoints / "keras_backup"
    progress = _metrics(log)
    assert progress[0]["epoch"] == done and progress[-1]["epoch"] == 29
    assert progress[-1]["step"] == progress[-1]["total_steps"]
    assert (host.model / "1" / "saved_model.pb").is_file()
    assert not (host.checkpoints / "keras_backup").exists()


def test_workers_that_find_different_backups_stop_with_the_reason(project, tmp_path):
    """Each host its own checkpoint folder (no S3 sync), the chief's holding a backup: they would
    train different epochs and wait on each other; both stop at once, saying why."""
    seed = Host(tmp_path / "seed", tmp_path / "algo-1" / "checkpoints")
    seed.checkpoints.joinpath("keras_backup").mkdir(parents=True)
    seed.checkpoints.joinpath("keras_backup", "backup.json").write_text(
        json.dumps({"epochs_done": 2, "weights": "epoch-0002.weights.h5"})
    )
    hosts = [Host(tmp_path / f"algo-{i + 1}", tmp_path / f"algo-{i + 1}" / "checkpoints") for i in range(2)]
    procs = _start_workers(project, hosts, *_arguments(project, epochs=3))
    outs = [p.communicate(timeout=TIMEOUT)[0] for p in procs]
    for proc, out, done in zip(procs, outs, (2, 0), strict=True):
        assert proc.returncode == 1, out
        assert (
            out.strip()
            .splitlines()[-1]
            .startswith(f"error: the workers found different backups (this one: {done} epochs done)")
        ), out


def test_parameter_server_trains_each_host_alone_and_mpi_without_horovod_exits(project, tmp_path):
    cluster = {  # the container's _build_tf_config_for_ps on two hosts, as seen by the second
        "cluster": {
            "master": ["algo-1:2222"],
            "ps": ["algo-1:2223", "algo-2:2223"],
            "worker": ["algo-2:2222"],
        },
        "environment": "cloud",
        "task": {"index": 0, "type": "worker"},
    }
    host = Host(tmp_path / "algo-2", tmp_path / "checkpoints")
    log = _finish(_start(project, host, *_arguments(project, epochs=1), TF_CONFIG=json.dumps(cluster)))
    assert "parameter_server: Keras 3's model.fit cannot train with ParameterServerStrategy" in log
    assert "strategy=parameter_server task=worker:0 chief=false" in TRAINING.findall(log)[0]
    assert not host.model.exists()  # the master's model is the job's

    if importlib.util.find_spec("horovod") is not None:
        return  # this machine has Horovod: the MPI run would train
    mpi = _start(project, host, *_arguments(project, epochs=1), OMPI_COMM_WORLD_SIZE="2")
    out, _ = mpi.communicate(timeout=TIMEOUT)
    assert mpi.returncode == 1, out
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith("error: this job runs under MPI (OMPI_COMM_WORLD_SIZE=2) but Horovod cannot be imported")
    ), out


def test_the_train_channel_is_read_when_the_job_has_one(project, tmp_path):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    channel = tmp_path / "input" / "data" / "train"
    channel.mkdir(parents=True)
    np.savez(channel / "part-0.npz", x=x[:600] / 16.0, y=y[:600])
    host = Host(tmp_path / "algo-1", tmp_path / "checkpoints")
    log = _finish(_start(project, host, *_arguments(project, epochs=1), SM_CHANNEL_TRAIN=str(channel)))
    assert "data=channel train (1 files)" in TRAINING.findall(log)[0]
    assert _metrics(log)[-1]["total_steps"] == 600 * 8 // 10 // 64  # 80% of the channel's samples

    empty = tmp_path / "empty"
    empty.mkdir()
    proc = _start(project, host, *_arguments(project, epochs=1), SM_CHANNEL_TRAIN=str(empty))
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, out
    assert (
        out.strip().splitlines()[-1]
        == f"error: the train channel ({empty}) holds no .npz file with arrays x and y"
    )
