"""The launcher starts torchrun exactly as the SageMaker PyTorch container does (FACTS.md):
--nnodes N --nproc_per_node P --master_addr algo-1 --master_port 7777 --node_rank i."""

from __future__ import annotations

import json

import pytest

from tests.training_src.conftest import load

launcher = load("launcher")


def env(hosts, current, **extra):
    return {"SM_HOSTS": json.dumps(hosts), "SM_CURRENT_HOST": current, **extra}


@pytest.mark.parametrize(
    ("hosts", "current", "extra", "expected"),
    [
        (["algo-1"], "algo-1", {"SM_NUM_GPUS": "8"}, ["1", "8", "algo-1", "7777", "0"]),
        (["algo-1", "algo-2"], "algo-2", {"SM_NUM_GPUS": "8"}, ["2", "8", "algo-1", "7777", "1"]),
        (
            ["algo-1", "algo-2", "algo-3", "algo-4"],
            "algo-3",
            {"SM_NUM_GPUS": "4"},
            ["4", "4", "algo-1", "7777", "2"],
        ),
        (
            ["algo-1", "algo-2"],
            "algo-1",
            {"SM_NUM_GPUS": "0", "SM_NUM_NEURONS": "32"},
            ["2", "32", "algo-1", "7777", "0"],
        ),
        (["algo-1"], "algo-1", {"SM_NUM_GPUS": "0", "SM_NUM_CPUS": "96"}, ["1", "1", "algo-1", "7777", "0"]),
        # SageMaker numbers hosts algo-1..N; the rank follows that order whatever order SM_HOSTS lists.
        (["algo-2", "algo-1"], "algo-1", {"SM_NUM_GPUS": "1"}, ["2", "1", "algo-1", "7777", "0"]),
    ],
)
def test_torchrun_arguments_match_the_container(hosts, current, extra, expected, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))  # no resourceconfig.json here
    topology = launcher.topology_from_env(env(hosts, current, **extra))
    args = launcher.torchrun_args(topology, "train.py", ["--epochs", "3"])
    flags = ["--nnodes", "--nproc_per_node", "--master_addr", "--master_port", "--node_rank"]
    assert args == [x for pair in zip(flags, expected, strict=True) for x in pair] + [
        "train.py",
        "--epochs",
        "3",
    ]


def test_emulator_overrides_processes_and_rendezvous(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    topology = launcher.topology_from_env(
        env(
            ["algo-1", "algo-2"],
            "algo-2",
            SM_NUM_GPUS="0",
            SAGESTACK_NPROC_PER_NODE="2",
            SAGESTACK_MASTER_ADDR="127.0.0.1",
            SAGESTACK_MASTER_PORT="29555",
        )
    )
    assert (topology.nproc_per_node, topology.master_addr, topology.master_port, topology.node_rank) == (
        2,
        "127.0.0.1",
        29555,
        1,
    )


def test_hosts_come_from_resourceconfig_without_sm_hosts(tmp_path, monkeypatch):
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(
        json.dumps({"hosts": ["algo-1", "algo-2"], "current_host": "algo-2"})
    )
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    topology = launcher.topology_from_env({"SM_NUM_GPUS": "4"})
    assert (topology.nnodes, topology.node_rank, topology.nproc_per_node) == (2, 1, 4)


def test_a_process_started_by_a_launcher_is_not_launched_again():
    assert launcher.already_launched({"RANK": "0", "WORLD_SIZE": "2"})
    assert not launcher.already_launched({"SM_HOSTS": "[]"})
