"""AWS's training toolkit is the judge of `sagestack local train`.

For each layout, the job is trained with `sagestack local train`, then `sagemaker-training` 5.x with
the PyTorch container's entry point (sagemaker-pytorch-training 3.0.0) is run on a copy of the same
host layout (tests/support/toolkit.py). Both runs execute the same entry point, a probe that records
its arguments and environment and then runs training_src/train.py. Compared per host: the launched
command, every SM_* variable and the others the toolkit exports, the arguments, the world size,
steps and global batch, the final metric and weights, the files in model/ and output/.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.train import LocalTrainResult, run_local_training
from tests.conformance.probed import compared_env, files, probes
from tests.conftest import REPO, Project
from tests.support import toolkit

pytestmark = [pytest.mark.conformance, pytest.mark.train]

if (why := toolkit.available()) is not None:
    pytest.skip(why, allow_module_level=True)

THREADS = 1
HYPERPARAMETERS = "{epochs: 1, max_steps: 8, log_every: 4, batch_size_per_device: 32}"
# Variables outside SM_* that the toolkit, the container or torchrun/mpirun give the script.
EXPORTED = (
    "CURRENT_HOST",
    "SAGEMAKER_JOB_NAME",
    "SAGEMAKER_REGION",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
    "NCCL_DEBUG",
    "NCCL_PROTO",
    "NCCL_MIN_NRINGS",
    "SM_DLC_TORCH_VERSION",
    "TRAINING_JOB_NAME",
    "SAGESTACK_CHECKPOINT_DIR",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)
# Documented differences (sagestack.core.contract.LOCAL_SUBSTITUTIONS): loopback and free ports.
SUBSTITUTED = ("MASTER_ADDR", "MASTER_PORT")
TRAINING_LINE = re.compile(r"training: world_size=(\d+) .*global_batch=(\d+) .*total_steps=(\d+)")
VAL_LINE = re.compile(r"val_accuracy=([0-9.]+)")


@dataclass(frozen=True)
class Layout:
    hosts: int
    procs: int
    job: str  # extra YAML for the job
    instance_type: str = "ml.g5.12xlarge"


LAYOUTS = {
    "1x1-torch_distributed": Layout(1, 1, "distribution: {torch_distributed: {}}"),
    # SMP v2's mp_parameters reach the script as an argument (dicts as k=v,...); a one-letter key is -z
    "1x2-smp-one-letter-key": Layout(
        1,
        2,
        "distribution: {smp: {parameters: {hybrid_shard_degree: 2, sm_activation_offloading: false}}}\n"
        "hyperparameters: {epochs: 1, max_steps: 8, log_every: 4, batch_size_per_device: 32, z: 3}",
        instance_type="ml.p4d.24xlarge",  # where SMP v2 runs
    ),
    "1x2-torch_distributed": Layout(1, 2, "distribution: {torch_distributed: {}}"),
    "2x1-torch_distributed": Layout(2, 1, "distribution: {torch_distributed: {}}"),
    "2x1-no-distribution": Layout(2, 1, ""),
    "1x2-mpi": Layout(1, 2, "distribution: {mpi: {processes_per_host: 2}}"),
    "2x1-sharded-channel": Layout(
        2,
        1,
        "distribution: {torch_distributed: {}}\n"
        "channels:\n"
        "  train: {local_path: data/train, distribution: ShardedByS3Key, content_type: application/x-npz}",
    ),
    "1x1-custom-checkpoint-path": Layout(
        1,
        1,
        "checkpoint: {every_steps: 4, keep_last: 2, local_path: /opt/ml/ckpt-custom}",
    ),
}


def conformance_project(root: Path, layout: Layout) -> Project:
    project = Project(root)
    shutil.rmtree(project.root / "training_src")
    shutil.copytree(
        REPO / "training_src", project.root / "training_src", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copyfile(Path(__file__).with_name("probe.py"), project.root / "training_src" / "probe.py")
    if "data/train" in layout.job:
        from sklearn.datasets import load_digits

        digits = load_digits()
        x = digits.images.reshape(-1, 1, 8, 8).astype(np.float32) / 16.0
        folder = project.root / "data" / "train"
        folder.mkdir(parents=True)
        for i, (xs, ys) in enumerate(
            zip(np.array_split(x, 4), np.array_split(digits.target, 4), strict=True)
        ):
            np.savez(folder / f"part-{i}.npz", x=xs, y=ys)
    job = textwrap.indent(layout.job, "    ")
    project.spec(
        textwrap.dedent(
            f"""\
            project: conformance
            region: us-east-1
            images:
              train: {{dlc: {{framework: pytorch, version: "2.5", py_version: py311}}}}
            jobs:
              job:
                image: train
                entry_point: probe.py
                instance_type: {layout.instance_type}
                instance_count: {layout.hosts}
            """
        )
        + job
        + ("" if "hyperparameters:" in job else f"\n    hyperparameters: {HYPERPARAMETERS}")
        + "\n"
    )
    return project


@dataclass
class Compared:
    local: LocalTrainResult
    toolkit: list[toolkit.ToolkitHost]
    request: dict


def _run(layout_name: str, tmp_path: Path) -> Compared:
    layout = LAYOUTS[layout_name]
    project = conformance_project(tmp_path / "project", layout)
    local = run_local_training(
        project.load(),
        "job",
        LocalTrainOptions(
            hosts=layout.hosts, procs=layout.procs, workdir=tmp_path / "local", threads=THREADS
        ),
    )
    assert local.succeeded, (local.failure, [p.read_text()[-3000:] for p in local.log_files])
    hosts = toolkit.run_toolkit(local.workdir, tmp_path / "toolkit", threads=THREADS)
    for host in hosts:
        assert host.returncode == 0, host.log[-5000:]
    request = json.loads((local.workdir / "request.json").read_text())
    return Compared(local, hosts, request)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Compared]:
    return {}


@pytest.fixture(params=list(LAYOUTS))
def compared(request: pytest.FixtureRequest, runs: dict[str, Compared], tmp_path_factory) -> Compared:
    name = request.param
    if name not in runs:
        runs[name] = _run(name, tmp_path_factory.mktemp(name))
    return runs[name]


def _training_facts(log: str) -> tuple[tuple[str, ...], str]:
    match = TRAINING_LINE.search(log)
    assert match, log[-3000:]
    return match.groups(), VAL_LINE.findall(log)[-1]


def test_the_same_runner_and_command_on_every_host(compared: Compared) -> None:
    for launch, host in zip(compared.local.launches, compared.toolkit, strict=True):
        theirs = host.command()
        if launch.runner == "mpi":
            if not launch.is_master:
                assert theirs == []
                continue
            ours = launch.container_command(python=theirs[theirs.index("-m") - 1])
            # the toolkit adds Open MPI tuning flags between the host list and the program
            assert theirs[:5] == ours[:5]
            assert theirs[theirs.index("-m") - 1 :] == ours[ours.index("-m") - 1 :]
            recorded = json.loads((host.base.parent.parent / f"mpirun-{host.name}.json").read_text())
            assert recorded == theirs[1:]
        else:
            assert theirs == launch.container_command(python=theirs[0]), host.log[-3000:]


def test_the_script_sees_the_same_environment_and_arguments(compared: Compared) -> None:
    tarball = compared.toolkit[0].base.parent.parent / "sourcedir.tar.gz"
    for layout, host in zip(compared.local.hosts, compared.toolkit, strict=True):
        ours, theirs = probes(layout.base), probes(host.base)
        assert ours.keys() == theirs.keys() and ours, (ours.keys(), theirs.keys())
        for rank in ours:
            mine = compared_env(ours[rank], layout.base, compared.request, None, EXPORTED)
            judge = compared_env(theirs[rank], host.base, compared.request, tarball, EXPORTED)
            assert mine.keys() == judge.keys(), sorted(set(mine) ^ set(judge))
            differing = {k: (mine[k], judge[k]) for k in mine if mine[k] != judge[k]}
            assert not differing, differing
            # the 37 properties of the toolkit's Environment
            assert len(json.loads(judge["SM_TRAINING_ENV"])) >= 37
            for name in SUBSTITUTED:
                assert (name in ours[rank]["env"]) == (name in theirs[rank]["env"])


def test_the_same_training_world_result_andfiles(compared: Compared) -> None:
    local_logs = "\n".join(p.read_text() for p in compared.local.log_files)
    facts, accuracy = _training_facts(local_logs)
    their_facts, their_accuracy = _training_facts("\n".join(h.log for h in compared.toolkit))
    assert facts == their_facts
    assert accuracy == their_accuracy
    for layout, host in zip(compared.local.hosts, compared.toolkit, strict=True):
        assert files(layout.model) == files(host.base / "model"), layout.name
        assert files(layout.output) == files(host.base / "output"), layout.name
        assert (host.base / "output" / "success").exists() and layout.success.exists()
        if (layout.model / "state_dict.bin").exists():
            a = torch.load(layout.model / "state_dict.bin", weights_only=True)
            b = torch.load(host.base / "model" / "state_dict.bin", weights_only=True)
            assert all(torch.equal(a[k], b[k]) for k in a), layout.name


def test_mp_parameters_and_one_letter_keys_are_arguments(runs, tmp_path_factory) -> None:
    name = "1x2-smp-one-letter-key"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    argv = probes(run.toolkit[0].base)["probe-0"]["argv"]
    assert argv[argv.index("--mp_parameters") + 1] == "hybrid_shard_degree=2,sm_activation_offloading=False"
    assert argv[argv.index("-z") + 1] == "3"
    assert probes(run.local.hosts[0].base)["probe-0"]["argv"] == argv


def test_no_distribution_trains_independently_on_each_host(runs, tmp_path_factory) -> None:
    name = "2x1-no-distribution"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    assert run.local.launches[0].runner == "process"
    for host in [*run.toolkit]:
        assert "world_size=1" in host.log
    for layout in run.local.hosts:
        assert (layout.model / "model.pt").exists(), "each host trains and saves its own model"


def test_a_sharded_channel_gives_each_host_its_share(runs, tmp_path_factory) -> None:
    name = "2x1-sharded-channel"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    shares = [sorted(p.name for p in (h.data / "train").iterdir()) for h in run.local.hosts]
    assert shares == [["part-0.npz", "part-2.npz"], ["part-1.npz", "part-3.npz"]]
    for host in run.toolkit:
        config = json.loads((host.base / "input" / "config" / "inputdataconfig.json").read_text())
        assert config["train"] == {
            "TrainingInputMode": "File",
            "S3DistributionType": "ShardedByS3Key",
            "RecordWrapperType": "None",
            "ContentType": "application/x-npz",
        }


def test_a_custom_checkpoint_path_is_where_the_script_writes(runs, tmp_path_factory) -> None:
    name = "1x1-custom-checkpoint-path"
    run = runs.get(name) or runs.setdefault(name, _run(name, tmp_path_factory.mktemp(name)))
    assert run.request["CheckpointConfig"]["LocalPath"] == "/opt/ml/ckpt-custom"
    local = sorted(p.name for p in (run.local.workdir / "checkpoints").glob("checkpoint-*.pt"))
    # under the toolkit, /opt/ml/ckpt-custom is the folder SageMaker would sync to S3
    synced = sorted(
        p.name for p in (run.toolkit[0].base.parent.parent / "checkpoints").glob("checkpoint-*.pt")
    )
    assert local and local == synced
