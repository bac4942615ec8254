"""An endpoint's (or inference component's) `llm:` as the constructs' LlmModel: the family's image
for the region and first instance type, the container's environment, the weights' S3 prefix (a key
in the artifact bucket, or a given s3:// URI), the download and start-up timeouts, and an EBS volume
where no instance type of the pools has instance storage."""

from __future__ import annotations

import math
from collections.abc import Sequence

from aws_cdk import Duration

from sagestack.constructs import LlmModel
from sagestack.constructs.endpoint_llm import has_instance_storage
from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.llm.models import LlmSpec

BYTES_PER_PARAMETER = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
MAX_VOLUME_GB = 512  # ProductionVariant.VolumeSizeInGB's ceiling


def weights_gb(spec: LlmSpec) -> float:
    """The weights' size on disk: as given, else parameters x bytes per parameter of the dtype."""
    if spec.weights.size_gb is not None:
        return spec.weights.size_gb
    return spec.parameters * BYTES_PER_PARAMETER[spec.dtype] / 1e9


def weights_uri(spec: LlmSpec, bucket_name: str) -> str:
    """s3://… as given, or the key prefix in the project's artifact bucket."""
    s3 = spec.weights.s3
    return s3 if s3.startswith("s3://") else f"s3://{bucket_name}/{s3.lstrip('/')}"


def volume_size_gb(spec: LlmSpec, instance_types: Sequence[str]) -> int | None:
    """An EBS volume holding the weights twice over (download, then load) plus 30 GB for the
    container, on pools none of whose types has NVMe instance storage (those take no volume)."""
    if not instance_types or any(has_instance_storage(t) for t in instance_types):
        return None
    return min(MAX_VOLUME_GB, math.ceil(2 * weights_gb(spec)) + 30)


def llm_model_of(
    spec: LlmSpec,
    *,
    region: str,
    instance_types: Sequence[str],
    bucket_name: str,
    accelerators: int | None = None,
    model_package: str | None = None,
    volume: bool = True,
) -> LlmModel:
    """`spec` as LlmModel props; model_package: an optimized, registered model serving `spec`'s
    settings (its own image and weights). volume: whether the variant sets VolumeSizeInGB (a
    component's copies use the endpoint's instances)."""
    first = instance_types[0]
    download_s, startup_s = timeouts(spec)
    return LlmModel(
        image_uri=None if model_package else llm_image_uri(spec, region=region, instance_type=first),
        weights_uri=None if model_package else weights_uri(spec, bucket_name),
        environment=container_environment(spec, instance_type=first, accelerators=accelerators),
        model_package=model_package,
        download_timeout=Duration.seconds(download_s),
        startup_timeout=Duration.seconds(startup_s),
        volume_size_gb=volume_size_gb(spec, instance_types) if volume else None,
    )


def component_accelerators(spec: LlmSpec, instance_type: str, accelerators: int | None) -> int:
    """NumberOfAcceleratorDevicesRequired of an LLM component: as given, else the tensor-parallel degree."""
    return accelerators or tensor_parallel_degree(spec, instance_type, accelerators)


# --- stand-ins for helper A's llm/images.py, llm/environment.py and llm/sizing.py (issue 27),
# by their names and signatures; replaced by imports when those land.


def llm_image_uri(spec: LlmSpec, *, region: str, instance_type: str) -> str:
    """Stand-in: DJL LMI's image in the region (A resolves each family from sagemaker-core)."""
    return f"763104351884.dkr.ecr.{region}.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"


def tensor_parallel_degree(spec: LlmSpec, instance_type: str, accelerators: int | None = None) -> int:
    """Stand-in: as given, else the component's accelerators, else every GPU of the instance."""
    if spec.tensor_parallel_degree:
        return spec.tensor_parallel_degree
    if accelerators:
        return accelerators
    try:
        return lookup(instance_type).gpus or 1
    except (KeyError, ValueError):
        return 1


def timeouts(spec: LlmSpec) -> tuple[int, int]:
    """Stand-in: as given, else 600 s plus 20 s per GB of weights (60-3600)."""
    guess = min(3600, max(600, 600 + math.ceil(20 * weights_gb(spec))))
    return spec.download_timeout or guess, spec.startup_timeout or guess


def container_environment(
    spec: LlmSpec, *, instance_type: str, accelerators: int | None = None
) -> dict[str, str]:
    """Stand-in: DJL LMI's settings."""
    env = {
        "HF_MODEL_ID": "/opt/ml/model",
        "OPTION_TENSOR_PARALLEL_DEGREE": str(tensor_parallel_degree(spec, instance_type, accelerators)),
        "OPTION_DTYPE": spec.dtype,
    }
    if spec.max_batch_size:
        env["OPTION_MAX_ROLLING_BATCH_SIZE"] = str(spec.max_batch_size)
    if spec.max_total_tokens:
        env["OPTION_MAX_MODEL_LEN"] = str(spec.max_total_tokens)
    return {**env, **spec.environment}
