"""The SageMaker training container contract, laid out in a folder (see shared FACTS.md):
/opt/ml-shaped directories, the three config JSON files and the SM_* environment."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def decode_hyperparameter(value: str) -> Any:
    """As the training toolkit does: json.loads each value, falling back to the raw string."""
    try:
        return json.loads(value)
    except (ValueError, TypeError):
        return value


def user_args(hyperparameters: dict[str, str]) -> list[str]:
    """Non-framework hyperparameters as sorted `--key value` arguments (the toolkit's order)."""
    args: list[str] = []
    for key in sorted(hyperparameters):
        if key.startswith("sagemaker_") or key == "mp_parameters":
            continue
        value = decode_hyperparameter(hyperparameters[key])
        args += [f"--{key}", json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    return args


@dataclass(frozen=True)
class HostLayout:
    name: str
    base: Path  # plays /opt/ml

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


def lay_out_host(
    base: Path,
    *,
    host: str,
    hosts: list[str],
    instance_type: str,
    hyperparameters: dict[str, str],
    channels: dict[str, Path],
) -> HostLayout:
    layout = HostLayout(host, base)
    for folder in (
        layout.config,
        layout.data,
        layout.model,
        layout.output / "data",
        layout.output / "intermediate",
    ):
        folder.mkdir(parents=True, exist_ok=True)
    layout.failure.unlink(missing_ok=True)
    (layout.config / "hyperparameters.json").write_text(json.dumps(hyperparameters, indent=2, sort_keys=True))
    (layout.config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": host,
                "current_instance_type": instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": hosts,
                "instance_groups": [
                    {
                        "instance_group_name": "homogeneousCluster",
                        "instance_type": instance_type,
                        "hosts": hosts,
                    }
                ],
                "network_interface_name": "lo",
            },
            indent=2,
        )
    )
    (layout.config / "inputdataconfig.json").write_text(
        json.dumps(
            {
                name: {
                    "TrainingInputMode": "File",
                    "S3DistributionType": "FullyReplicated",
                    "RecordWrapperType": "None",
                }
                for name in channels
            },
            indent=2,
        )
    )
    for name, source in channels.items():
        link = layout.data / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(source.resolve(), target_is_directory=True)
    return layout


def sm_environment(
    layout: HostLayout,
    *,
    hosts: list[str],
    instance_type: str,
    hyperparameters: dict[str, str],
    channels: list[str],
    job_name: str,
    num_cpus: int,
) -> dict[str, str]:
    """The SM_* variables the training toolkit sets (non-string values JSON-encoded)."""
    decoded = {
        k: decode_hyperparameter(v) for k, v in hyperparameters.items() if not k.startswith("sagemaker_")
    }
    args = user_args(hyperparameters)
    env = {
        "SAGEMAKER_BASE_DIR": str(layout.base),
        "SM_HOSTS": json.dumps(hosts),
        "SM_CURRENT_HOST": layout.name,
        "SM_CURRENT_INSTANCE_TYPE": instance_type,
        "SM_NUM_GPUS": "0",
        "SM_NUM_NEURONS": "0",
        "SM_NUM_CPUS": str(num_cpus),
        "SM_MODEL_DIR": str(layout.model),
        "SM_INPUT_DIR": str(layout.base / "input"),
        "SM_INPUT_CONFIG_DIR": str(layout.config),
        "SM_OUTPUT_DIR": str(layout.output),
        "SM_OUTPUT_DATA_DIR": str(layout.output / "data"),
        "SM_OUTPUT_INTERMEDIATE_DIR": str(layout.output / "intermediate"),
        "SM_CHANNELS": json.dumps(sorted(channels)),
        "SM_HPS": json.dumps(decoded),
        "SM_USER_ARGS": json.dumps(args),
        "SM_NETWORK_INTERFACE_NAME": "lo",
        "SM_LOG_LEVEL": hyperparameters.get("sagemaker_container_log_level", "20"),
        "SM_MODULE_NAME": decode_hyperparameter(hyperparameters.get("sagemaker_program", '"train.py"')),
        "SM_TRAINING_ENV": json.dumps(
            {
                "hosts": hosts,
                "current_host": layout.name,
                "job_name": job_name,
                "hyperparameters": decoded,
                "channel_input_dirs": {c: str(layout.data / c) for c in channels},
                "model_dir": str(layout.model),
                "output_data_dir": str(layout.output / "data"),
                "num_gpus": 0,
                "num_cpus": num_cpus,
            }
        ),
    }
    for channel in channels:
        env[f"SM_CHANNEL_{channel.upper()}"] = str(layout.data / channel)
    for key, value in decoded.items():
        env[f"SM_HP_{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
