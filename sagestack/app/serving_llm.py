"""An endpoint's (or inference component's) `llm:` as the constructs' LlmModel: the family's image
for the region and first instance type, the container's environment, the weights' S3 prefix (a key
in the artifact bucket, or a given s3:// URI), the download and start-up timeouts, and an EBS volume
where no instance type of the pools has instance storage."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration

from sagestack.constructs import LlmModel
from sagestack.llm.endpoint_requests import volume_size_gb, weights_uri
from sagestack.llm.environment import container_environment
from sagestack.llm.images import llm_image_uri
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import accelerator_devices, timeouts


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
    """NumberOfAcceleratorDevicesRequired of an LLM component: as given, else the devices its
    tensor-parallel degree spans (GPUs, or Neuron devices: the degree counts NeuronCores)."""
    return accelerator_devices(spec, instance_type, accelerators)
