"""What the PyTorch container runs on a host, and how this machine runs the same world, word for word
for every runner and entry type (tests/conformance holds these against AWS's toolkit; here they are
pinned in the fast tier, where `make mutate` runs the launcher's mutants)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sagestack.core.contract import Devices, HostLayout, resource_config, training_environment
from sagestack.local.training.launch import Launch, entry_type, plan_launch

HOSTS = ("algo-1", "algo-2")


def _plan(
    tmp_path: Path, hps: dict[str, str], *, host: str = "algo-1", devices: Devices | None = None
) -> Launch:
    layout = HostLayout(host, tmp_path / host)
    layout.code.mkdir(parents=True, exist_ok=True)
    env = training_environment(
        layout,
        hyperparameters={"sagemaker_program": '"train.py"', "epochs": "3", **hps},
        resources=resource_config(host, list(HOSTS), "ml.g5.12xlarge", "eth0"),
        data_config={},
        devices=devices or Devices(gpus=2),
        job_name="j",
    )
    return plan_launch(env, layout.code)


def _launch(**kw: object) -> Launch:
    fields: dict[str, object] = {
        "runner": "mpi",
        "reason": "r",
        "hosts": HOSTS,
        "host_index": 0,
        "processes_per_host": 2,
        "entry_point": "train.py",
        "args": ("--epochs", "3"),
        "is_master": True,
    }
    return Launch(**{**fields, **kw})  # type: ignore[arg-type]


def test_the_plain_runner_says_why_and_runs_one_process(tmp_path):
    launch = _plan(tmp_path, {})
    assert (launch.runner, launch.reason, launch.entry_type) == (
        "process",
        "no distribution hyperparameter",
        "program",
    )
    assert launch.describe() == "process (no distribution hyperparameter; one process, its own world)"
    assert launch.world_size == 1
    assert launch.local_commands(master_port=1) == [([sys.executable, "--", "train.py", "--epochs", "3"], {})]


def test_mpi_and_smddp_run_mpirun_on_the_master_with_the_options_the_spec_gave(tmp_path):
    mpi = _plan(
        tmp_path,
        {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_custom_mpi_options": '"-verbose --NCCL_DEBUG WARN"'},
    )
    assert (mpi.runner, mpi.reason, mpi.processes_per_host) == ("mpi", "sagemaker_mpi_enabled=true", 2)
    assert mpi.describe() == "mpi (sagemaker_mpi_enabled=true; world size 4)"
    assert mpi.mpi_options == "-verbose --NCCL_DEBUG WARN"
    assert mpi.mpi_exports() == {"NCCL_MIN_NRINGS": "4", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}
    assert mpi.container_command() == [
        "mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4", "python", "-m", "mpi4py", "train.py", "--epochs", "3",
    ]  # fmt: skip
    smddp = _plan(
        tmp_path,
        {
            "sagemaker_distributed_dataparallel_enabled": "true",
            "sagemaker_distributed_dataparallel_custom_mpi_options": '"-x A=1"',
        },
    )
    assert (smddp.runner, smddp.mpi_options) == ("smddp", "-x A=1")
    assert smddp.container_command("py")[5:9] == ["smddprun", "py", "-m", "mpi4py"]
    # one process per host lists the hosts bare
    assert _launch(processes_per_host=1).container_command()[:5] == [
        "mpirun",
        "--host",
        "algo-1,algo-2",
        "-np",
        "2",
    ]


def test_nccl_debug_comes_from_the_options_else_info():
    assert _launch().mpi_exports() == {
        "NCCL_MIN_NRINGS": "4",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DEBUG": "INFO",
    }
    assert _launch(mpi_options="--NCCL_DEBUG TRACE -x B").mpi_exports()["NCCL_DEBUG"] == "TRACE"
    assert _launch(mpi_options="-x B --NCCL_DEBUG").mpi_exports()["NCCL_DEBUG"] == "INFO"  # no value after it


def test_this_machine_starts_each_mpi_rank_of_its_host_itself():
    worker = _launch(host_index=1, is_master=False, processes_per_host=3, mpi_options="--NCCL_DEBUG WARN")
    assert worker.container_command() == []  # mpirun on the master starts these ranks over SSH
    commands = worker.local_commands(master_port=1)
    assert [command for command, _ in commands] == [[sys.executable, "train.py", "--epochs", "3"]] * 3
    assert [extra for _, extra in commands][2] == {
        "NCCL_MIN_NRINGS": "4",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_DEBUG": "WARN",
        "OMPI_COMM_WORLD_RANK": "5",
        "OMPI_COMM_WORLD_SIZE": "6",
        "OMPI_COMM_WORLD_LOCAL_RANK": "2",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "3",
        "OMPI_COMM_WORLD_NODE_RANK": "1",
    }


def test_torchrun_here_is_torch_distributed_run_on_loopback():
    launch = _launch(runner="torchrun", host_index=1, processes_per_host=4)
    assert launch.local_commands(master_port=29511) == [
        (
            [
                sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "4",
                "--master_addr", "127.0.0.1", "--master_port", "29511", "--node_rank", "1",
                "train.py", "--epochs", "3",
            ],
            {},
        )
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "setup_py", "kind", "command"),
    [
        ("train.py", False, "program", ["py", "--", "train.py", "--epochs", "3"]),
        ("train.py", True, "package", ["py", "-m", "train", "--epochs", "3"]),
        ("trainer", True, "package", ["py", "-m", "trainer", "--epochs", "3"]),
        ("run.sh", False, "command", ["/bin/sh", "-c", "./run.sh --epochs 3"]),
        ("my run.sh", False, "command", ["/bin/sh", "-c", "./'my run.sh' --epochs 3"]),
    ],
)
def test_entry_points_run_as_the_toolkit_runs_each_type(tmp_path, entry, setup_py, kind, command):
    """sagemaker_training/_entry_point_type.py: a setup.py makes a package, *.py a program, else a
    command; process.py runs them as `python -m module`, `python -- script`, `/bin/sh -c ./cmd`."""
    if setup_py:
        (tmp_path / "setup.py").write_text("")
    assert entry_type(tmp_path, entry) == kind
    launch = _launch(runner="process", entry_point=entry, entry_type=kind)
    assert launch.container_command("py") == command
    here = command if kind == "command" else [sys.executable, *command[1:]]
    assert launch.local_commands(master_port=1) == [(here, {})]
