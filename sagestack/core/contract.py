"""The SageMaker training container contract, as AWS's own training toolkit reads it.

What the platform lays out for each host (`/opt/ml/input/config/*.json`, the channels, the code in
`/opt/ml/code`) and what `sagemaker-training` 5.x derives from it inside the PyTorch DLC: the
`SM_*` environment with its 37-key `SM_TRAINING_ENV`, the script's arguments and the other variables
the toolkit exports (sagemaker_training/environment.py, mapping.py; sagemaker_pytorch_container/
training.py). sagestack re-implements it because the local run must not need AWS's packages;
tests/conformance/ runs the toolkit itself on the same layout and compares, so a difference here is
a bug or a choice written down in `LOCAL_SUBSTITUTIONS`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTAINER_BASE = "/opt/ml"
# SAGEMAKER_TRAINING_MODULE in the PyTorch training DLC's Dockerfile.
PYTORCH_FRAMEWORK_MODULE = "sagemaker_pytorch_container.training:main"
MASTER_PORT = 7777  # sagemaker_pytorch_container.training.MASTER_PORT
SAGEMAKER_PREFIX = "sagemaker_"
# sagemaker_training/params.py SAGEMAKER_HYPERPARAMETERS: the toolkit's own keys, neither passed to
# the script nor counted as framework parameters.
SAGEMAKER_HYPERPARAMETERS = (
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_enable_cloudwatch_metrics",
    "sagemaker_region",
    "sagemaker_container_log_level",
    "sagemaker_job_name",
    "default_user_module_name",
    "_tuning_objective_metric",
    "sagemaker_s3_output",
)
# Flags that put the current instance group in the distribution groups (environment.py).
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    "sagemaker_parameter_server_enabled",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
    "sagemaker_torch_distributed_enabled",
)
# What the local run does differently from a container, on purpose (the conformance tier ignores
# exactly these): the hosts share one machine, so `algo-N` become loopback and ports are free ones.
LOCAL_SUBSTITUTIONS = {
    "MASTER_ADDR": "127.0.0.1 instead of algo-1 (algo-N do not resolve on this machine)",
    "MASTER_PORT": "a free port instead of 7777 (several local runs may share the machine)",
    "SM_NETWORK_INTERFACE_NAME": "lo instead of eth0",
    "SAGEMAKER_BASE_DIR": "the host's folder (the toolkit's own override of /opt/ml); SM_* paths follow it",
}


def decode_hyperparameter(value: Any) -> Any:
    """As the toolkit does: json.loads each value, falling back to the raw string."""
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value


def _arg_text(value: Any) -> str:
    # mapping._decode: None -> "", bytes -> latin1, anything else str()
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin1")
    return str(value)


def to_cmd_args(mapping: Mapping[str, Any]) -> list[str]:
    """mapping.to_cmd_args: sorted keys, `--key` (`-k` for one letter), dicts as `k=v,k2=v2`."""
    args: list[str] = []
    for key in sorted(mapping):
        name = _arg_text(key)
        args.append(("--" + name if len(name) > 1 else "-" + name) if name else "")
        value = mapping[key]
        if hasattr(value, "items"):
            args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            args.append(_arg_text(value))
    return args


def env_value(value: Any) -> str:
    """mapping.to_env_vars' value format: strings as they are, the rest compact sorted JSON."""
    if isinstance(value, bytes):
        return value.decode("latin1")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class SplitHyperparameters:
    sagemaker: dict[str, Any]  # every sagemaker_* key and the toolkit's own keys, decoded
    framework: dict[str, Any]  # sagemaker_* keys that are not the toolkit's own (distribution flags)
    user: dict[str, Any]  # what the script receives as arguments, decoded


def split_hyperparameters(raw: Mapping[str, str]) -> SplitHyperparameters:
    decoded = {k: decode_hyperparameter(v) for k, v in raw.items()}
    sagemaker = {
        k: v for k, v in decoded.items() if k in SAGEMAKER_HYPERPARAMETERS or k.startswith(SAGEMAKER_PREFIX)
    }
    return SplitHyperparameters(
        sagemaker=sagemaker,
        framework={k: v for k, v in sagemaker.items() if k not in SAGEMAKER_HYPERPARAMETERS},
        user={k: v for k, v in decoded.items() if k not in sagemaker},
    )


def is_container_path(value: str) -> bool:
    return value == CONTAINER_BASE or value.startswith(CONTAINER_BASE + "/")


def container_path(base: Path, path: str) -> Path:
    """Where a container path lives in a simulated host whose folder `base` plays /opt/ml."""
    pure = Path(path)
    if pure == Path(CONTAINER_BASE) or Path(CONTAINER_BASE) in pure.parents:
        return base / pure.relative_to(CONTAINER_BASE)
    return base / "rootfs" / pure.relative_to(pure.anchor)


@dataclass(frozen=True)
class HostLayout:
    name: str
    base: Path  # plays /opt/ml

    @property
    def code(self) -> Path:
        return self.base / "code"

    @property
    def config(self) -> Path:
        return self.base / "input" / "config"

    @property
    def data(self) -> Path:
        return self.base / "input" / "data"

    @property
    def model(self) -> Path:
        return self.base / "model"

    @property
    def output(self) -> Path:
        return self.base / "output"

    @property
    def failure(self) -> Path:
        return self.output / "failure"

    @property
    def success(self) -> Path:
        return self.output / "success"


def resource_config(host: str, hosts: list[str], instance_type: str, interface: str) -> dict[str, Any]:
    """resourceconfig.json as SageMaker writes it for a homogeneous cluster."""
    return {
        "current_host": host,
        "current_instance_type": instance_type,
        "current_group_name": "homogeneousCluster",
        "hosts": hosts,
        "instance_groups": [
            {"instance_group_name": "homogeneousCluster", "instance_type": instance_type, "hosts": hosts}
        ],
        "network_interface_name": interface,
    }


def input_data_config(request: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """inputdataconfig.json from a CreateTrainingJob request: each channel with its input mode
    (the channel's, else the algorithm's), S3 distribution type, record wrapper and content type."""
    default_mode = request["AlgorithmSpecification"].get("TrainingInputMode", "File")
    config: dict[str, dict[str, str]] = {}
    for channel in request.get("InputDataConfig", []):
        s3 = channel["DataSource"].get("S3DataSource", {})
        entry = {
            "TrainingInputMode": channel.get("InputMode", default_mode),
            "S3DistributionType": s3.get("S3DataDistributionType", "FullyReplicated"),
            "RecordWrapperType": channel.get("RecordWrapperType", "None"),
        }
        if "ContentType" in channel:
            entry["ContentType"] = channel["ContentType"]
        config[channel["ChannelName"]] = entry
    return config


def write_host_config(
    layout: HostLayout,
    *,
    hyperparameters: Mapping[str, str],
    resources: Mapping[str, Any],
    data_config: Mapping[str, Any],
) -> None:
    for folder in (
        layout.config,
        layout.data,
        layout.model,
        layout.output / "data",
        layout.output / "intermediate",
    ):
        folder.mkdir(parents=True, exist_ok=True)
    layout.failure.unlink(missing_ok=True)
    layout.success.unlink(missing_ok=True)
    (layout.config / "hyperparameters.json").write_text(
        json.dumps(dict(hyperparameters), indent=2, sort_keys=True)
    )
    (layout.config / "resourceconfig.json").write_text(json.dumps(dict(resources), indent=2))
    (layout.config / "inputdataconfig.json").write_text(json.dumps(dict(data_config), indent=2))


@dataclass(frozen=True)
class Devices:
    """What the toolkit counts on a host: nvidia-smi's GPUs, neuron-ls's cores, the CPU count."""

    gpus: int = 0
    neurons: int = 0
    cpus: int = 1


def training_environment(
    layout: HostLayout,
    *,
    hyperparameters: Mapping[str, str],
    resources: Mapping[str, Any],
    data_config: Mapping[str, Any],
    devices: Devices,
    job_name: str | None,
    framework_module: str | None = PYTORCH_FRAMEWORK_MODULE,
    topology: bool = True,
) -> dict[str, Any]:
    """The toolkit's Environment as a dict (`SM_TRAINING_ENV`): its 37 properties (36 in
    sagemaker-training 4.x, which has no `topology`: topology=False)."""
    split = split_hyperparameters(hyperparameters)
    hosts = list(resources["hosts"])
    current_host = resources["current_host"]
    group = resources.get("current_group_name", "homogeneousCluster")
    groups = list(resources.get("instance_groups", []))
    framework = split.framework
    distribution_groups = framework.get(
        "sagemaker_distribution_instance_groups",
        [group] if any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS) else [],
    )
    if groups:
        distribution_hosts = [
            h for g in groups if g["instance_group_name"] in distribution_groups for h in g["hosts"]
        ]
    else:
        distribution_hosts = list(hosts)
    master = distribution_hosts[0] if distribution_hosts else hosts[0]
    program = split.sagemaker.get("sagemaker_program")
    module_name = str(program)[:-3] if str(program).endswith(".py") else str(program)
    base = layout.base
    env = {
        "additional_framework_parameters": framework,
        "channel_input_dirs": {c: str(layout.data / c) for c in data_config},
        "current_host": current_host,
        "current_instance_group": group,
        "current_instance_group_hosts": next(
            (g["hosts"] for g in groups if g["instance_group_name"] == group), []
        ),
        "current_instance_type": resources.get("current_instance_type", "local"),
        "distribution_hosts": distribution_hosts,
        "distribution_instance_groups": distribution_groups,
        "framework_module": framework_module,
        "hosts": hosts,
        "hyperparameters": split.user,
        "input_config_dir": str(layout.config),
        "input_data_config": dict(data_config),
        "input_dir": str(base / "input"),
        "instance_groups": [g["instance_group_name"] for g in groups],
        "instance_groups_dict": {g["instance_group_name"]: g for g in groups},
        "is_hetero": len(groups) > 1,
        "is_master": current_host == master,
        # The toolkit reads SM_HP_MP_PARAMETERS from its own environment before it exports it.
        "is_modelparallel_enabled": None,
        "is_smddpmprun_installed": False,
        "is_smddprun_installed": False,
        "job_name": job_name,
        "log_level": split.sagemaker.get("sagemaker_container_log_level", 20),
        "master_hostname": master,
        "model_dir": str(layout.model),
        "module_dir": str(split.sagemaker.get("sagemaker_submit_directory", layout.code)),
        "module_name": module_name,
        "network_interface_name": resources.get("network_interface_name", "eth0"),
        "num_cpus": devices.cpus,
        "num_gpus": devices.gpus,
        "num_neurons": devices.neurons,
        "output_data_dir": str(layout.output / "data"),
        "output_dir": str(layout.output),
        "output_intermediate_dir": str(layout.output / "intermediate"),
        "resource_config": dict(resources),
        "topology": list(resources.get("topology", [])),
        "user_entry_point": program,
    }
    if not topology:
        del env["topology"]
    return env


def sm_variables(env: Mapping[str, Any]) -> dict[str, str]:
    """Environment.to_env_vars(): the SM_* variables the script sees, from the training
    environment (whose `hyperparameters` are the user's, decoded)."""
    user = env["hyperparameters"]
    keys = {
        "hosts": env["hosts"],
        "network_interface_name": env["network_interface_name"],
        "hps": env["hyperparameters"],
        "user_entry_point": env["user_entry_point"],
        "framework_params": env["additional_framework_parameters"],
        "resource_config": env["resource_config"],
        "input_data_config": env["input_data_config"],
        "output_data_dir": env["output_data_dir"],
        "channels": sorted(env["channel_input_dirs"]),
        "current_host": env["current_host"],
        "current_instance_type": env["current_instance_type"],
        "current_instance_group": env["current_instance_group"],
        "current_instance_group_hosts": env["current_instance_group_hosts"],
        "instance_groups": env["instance_groups"],
        "instance_groups_dict": env["instance_groups_dict"],
        "distribution_instance_groups": env["distribution_instance_groups"],
        "is_hetero": env["is_hetero"],
        "module_name": env["module_name"],
        "log_level": env["log_level"],
        "framework_module": env["framework_module"],
        "input_dir": env["input_dir"],
        "input_config_dir": env["input_config_dir"],
        "output_dir": env["output_dir"],
        "num_cpus": env["num_cpus"],
        "num_gpus": env["num_gpus"],
        "num_neurons": env["num_neurons"],
        "model_dir": env["model_dir"],
        "module_dir": env["module_dir"],
        "training_env": dict(env),
        "user_args": to_cmd_args(user),
        "output_intermediate_dir": env["output_intermediate_dir"],
    }
    if env.get("topology"):
        keys["topology"] = env["topology"]
    for name, path in env["channel_input_dirs"].items():
        keys[f"channel_{name}"] = path
    for key, value in user.items():
        keys[f"hp_{key}"] = value
    return {f"SM_{str(k).upper()}": env_value(v) for k, v in keys.items() if k}


def toolkit_exports(
    env: Mapping[str, Any], *, code_dir: Path, master_port: int | str = MASTER_PORT, pytorch: bool = True
) -> dict[str, str]:
    """The other variables the toolkit (CURRENT_HOST, PYTHONPATH) and the PyTorch container
    (MASTER_*, NCCL_*: pytorch=False leaves them out) put in the script's environment."""
    interface = env["network_interface_name"]
    generic = {
        "CURRENT_HOST": env["current_host"],
        # the toolkit puts its sys.path (code dir first) in PYTHONPATH
        "PYTHONPATH": os.pathsep.join([str(code_dir), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    if not pytorch:
        return generic
    return {
        **generic,
        "MASTER_ADDR": env["master_hostname"],
        "MASTER_PORT": str(master_port),
        "NCCL_SOCKET_IFNAME": interface,
        "NCCL_IB_DISABLE": "1",
        "NCCL_DEBUG": "WARN",
    }


def sagemaker_process_exports(hyperparameters: Mapping[str, str]) -> dict[str, str]:
    """What Environment() writes into os.environ: the job name, the region."""
    sm = split_hyperparameters(hyperparameters).sagemaker
    return {
        "SAGEMAKER_JOB_NAME": str(sm.get("sagemaker_job_name", "")),
        "SAGEMAKER_REGION": str(sm.get("sagemaker_region", "") or ""),
    }


def cpu_count() -> int:
    """Cores this process may use (for sizing local threads; the toolkit's SM_NUM_CPUS is os.cpu_count())."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def files_under(folder: Path) -> Iterable[Path]:
    """Every file under a folder (following links), in S3 key order of their relative paths."""
    found = [p for p in folder.rglob("*") if p.is_file()]
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())
