"""SageMaker Service Quotas names. Codes are opaque (L-…); they are looked up by these names."""

from __future__ import annotations

from typing import Literal

SERVICE_CODE = "sagemaker"

QuotaUsage = Literal["training", "spot_training", "endpoint", "warm_pool", "processing"]

_SUFFIX: dict[str, str] = {
    "training": "for training job usage",
    "spot_training": "for spot training job usage",
    "endpoint": "for endpoint usage",
    "warm_pool": "for training warm pool usage",
    "processing": "for processing job usage",
}

TRAINING_INSTANCES_TOTAL = "Number of instances across all training jobs"


def quota_name(instance_type: str, usage: QuotaUsage) -> str:
    """E.g. quota_name('ml.g5.2xlarge', 'training') == 'ml.g5.2xlarge for training job usage'."""
    return f"{instance_type} {_SUFFIX[usage]}"
