"""Real processes: `sagestack local train` under the drivers contract (`launcher: drivers`).

Each simulated host runs AWS's own sm_train.sh and drivers (the pinned sagemaker-train's, packed by
core/drivers.py) in its sandbox (local/drivers/sandbox.py); training_src/train.py runs unchanged. One
two-host torchrun run of the example's drivers job is checked many ways and is also the uninterrupted run a spot resume must
equal; one host with the basic script driver; one host with the MPI driver's two ranks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from sagestack.local.drivers.sandbox import Network
from sagestack.local.errors import LocalRunError
from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import run_local_training
from tests.conftest import REPO, Project

pytestmark = pytest.mark.train

JOBS = """\
jobs:
  drivers-single:
    image: train-efa
    launcher: drivers
    source_dir: training_src
    entry_point: train.py
    instance_type: [ml.g5.2xlarge]
    use_spot_instances: true
    max_run: 2h
    max_wait: 4h
    checkpoint: {every_steps: 5, keep_last: 3}
    hyperparameters: {epochs: 2, log_every: 5}
    metric_definitions: {val_accuracy: 'val_accuracy=([0-9.]+)', train_loss: 'train_loss=([0-9.]+)'}

  drivers-mpi:
    image: train-efa
    launcher: drivers
    source_dir: training_src
    entry_point: train.py
    instance_type: [ml.g5.12xlarge]
    distribution: {mpi: {processes_per_host: 2}}
    hyperparameters: {epochs: 1, log_every: 5}
    metric_definitions: {val_accuracy: 'val_accuracy=([0-9.]+)'}

"""


@pytest.fixture(scope="module")
def sandbox() -> None:
    """The runs need the sandbox's namespaces (as root, or unprivileged user namespaces)."""
    reason = Network.unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The example project (its drivers job classifier-ngc among the rest) with the real training_src
    and two more drivers-contract jobs."""
    project = Project(tmp_path_factory.mktemp("drivers") / "digits")
    shutil.rmtree(project.root / "config")
    shutil.rmtree(project.root / "training_src")
    shutil.copytree(REPO / "config", project.root / "config")
    shutil.copytree(REPO / "containers", project.root / "containers")
    shutil.copytree(
        REPO / "training_src", project.root / "training_src", ignore=shutil.ignore_patterns("__pycache__")
    )
    spec = project.root / "config" / "sagestack.yaml"
    spec.write_text(spec.read_text().replace("jobs:\n", JOBS, 1))
    return project


def train(project: Project, job: str, workdir: Path, **options: object):  # type: ignore[no-untyped-def]
    loaded = project.load("dev")
    return run_local_training(loaded, job, LocalTrainOptions(workdir=workdir, tracking=False, **options))  # type: ignore[arg-type]


PF_EXITING = 0x4  # /proc/PID/stat's flags: killed, its exit under way (the kernel finishes it)


def sandboxed_processes(workdir: Path) -> list[tuple[int, str]]:
    """Processes still alive in a host's mount namespace of this run (their mounts name its folder)."""
    mark = f"{workdir.parent.name}/{workdir.name}/"
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or mark not in (proc / "mountinfo").read_text():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and not int(fields[6]) & PF_EXITING:
            left.append((int(proc.name), (proc / "cmdline").read_bytes().decode(errors="replace")))
    return left


def weights(result) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    return torch.load(result.model_dir / "state_dict.bin", weights_only=True)


@pytest.fixture(scope="module")
def two_hosts(sandbox: None, project: Project, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The example's own drivers job (classifier-ngc, on its NGC image) on two hosts, AWS's torchrun
    driver: one run, checked many ways."""
    run_dir = tmp_path_factory.mktemp("two") / "run"
    return train(project, "classifier-ngc", run_dir, hosts=2, overrides={"epochs": 1, "log_every": 5})


@pytest.fixture(scope="module")
def straight(sandbox: None, project: Project, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One host, AWS's basic script driver: the run a resumed run must equal."""
    return train(project, "drivers-single", tmp_path_factory.mktemp("straight") / "run")


def test_two_hosts_run_aws_torchrun_driver_and_train_one_model(two_hosts):  # type: ignore[no-untyped-def]
    run = two_hosts
    assert run.succeeded, (run.failure, run.log_files[0].read_text()[-3000:])
    logs = [p.read_text() for p in run.log_files]
    assert [p.stem for p in run.log_files] == ["algo-1", "algo-2"]
    # AWS's sm_train.sh chose the torchrun driver, which built the two-node command itself
    for rank, log in enumerate(logs):
        assert "Running Torchrun Driver" in log
        assert f"--master_addr=algo-1 --master_port=7777 --node_rank={rank} train.py" in log
    assert "world_size=2" in logs[0]
    # environment.py made the SM_* variables from the host's files; the platform gave none
    assert "SM_HOSTS=['algo-1', 'algo-2']" in logs[0] and "SM_CURRENT_HOST=algo-2" in logs[1]
    spec = json.loads((run.workdir / "sandbox" / "algo-1" / "spec.json").read_text())
    assert not [k for k in spec["environment"] if k.startswith("SM_")]
    request = json.loads((run.workdir / "request.json").read_text())
    assert spec["environment"]["TRAINING_JOB_NAME"] == request["TrainingJobName"]
    # the result as for the toolkit contract: algo-1's model, the defined metrics, success files
    scripted = torch.jit.load(str(run.model_dir / "model.pt"))
    assert scripted(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    assert run.last("val_accuracy") is not None
    assert all((h.output / "success").exists() for h in run.hosts)
    assert (run.workdir / "metrics.json").exists()
    # the hosts' files: code and sm_drivers channels, inputdataconfig.json naming both
    host = run.hosts[0]
    assert (host.data / "code" / "train.py").exists() and (host.data / "sm_drivers" / "sm_train.sh").exists()
    assert set(json.loads((host.config / "inputdataconfig.json").read_text())) == {"code", "sm_drivers"}


def test_one_host_runs_the_basic_script_driver(straight):  # type: ignore[no-untyped-def]
    log = straight.log_files[0].read_text()
    assert straight.succeeded, (straight.failure, log[-3000:])
    assert (
        "Running Basic Script driver" in log
        and "train.py --checkpoint_every_steps 5 --checkpoint_keep_last 3 --epochs 2 --log_every 5" in log
    )
    assert (straight.model_dir / "state_dict.bin").exists()
    assert straight.last("val_accuracy") is not None


def test_spot_resume_under_drivers_equals_the_uninterrupted_run(project, straight, tmp_path):  # type: ignore[no-untyped-def]
    """The interrupted-run test of test_local_train.py under the drivers contract: killed as a spot
    reclaim kills, resumed from the shared checkpoint folder, bitwise equal to the straight run."""
    assert straight.succeeded, straight.failure
    workdir = tmp_path / "spot"
    killed = train(project, "drivers-single", workdir, interrupt_at=15)
    assert killed.interrupted_at is not None and not killed.succeeded
    assert sandboxed_processes(workdir) == []  # the kill reached every process in the sandbox
    assert not (workdir / "model" / "state_dict.bin").exists()
    saved = sorted(int(p.stem.split("-")[1]) for p in (workdir / "checkpoints").glob("checkpoint-*.pt"))
    assert saved and 10 <= saved[-1] < 44, saved  # progress was saved, and the run did not finish
    resumed = train(project, "drivers-single", workdir)
    assert resumed.succeeded, resumed.failure
    assert "resumed from checkpoint at step" in resumed.log_files[0].read_text()
    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_mpi_on_one_host_runs_two_ranks(sandbox, project, tmp_path):  # type: ignore[no-untyped-def]
    result = train(project, "drivers-mpi", tmp_path / "run")
    log = result.log_files[0].read_text()
    assert result.succeeded, (result.failure, log[-3000:])
    # the MPI driver's own command, read by the local mpirun: two ranks, tagged as Open MPI tags them
    assert "Running MPI Driver" in log and "mpirun --host algo-1:2 -np 2" in log
    assert "[1,0]<stdout>:training: world_size=2" in log
    assert "[1,1]<" in log  # the second rank ran (it prints warnings only: rank 0 logs)
    assert result.metrics and "step" in result.metrics[-1]  # `metrics:` lines read through the tag
    # the stand-in sshd the MPI driver started (and never stops) ended with the run
    assert sandboxed_processes(result.workdir) == []
    assert (result.model_dir / "state_dict.bin").exists()
    assert result.last("val_accuracy") is not None


def test_mpi_on_two_hosts_is_refused_with_the_reason(project, tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(LocalRunError, match="over ssh between the hosts"):
        train(project, "drivers-mpi", tmp_path / "run", hosts=2)


def test_a_machine_without_unshare_gets_a_clear_error(project, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(
        LocalRunError, match=r"`unshare` is not on PATH.*install util-linux.*launcher: toolkit"
    ):
        train(project, "drivers-single", tmp_path / "run")


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"note": "it's"}, "SM_HP_NOTE='…' holds a ' (it ends the shell's quoted string"),
        ({"note": "x'; touch pwned; echo '"}, "SM_HP_NOTE='…' holds a '"),
        ({"model.lr": 0.1}, "its key becomes SM_HP_MODEL.LR, a name bash refuses"),
    ],
)
def test_a_set_value_the_drivers_cannot_pass_is_refused_before_the_run(project, tmp_path, overrides, problem):  # type: ignore[no-untyped-def]
    """--set reaches the request past the spec's rules (drivers-shell-values): the same check, before
    any host starts."""
    with pytest.raises(LocalRunError, match=re.escape(problem)):
        train(project, "drivers-single", tmp_path / "run", overrides=overrides)
    assert not (tmp_path / "run" / "hosts").exists()  # no host laid out, none started
