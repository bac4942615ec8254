"""The simulated hosts of a local run: what SageMaker and the container do before the script starts.

Each host gets its own /opt/ml-shaped folder (config files, channels, its own code directory,
model/, output/) and the environment AWS's training toolkit would give the script (core/contract.py),
and the runner the container would choose (local/training/launch.py). Hosts rendezvous over loopback.
Checkpoints live in one folder shared by all hosts, as SageMaker's S3 checkpoint sync makes them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.contract import (
    PYTORCH_FRAMEWORK_MODULE,
    Devices,
    HostLayout,
    container_path,
    cpu_count,
    files_under,
    input_data_config,
    is_container_path,
    resource_config,
    sagemaker_process_exports,
    sm_variables,
    toolkit_exports,
    training_environment,
    write_host_config,
)
from sagestack.core.sourcedir import unpack_source_archive
from sagestack.core.tf_contract import (
    MWMS_FLAG,
    PS_FLAG,
    TENSORFLOW_FRAMEWORK_MODULE,
    model_dir_under_tuning,
    tensorflow_exports,
)
from sagestack.local.errors import LocalRunError
from sagestack.local.training.job import LocalRequest, LocalTrainOptions
from sagestack.local.training.launch import Launch, plan_launch
from sagestack.local.training.processes import free_port
from sagestack.project.loader import LoadedSpec

LOCAL_INTERFACE = "lo"  # resourceconfig.json's network_interface_name here (eth0 on SageMaker)


@dataclass(frozen=True)
class SimulatedHost:
    layout: HostLayout
    launch: Launch
    environment: dict[str, str]  # the script's environment on top of this process's
    # each `algo-N:port` a TF_CONFIG names -> the free loopback address that stands for it here
    addresses: dict[str, str] = field(default_factory=dict)


def extract_archive(archive: bytes, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    unpack_source_archive(archive, dest)


def simulated_devices(instance_type: str, procs: int) -> Devices:
    """A simulated host has `procs` accelerators of the instance's kind (what nvidia-smi or neuron-ls
    would count); a CPU instance has none, so the container starts one process there."""

    it = catalog_instance(instance_type)
    cpus = os.cpu_count() or 1  # the toolkit's SM_NUM_CPUS is multiprocessing.cpu_count()
    if it.gpus:
        return Devices(gpus=procs, cpus=cpus)
    if it.neuron_cores:
        return Devices(neurons=procs, cpus=cpus)
    if procs > 1:
        raise LocalRunError(
            f"{instance_type} has no accelerator, so the container starts one process per host; "
            f"--procs {procs} simulates accelerators per host and needs an accelerated instance type"
        )
    return Devices(cpus=cpus)


def _replace(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def lay_out_channel(dest: Path, source: Path, distribution: str, host_index: int, hosts: int) -> int:
    """A channel's files on one host: all of them (FullyReplicated), or, for ShardedByS3Key, the
    host's share of the objects in key order (object i goes to host i mod N). Returns the count."""
    _replace(dest)
    files = list(files_under(source))
    if distribution == "ShardedByS3Key":
        files = files[host_index::hosts]
    dest.mkdir(parents=True)
    for f in files:
        target = dest / f.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(f.resolve())
    return len(files)


def channel_sources(
    loaded: LoadedSpec, job_key: str, data_config: dict[str, dict[str, str]]
) -> dict[str, Path]:
    """Each channel's local folder (its `local_path`), refused when the run cannot use it."""
    for name, entry in data_config.items():
        if entry["TrainingInputMode"] == "Pipe":
            raise LocalRunError(
                f"channel '{name}' uses Pipe input mode, which is not emulated locally (the script would "
                "read a FIFO per epoch); use input_mode File or FastFile to run it here"
            )
    sources: dict[str, Path] = {}
    for name, channel in loaded.spec.jobs[job_key].channels.items():
        if channel.local_path is None:
            raise LocalRunError(
                f"channel '{name}' of job '{job_key}' has no local_path; add one to run it locally"
            )
        source = (loaded.root / channel.local_path).resolve()
        if not source.is_dir():
            raise LocalRunError(f"channel '{name}': local_path {source} is not a folder")
        sources[name] = source
    return sources


def lay_out_channels(
    layout: HostLayout,
    sources: dict[str, Path],
    data_config: dict[str, dict[str, str]],
    index: int,
    hosts: int,
) -> None:
    for name, source in sources.items():
        count = lay_out_channel(
            layout.data / name, source, data_config[name]["S3DistributionType"], index, hosts
        )
        if count == 0:
            raise LocalRunError(
                f"channel '{name}' gives {layout.name} no files ({len(list(files_under(source)))} object(s) "
                f"sharded by S3 key over {hosts} hosts): the script there would find the channel "
                "empty; use fewer hosts or split the data into more files"
            )


def share_checkpoints(layout: HostLayout, checkpoint_path: str, checkpoints: Path) -> None:
    """The host's checkpoint directory, a link to the one folder every host shares."""
    local = container_path(layout.base, checkpoint_path)
    local.parent.mkdir(parents=True, exist_ok=True)
    _replace(local)
    local.symlink_to(checkpoints.resolve(), target_is_directory=True)


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


def host_environment(
    layout: HostLayout,
    local: LocalRequest,
    env_dict: dict[str, Any],
    launch: Launch,
    *,
    master_port: int,
    threads: int,
    torch_version: str,
) -> dict[str, str]:
    """What the script's process gets on this host, besides this process's own environment."""
    request = local.request
    hyperparameters: dict[str, str] = request["HyperParameters"]
    tensorflow = env_dict["framework_module"] == TENSORFLOW_FRAMEWORK_MODULE
    container = (
        tensorflow_exports(local.deployment.region)
        if tensorflow
        else {
            **({"NCCL_PROTO": "simple"} if launch.runner == "torchrun" else {}),
            "SM_DLC_TORCH_VERSION": torch_version,
        }
    )
    return {
        # the request's Environment, container paths mapped into this host's folder
        **{
            k: str(container_path(layout.base, v)) if is_container_path(v) else v
            for k, v in request.get("Environment", {}).items()
        },
        # what the platform sets
        "TRAINING_JOB_NAME": local.job_name,
        "TRAINING_JOB_ARN": local.job_arn,
        "AWS_REGION": local.deployment.region,
        # what the toolkit and the PyTorch container export, then the SM_* variables
        **sagemaker_process_exports(hyperparameters),
        **toolkit_exports(env_dict, code_dir=layout.code, master_port=master_port, pytorch=not tensorflow),
        **container,
        **sm_variables(env_dict),
        **({} if tensorflow else {"MASTER_ADDR": "127.0.0.1"}),  # LOCAL_SUBSTITUTIONS
        # the toolkit's own override of /opt/ml; a script that builds container paths from it
        # (training_src does) stays inside the host's folder
        "SAGEMAKER_BASE_DIR": str(layout.base),
        "OMP_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
    }


def is_tensorflow_job(local: LocalRequest) -> bool:
    """The job runs in the TensorFlow container: a TensorFlow image, or a distribution only that
    container runs (the request's hyperparameters name it)."""
    hyperparameters = local.request["HyperParameters"]
    return local.framework == "tensorflow" or any(f in hyperparameters for f in (PS_FLAG, MWMS_FLAG))


def prepare_hosts(
    loaded: LoadedSpec,
    job_key: str,
    local: LocalRequest,
    workdir: Path,
    options: LocalTrainOptions,
    *,
    master_port: int,
) -> list[SimulatedHost]:
    """What SageMaker and the container do before the script starts, once per simulated host: the
    /opt/ml folders and their config files, the channels, the code unpacked into the host's own
    code directory, the checkpoint directory (shared by all hosts, as S3 sync makes it), the SM_*
    environment and the runner."""
    request = local.request
    hosts = [f"algo-{i + 1}" for i in range(options.hosts)]
    instance_type = request["ResourceConfig"]["InstanceType"]
    hyperparameters: dict[str, str] = request["HyperParameters"]
    devices = simulated_devices(instance_type, options.procs)
    data_config = input_data_config(request)
    sources = channel_sources(loaded, job_key, data_config)
    checkpoints = workdir / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    checkpoint_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    threads = options.threads or max(1, cpu_count() // (options.hosts * options.procs))
    torch_version = _torch_version()
    tensorflow = is_tensorflow_job(local)
    plans = []
    for index, host in enumerate(hosts):
        layout = HostLayout(host, workdir / "hosts" / host)
        resources = resource_config(host, hosts, instance_type, LOCAL_INTERFACE)
        write_host_config(
            layout, hyperparameters=hyperparameters, resources=resources, data_config=data_config
        )
        extract_archive(local.archive, layout.code)
        lay_out_channels(layout, sources, data_config, index, len(hosts))
        if checkpoint_path:
            share_checkpoints(layout, checkpoint_path, checkpoints)
        env_dict = training_environment(
            layout,
            hyperparameters=hyperparameters,
            resources=resources,
            data_config=data_config,
            devices=devices,
            job_name=local.job_name,
            framework_module=TENSORFLOW_FRAMEWORK_MODULE if tensorflow else PYTORCH_FRAMEWORK_MODULE,
            topology=not tensorflow,  # the TensorFlow container's sagemaker-training 4.x has none
        )
        if tensorflow:
            model_dir_under_tuning(hyperparameters, env_dict["hyperparameters"], local.job_name)
        launch = plan_launch(env_dict, layout.code)
        environment = host_environment(
            layout,
            local,
            env_dict,
            launch,
            master_port=master_port,
            threads=threads,
            torch_version=torch_version,
        )
        plans.append(SimulatedHost(layout, launch, environment))
    addresses = local_addresses(a for plan in plans for a in plan.launch.addresses())
    return [replace(plan, addresses=addresses) for plan in plans]


def local_addresses(names: Iterable[str]) -> dict[str, str]:
    """A free loopback port for each `host:port` (TF_LOCAL_SUBSTITUTIONS), no two alike."""
    out: dict[str, str] = {}
    taken: set[int] = set()
    for name in names:
        if name in out:
            continue
        port = free_port()
        while port in taken:
            port = free_port()
        taken.add(port)
        out[name] = f"127.0.0.1:{port}"
    return out
