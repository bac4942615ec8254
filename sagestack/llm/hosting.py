"""An LLM as an endpoint (or an inference component) hosts it, spelled once: where its weights lie,
its container (the family's image for the region and first pool type, the weights' S3 prefix, the
family's environment), the download and start-up timeouts, and the EBS volume of pools whose types
have no instance storage. `render`'s requests and the constructs' resources both take these values
(endpoints/hosting_requests.py, endpoints/config_request.py, constructs/endpoint_spec.py); an
optimization job reads the weights from the same place (llm/optimization_job.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.llm.environment import container_environment
from sagestack.llm.images import llm_image_uri
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import GIB, timeouts, weights_gib

MAX_VOLUME_GB = 512  # ProductionVariant.VolumeSizeInGB's ceiling


def weights_location(spec: LlmSpec, bucket_name: str) -> str:
    """s3://… as given, or the key prefix in the project's artifact bucket (as written)."""
    s3 = spec.weights.s3
    return s3 if s3.startswith("s3://") else f"s3://{bucket_name}/{s3.lstrip('/')}"


def weights_uri(spec: LlmSpec, bucket_name: str) -> str:
    """The weights' S3 prefix as a model's S3DataSource names it: a folder, ending in '/'."""
    uri = weights_location(spec, bucket_name)
    return uri if uri.endswith("/") else uri + "/"


def has_instance_storage(instance_type: str) -> bool:
    """Whether `instance_type` has NVMe instance storage (SageMaker provisions no EBS volume then);
    an unknown type counts as having none."""
    try:
        return lookup(instance_type).has_instance_storage
    except (KeyError, ValueError):
        return False


def volume_size_gb(spec: LlmSpec, instance_types: Sequence[str]) -> int | None:
    """An EBS volume holding the weights twice over (download, then load) plus 30 GB for the
    container, on pools none of whose types has NVMe instance storage (those take no volume)."""
    if not instance_types or any(has_instance_storage(t) for t in instance_types):
        return None
    return min(MAX_VOLUME_GB, math.ceil(round(2 * weights_gib(spec) * GIB / 1e9, 3)) + 30)


@dataclass(frozen=True)
class LlmHosting:
    """`spec` hosted: the model's container (`image_uri` loading `weights_uri`, or `model_package`:
    an optimized, registered model with its own image and weights) with `environment`, the
    variant's or component's timeouts (seconds) and the variant's volume (None: none set)."""

    image_uri: str | None
    weights_uri: str | None
    environment: Mapping[str, str] = field(default_factory=dict)
    model_package: str | None = None
    download_timeout: int | None = None
    startup_timeout: int | None = None
    volume_size_gb: int | None = None


def llm_hosting(
    spec: LlmSpec,
    *,
    region: str,
    instance_types: Sequence[str],
    bucket_name: str,
    accelerators: int | None = None,
    model_package: str | None = None,
    volume: bool = True,
) -> LlmHosting:
    """`spec` on the pools `instance_types` (the first names the image and the environment's
    degree); model_package: an optimized, registered model serving `spec`'s settings. volume:
    whether the variant sets VolumeSizeInGB (a component's copies use the endpoint's instances)."""
    first = instance_types[0]
    download_s, startup_s = timeouts(spec)
    return LlmHosting(
        image_uri=None if model_package else llm_image_uri(spec, region=region, instance_type=first),
        weights_uri=None if model_package else weights_uri(spec, bucket_name),
        environment=container_environment(spec, instance_type=first, accelerators=accelerators),
        model_package=model_package,
        download_timeout=download_s,
        startup_timeout=startup_s,
        volume_size_gb=volume_size_gb(spec, instance_types) if volume else None,
    )
