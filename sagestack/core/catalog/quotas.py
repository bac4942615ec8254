"""SageMaker Service Quotas names. Codes are opaque (L-…); they are looked up by these names."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

SERVICE_CODE = "sagemaker"

QuotaUsage = Literal[
    "training", "spot_training", "endpoint", "warm_pool", "processing", "cluster", "transform"
]

_SUFFIX: dict[str, str] = {
    "training": "for training job usage",
    "spot_training": "for spot training job usage",
    "endpoint": "for endpoint usage",
    "warm_pool": "for training warm pool usage",
    "processing": "for processing job usage",
    "cluster": "for cluster usage",
    "transform": "for transform job usage",
}

TRAINING_INSTANCES_TOTAL = "Number of instances across all training jobs"
# An optimization job (CreateOptimizationJob) has no quota of its own in Service Quotas: its instance
# counts against the DeploymentInstanceType's "<type> for endpoint usage", which the optimization
# pipeline checks before it creates the job and `plan` counts.
OPTIMIZATION_USAGE: QuotaUsage = "endpoint"


def training_usage(spot: bool) -> QuotaUsage:
    """On-demand and managed-spot training draw on different quotas."""
    return "spot_training" if spot else "training"


def quota_name(instance_type: str, usage: QuotaUsage) -> str:
    """E.g. quota_name('ml.g5.2xlarge', 'training') == 'ml.g5.2xlarge for training job usage'."""
    return f"{instance_type} {_SUFFIX[usage]}"


def snapshot_path(root: Path, env: str) -> Path:
    """Where `sagestack quota snapshot --env E` keeps an account's quotas: config/envs/<env>.quotas.json."""
    return root / "config" / "envs" / f"{env}.quotas.json"
