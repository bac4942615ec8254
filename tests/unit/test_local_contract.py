"""The local emulation's pieces that need no process: channel shares, container paths, the
container's runner choice and commands, the requirements check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagestack.core.contract import Devices, HostLayout, container_path, resource_config, training_environment
from sagestack.local.training.hosts import lay_out_channel
from sagestack.local.training.launch import LaunchError, plan_launch
from sagestack.local.training.requirements import check_requirements


def test_sharded_channel_gives_each_host_every_nth_object_in_key_order(tmp_path):
    source = tmp_path / "data"
    for name in ("b/part-1.npz", "a/part-0.npz", "c.npz", "a/part-2.npz", "d.csv"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(name)
    shares = []
    for host in range(2):
        dest = tmp_path / f"algo-{host + 1}" / "train"
        assert lay_out_channel(dest, source, "ShardedByS3Key", host, 2) in (2, 3)
        shares.append(sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()))
    # keys in order: a/part-0, a/part-2, b/part-1, c.npz, d.csv
    assert shares == [["a/part-0.npz", "b/part-1.npz", "d.csv"], ["a/part-2.npz", "c.npz"]]
    assert (tmp_path / "algo-2" / "train" / "c.npz").read_text() == "c.npz"
    full = tmp_path / "algo-3" / "train"
    assert lay_out_channel(full, source, "FullyReplicated", 1, 2) == 5


def test_container_paths_map_into_the_host_folder(tmp_path):
    assert container_path(tmp_path, "/opt/ml/checkpoints") == tmp_path / "checkpoints"
    assert container_path(tmp_path, "/opt/ml/ckpt/run-1") == tmp_path / "ckpt" / "run-1"
    assert container_path(tmp_path, "/opt/ml") == tmp_path
    assert container_path(tmp_path, "/tmp/spot") == tmp_path / "rootfs" / "tmp" / "spot"


def _launch(tmp_path: Path, hps: dict[str, str], hosts: list[str], host: str, devices: Devices):
    layout = HostLayout(host, tmp_path / host)
    (layout.code).mkdir(parents=True, exist_ok=True)
    raw = {"sagemaker_program": '"train.py"', **hps}
    env = training_environment(
        layout,
        hyperparameters=raw,
        resources=resource_config(host, hosts, "ml.g5.12xlarge", "eth0"),
        data_config={},
        devices=devices,
        job_name="j",
    )
    return plan_launch(env, layout.code)


def test_the_runner_follows_the_containers_order(tmp_path):
    hosts = ["algo-1", "algo-2"]
    plain = _launch(tmp_path, {"epochs": "3", "x": "1"}, hosts, "algo-2", Devices(gpus=4))
    assert plain.runner == "process" and plain.container_command() == [
        "python",
        "--",
        "train.py",
        "--epochs",
        "3",
        "-x",
        "1",
    ]
    torchrun = _launch(
        tmp_path, {"sagemaker_torch_distributed_enabled": "true"}, hosts, "algo-2", Devices(gpus=4)
    )
    assert torchrun.container_command() == [
        "torchrun", "--nnodes", "2", "--nproc_per_node", "4",
        "--master_addr", "algo-1", "--master_port", "7777", "--node_rank", "1", "train.py",
    ]  # fmt: skip
    single = _launch(
        tmp_path, {"sagemaker_torch_distributed_enabled": "true"}, ["algo-1"], "algo-1", Devices()
    )
    assert single.container_command() == ["torchrun", "--nnodes", "1", "--nproc_per_node", "1", "train.py"]
    # mpi wins over torch_distributed; its processes per host override the GPU count
    both = {
        "sagemaker_torch_distributed_enabled": "true",
        "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": "2",
    }
    master = _launch(tmp_path, both, hosts, "algo-1", Devices(gpus=4))
    assert master.runner == "mpi" and master.world_size == 4
    assert master.container_command()[:5] == ["mpirun", "--host", "algo-1:2,algo-2:2", "-np", "4"]
    worker = _launch(tmp_path, both, hosts, "algo-2", Devices(gpus=4))
    assert worker.container_command() == [] and len(worker.local_commands(master_port=1)) == 2
    ranks = [extra["OMPI_COMM_WORLD_RANK"] for _, extra in worker.local_commands(master_port=1)]
    assert ranks == ["2", "3"]
    # SMP's "false" dataparallel flag selects nothing
    smp = _launch(
        tmp_path,
        {
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_distributed_dataparallel_enabled": "false",
        },
        hosts,
        "algo-1",
        Devices(gpus=4),
    )
    assert smp.runner == "torchrun"
    xla = _launch(
        tmp_path, {"sagemaker_pytorch_xla_multi_worker_enabled": "true"}, hosts, "algo-1", Devices()
    )
    with pytest.raises(LaunchError, match="not emulated locally"):
        xla.local_commands(master_port=1)


def test_training_env_has_the_toolkits_37_properties(tmp_path):
    layout = HostLayout("algo-1", tmp_path)
    env = training_environment(
        layout,
        hyperparameters={"sagemaker_program": '"train.py"', "lr": "0.1"},
        resources=resource_config("algo-1", ["algo-1"], "ml.m5.xlarge", "eth0"),
        data_config={"train": {"TrainingInputMode": "File"}},
        devices=Devices(cpus=4),
        job_name="j",
    )
    assert len(env) == 37
    assert env["module_name"] == "train" and env["hyperparameters"] == {"lr": 0.1}
    assert env["channel_input_dirs"] == {"train": str(tmp_path / "input" / "data" / "train")}
    assert json.dumps(env)  # serializable, as SM_TRAINING_ENV


def test_requirements_check(tmp_path):
    assert check_requirements(tmp_path) is None
    (tmp_path / "requirements.txt").write_text(
        "# comment\nnumpy>=1.0  # inline\nscikit-learn==0.1\nsurely-not-a-package-here==1.0\n"
        "-e git+https://example.com/x.git\nfoo; python_version < '3.0'\n"
    )
    check = check_requirements(tmp_path)
    assert check is not None and not check.ok
    assert check.satisfied == ("numpy>=1.0", "foo; python_version < '3.0'")
    assert check.unmet[0].startswith("scikit-learn==0.1: ") and check.unmet[0].endswith(" is installed")
    assert check.unmet[1] == "surely-not-a-package-here==1.0: not installed"
    assert check.unchecked == ("-e git+https://example.com/x.git",)


@pytest.mark.parametrize(
    ("devices", "per_host"),
    [
        (Devices(neurons=32), 32),  # a trn1.32xlarge: neuron-ls's cores, as the toolkit counts them
        (Devices(gpus=4, neurons=32), 4),  # GPUs first
        (Devices(cpus=8), 1),  # neither: one process (not one per CPU)
    ],
)
def test_processes_per_host_are_the_gpus_else_the_neuron_cores_else_one(tmp_path, devices, per_host):
    launch = _launch(tmp_path, {"sagemaker_torch_distributed_enabled": "true"}, ["algo-1"], "algo-1", devices)
    assert launch.processes_per_host == per_host and launch.world_size == per_host
    assert launch.container_command()[:5] == ["torchrun", "--nnodes", "1", "--nproc_per_node", str(per_host)]
    # sagemaker_mpi_num_of_processes_per_host wins over any device count
    hps = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "3"}
    assert _launch(tmp_path, hps, ["algo-1"], "algo-1", devices).processes_per_host == 3
