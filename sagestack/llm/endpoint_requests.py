"""An LLM endpoint's requests as CloudFormation sends them, for `sagestack render`: CreateModel (the
family's image loading the weights' S3 prefix, the family's environment; or an optimized package
pinned), CreateEndpointConfig (its variant: an instance fleet or pools, or the fleet inference
components share) and each component's CreateInferenceComponent — rendered from the spec and a
Deployment, with the names CloudFormation generates as stand-ins.

The template's resources are built by the constructs (constructs/endpoint_llm.py, endpoint_config.py,
endpoint_components.py) from the same spec values (app/serving.py); tests/unit/test_render.py holds
this rendering to the example's recorded template, property by property.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.deployment import Deployment
from sagestack.endpoints.batching import spec_batching_environment
from sagestack.endpoints.models import ComponentSpec, EndpointSpec
from sagestack.llm.environment import container_environment
from sagestack.llm.images import llm_image_uri
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import GIB, accelerator_devices, timeouts, weights_gib

VARIANT = "AllTraffic"  # the constructs' variant name (endpoint_config.VARIANT)
SHADOW = "Shadow"
MAX_VOLUME_GB = 512  # ProductionVariant.VolumeSizeInGB's ceiling
# What the requests name in place of what CloudFormation names (no explicit name: a change replaces
# the model or config) or creates beside the endpoint (the async topics).
STAND_IN_GENERATED = "named-by-cloudformation"


def serves_llm(ep: EndpointSpec) -> bool:
    """An endpoint this environment deploys whose model is an LLM, or that has components."""
    return ep.deploy and bool(ep.instance_type) and (ep.llm is not None or bool(ep.components))


def weights_uri(spec: LlmSpec, bucket_name: str) -> str:
    """s3://… as given, or the key prefix in the project's artifact bucket (ending in '/')."""
    s3 = spec.weights.s3
    uri = s3 if s3.startswith("s3://") else f"s3://{bucket_name}/{s3.lstrip('/')}"
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


def model_name(component: str | None = None) -> str:
    return f"{STAND_IN_GENERATED}-model" + (f"-{component}" if component else "")


def _tags(deployment: Deployment) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in deployment.tags]


def _model_request(
    spec: LlmSpec,
    ep: EndpointSpec,
    deployment: Deployment,
    *,
    name: str,
    accelerators: int | None = None,
    model_package: str | None = None,
) -> dict[str, Any]:
    """CreateModel of an LLM: network-isolated, the weights an uncompressed S3 prefix."""
    types = list(ep.instance_type or ())
    container: dict[str, Any]
    if model_package is not None:
        container = {"ModelPackageName": model_package}
    else:
        container = {
            "Image": llm_image_uri(spec, region=deployment.region, instance_type=types[0]),
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": weights_uri(spec, deployment.bucket),
                    "S3DataType": "S3Prefix",
                    "CompressionType": "None",
                }
            },
        }
    environment = container_environment(spec, instance_type=types[0], accelerators=accelerators)
    if environment:
        container["Environment"] = environment
    return _create_model(ep, deployment, name, container)


def _create_model(
    ep: EndpointSpec, deployment: Deployment, name: str, container: dict[str, Any]
) -> dict[str, Any]:
    """CreateModel of one container, network-isolated, in the endpoint's VPC, with the tags."""
    request: dict[str, Any] = {
        "ModelName": name,
        "ExecutionRoleArn": deployment.role_arn,
        "PrimaryContainer": container,
        "EnableNetworkIsolation": True,
    }
    if ep.vpc is not None:
        request["VpcConfig"] = {
            "SecurityGroupIds": list(ep.vpc.security_groups),
            "Subnets": list(ep.vpc.subnets),
        }
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def _package_model_request(
    ep: EndpointSpec, deployment: Deployment, package: str, name: str, workers: int
) -> dict[str, Any]:
    """CreateModel of a component's registered package (its own container and environment, with
    the endpoint's `batching:` added: `workers` per copy by default)."""
    container: dict[str, Any] = {"ModelPackageName": package}
    if ep.batching is not None:
        container["Environment"] = spec_batching_environment(ep.batching, workers)
    return _create_model(ep, deployment, name, container)


def _variant(ep: EndpointSpec) -> dict[str, Any]:
    """The production variant: one model's fleet (its LLM's timeouts and volume), or the fleet the
    components share (managed instance scaling between autoscaling's min and max)."""
    types = list(ep.instance_type or ())
    shared = bool(ep.components)
    variant: dict[str, Any] = {"VariantName": VARIANT, "InitialInstanceCount": ep.initial_instance_count}
    if not shared:
        variant["ModelName"] = model_name()
        variant["InitialVariantWeight"] = 1.0
    if len(types) >= 2:
        variant["InstancePools"] = [{"InstanceType": t, "Priority": i} for i, t in enumerate(types, 1)]
    else:
        variant["InstanceType"] = types[0]
    if ep.provision_timeout:
        variant["VariantInstanceProvisionTimeoutInSeconds"] = ep.provision_timeout
    if ep.capacity_reservation:
        variant["CapacityReservationConfig"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "MlReservationArn": ep.capacity_reservation,
        }
    if ep.llm is not None and not shared:
        download, startup = timeouts(ep.llm)
        variant["ModelDataDownloadTimeoutInSeconds"] = download
        variant["ContainerStartupHealthCheckTimeoutInSeconds"] = startup
        volume = volume_size_gb(ep.llm, types)
        if volume is not None:
            variant["VolumeSizeInGB"] = volume
    if shared:
        a = ep.autoscaling
        variant["ManagedInstanceScaling"] = {
            "Status": "ENABLED",
            "MinInstanceCount": a.min if a else ep.initial_instance_count,
            "MaxInstanceCount": a.max if a else ep.initial_instance_count,
        }
        variant["RoutingConfig"] = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    return variant


def _config_request(key: str, ep: EndpointSpec, deployment: Deployment) -> dict[str, Any]:
    request: dict[str, Any] = {
        "EndpointConfigName": f"{STAND_IN_GENERATED}-config",
        "ProductionVariants": [_variant(ep)],
        "KmsKeyId": deployment.kms_key_id,
    }
    if ep.shadow is not None and ep.llm is not None:
        download, startup = timeouts(ep.llm)
        request["ShadowProductionVariants"] = [
            {
                "VariantName": SHADOW,
                "ModelName": model_name("shadow"),
                "InitialInstanceCount": ep.shadow.initial_instance_count,
                "InstanceType": ep.shadow.instance_type or (ep.instance_type or [""])[0],
                "InitialVariantWeight": ep.shadow.sampling_percent / 100,
                "ModelDataDownloadTimeoutInSeconds": download,
                "ContainerStartupHealthCheckTimeoutInSeconds": startup,
            }
        ]
    if ep.data_capture is not None:
        request["DataCaptureConfig"] = {
            "EnableCapture": True,
            "InitialSamplingPercentage": ep.data_capture.sampling_percent,
            "DestinationS3Uri": deployment.s3.uri(f"capture/{key}"),
            "KmsKeyId": deployment.kms_key_id,
            "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
            "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
        }
    if ep.async_ is not None:
        request["AsyncInferenceConfig"] = _async_config(key, ep, deployment)
    if ep.components:  # components name their models; the config names the role instead
        request["ExecutionRoleArn"] = deployment.role_arn
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def _async_config(key: str, ep: EndpointSpec, deployment: Deployment) -> dict[str, Any]:
    a = ep.async_
    assert a is not None
    output: dict[str, Any] = {
        "S3OutputPath": deployment.s3.uri(f"async/{key}/output/"),
        "S3FailurePath": deployment.s3.uri(f"async/{key}/failures/"),
        "KmsKeyId": deployment.kms_key_id,
    }
    if a.notify:
        topic = f"arn:aws:sns:{deployment.region}:{deployment.account}:{STAND_IN_GENERATED}"
        output["NotificationConfig"] = {"SuccessTopic": f"{topic}-success", "ErrorTopic": f"{topic}-error"}
        if a.include_response_in_notification:
            output["NotificationConfig"]["IncludeInferenceResponseIn"] = ["SUCCESS_NOTIFICATION_TOPIC"]
    config: dict[str, Any] = {"OutputConfig": output}
    if a.max_concurrent_invocations_per_instance:
        config["ClientConfig"] = {
            "MaxConcurrentInvocationsPerInstance": a.max_concurrent_invocations_per_instance
        }
    return config


def _component_request(
    name: str, c: ComponentSpec, ep: EndpointSpec, *, endpoint_name: str, deployment: Deployment
) -> dict[str, Any]:
    """CreateInferenceComponent: an LLM's copy spans its tensor-parallel degree's accelerators
    (unless `accelerators` says otherwise) and starts within its timeouts."""
    types = list(ep.instance_type or ())
    accelerators = accelerator_devices(c.llm, types[0], c.accelerators) if c.llm else c.accelerators
    needs: dict[str, Any] = {"NumberOfCpuCoresRequired": c.cpu_cores, "MinMemoryRequiredInMb": c.memory_mb}
    if accelerators is not None:
        needs["NumberOfAcceleratorDevicesRequired"] = accelerators
    specification: dict[str, Any] = {"ModelName": model_name(name), "ComputeResourceRequirements": needs}
    if c.llm is not None:
        download, startup = timeouts(c.llm)
        specification["StartupParameters"] = {
            "ModelDataDownloadTimeoutInSeconds": download,
            "ContainerStartupHealthCheckTimeoutInSeconds": startup,
        }
    request: dict[str, Any] = {
        "InferenceComponentName": f"{endpoint_name}-{name}",
        "EndpointName": endpoint_name,
        "VariantName": VARIANT,
        "Specification": specification,
        "RuntimeConfig": {"CopyCount": c.copies},
    }
    if deployment.tags:
        request["Tags"] = _tags(deployment)
    return request


def llm_endpoint_requests(
    key: str, ep: EndpointSpec, *, endpoint_name: str, deployment: Deployment
) -> dict[str, dict[str, Any]]:
    """'CreateModel' (the endpoint's LLM), 'CreateModel <component>' and 'CreateInferenceComponent
    <component>' for each component, 'CreateEndpointConfig': what the template creates for `ep`."""
    out: dict[str, dict[str, Any]] = {}
    if ep.llm is not None:
        out["CreateModel"] = _model_request(
            ep.llm, ep, deployment, name=model_name(), model_package=ep.model_package
        )
        if ep.shadow is not None:  # the candidate package, served with the production LLM's settings
            out["CreateModel shadow"] = _model_request(
                ep.llm, ep, deployment, name=model_name("shadow"), model_package=ep.shadow.model_package
            )
    for name, c in ep.components.items():
        if c.llm is not None:
            out[f"CreateModel {name}"] = _model_request(
                c.llm, ep, deployment, name=model_name(name), accelerators=c.accelerators
            )
        elif c.model_package is not None:
            workers = c.accelerators or max(1, int(c.cpu_cores))  # the model server's default per copy
            out[f"CreateModel {name}"] = _package_model_request(
                ep, deployment, c.model_package, model_name(name), workers
            )
    out["CreateEndpointConfig"] = _config_request(key, ep, deployment)
    for name, c in ep.components.items():
        out[f"CreateInferenceComponent {name}"] = _component_request(
            name, c, ep, endpoint_name=endpoint_name, deployment=deployment
        )
    return out
