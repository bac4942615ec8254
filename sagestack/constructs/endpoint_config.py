"""An endpoint's configuration (AWS::SageMaker::EndpointConfig; aws-sagemaker-alpha's
endpoint-config.ts): its one production variant — an instance fleet (of one type, or several
instance pools in priority order), serverless, or the shared fleet of inference components — a
shadow variant that receives a copy of the traffic, and what it captures."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Duration, Size
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.endpoint_llm import LlmModel
from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.validation import validate_as_request
from sagestack.endpoints.config_request import SHADOW, VARIANT

if TYPE_CHECKING:
    from sagestack.constructs.endpoint_autoscaling import AutoScaling

Config = sagemaker.CfnEndpointConfig


@typed_fields
@dataclass(frozen=True)
class ServerlessConfig:
    """A serverless endpoint: memory (1-6 GiB in 1 GiB steps) and concurrent invocations (1-200)."""

    memory_size: Size
    max_concurrency: int = 5


@typed_fields
@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses under the artifact bucket's capture/<endpoint>/ prefix."""

    artifacts: ArtifactBucketBase
    sampling_percentage: int = 100
    folder: str | None = None  # under capture/ (default: the endpoint's name)


@typed_fields
@dataclass(frozen=True)
class InstancePools:
    """Several instance types for one variant, in priority order (InstancePools, Priority 1..n):
    SageMaker provisions from the first with capacity, trying each for `provision_timeout`
    (VariantInstanceProvisionTimeoutInSeconds, 300-3600 s). capacity_reservation: a training plan
    (or ML reservation) ARN the instances come from only (capacity-reservations-only)."""

    instance_types: tuple[str, ...]
    provision_timeout: Duration | None = None
    capacity_reservation: str | None = None


@typed_fields
@dataclass(frozen=True)
class ShadowVariant:
    """A shadow variant (ShadowProductionVariants): `model_package` on its own instances receives a
    copy of `sampling_percent` of the production requests; its answers are logged, never returned."""

    model_package: str
    instance_type: str
    initial_instance_count: int = 1
    sampling_percent: int = 100
    variant_name: str = SHADOW


def production_variant(
    *,
    model_name: str | None,
    instance_type: str | None,
    initial_instance_count: int,
    serverless: ServerlessConfig | None,
    autoscaling: AutoScaling | None,
    shared: bool,
    pools: InstancePools | None = None,
    llm: LlmModel | None = None,
) -> Config.ProductionVariantProperty:
    """The variant: `model_name` on an instance fleet or serverless; or (shared) a fleet the
    inference components share, which managed instance scaling sizes between autoscaling's min and
    max. pools: two or more types replace InstanceType with InstancePools ("replace the
    InstanceType parameter in your production variant with an InstancePools list": SageMaker's
    realtime-endpoints-heterogeneous). llm: the model's download and start-up timeouts and volume."""
    types = pools.instance_types if pools else ((instance_type,) if instance_type else ())
    pooled = len(types) >= 2
    reservation = pools.capacity_reservation if pools else None
    timeouts = llm if llm is not None and not shared else None  # components start their own
    return Config.ProductionVariantProperty(
        variant_name=VARIANT,
        model_name=model_name,
        initial_variant_weight=None if shared else 1.0,
        initial_instance_count=initial_instance_count if types else None,
        instance_type=None if pooled else (types[0] if types else None),
        instance_pools=[
            Config.InstancePoolProperty(instance_type=t, priority=i) for i, t in enumerate(types, 1)
        ]
        if pooled
        else None,
        variant_instance_provision_timeout_in_seconds=int(pools.provision_timeout.to_seconds())
        if pools and pools.provision_timeout
        else None,
        capacity_reservation_config=Config.CapacityReservationConfigProperty(
            capacity_reservation_preference="capacity-reservations-only", ml_reservation_arn=reservation
        )
        if reservation
        else None,
        model_data_download_timeout_in_seconds=_seconds(timeouts.download_timeout) if timeouts else None,
        container_startup_health_check_timeout_in_seconds=_seconds(timeouts.startup_timeout)
        if timeouts
        else None,
        volume_size_in_gb=llm.volume_size_gb if llm is not None else None,
        serverless_config=Config.ServerlessConfigProperty(
            memory_size_in_mb=int(serverless.memory_size.to_mebibytes()),
            max_concurrency=serverless.max_concurrency,
        )
        if serverless
        else None,
        managed_instance_scaling=Config.ManagedInstanceScalingProperty(
            status="ENABLED",
            min_instance_count=autoscaling.min_capacity if autoscaling else initial_instance_count,
            max_instance_count=autoscaling.max_capacity if autoscaling else initial_instance_count,
        )
        if shared
        else None,
        routing_config=Config.RoutingConfigProperty(routing_strategy="LEAST_OUTSTANDING_REQUESTS")
        if shared
        else None,
    )


def _seconds(d: Duration | None) -> int | None:
    return int(d.to_seconds()) if d is not None else None


def shadow_variant(
    shadow: ShadowVariant, model_name: str, llm: LlmModel | None = None
) -> Config.ProductionVariantProperty:
    """The shadow: its weight against production's 1.0 is the share of requests copied to it; a
    shadow of an LLM downloads and starts within the production LLM's timeouts."""
    return Config.ProductionVariantProperty(
        variant_name=shadow.variant_name,
        model_name=model_name,
        initial_instance_count=shadow.initial_instance_count,
        instance_type=shadow.instance_type,
        initial_variant_weight=shadow.sampling_percent / 100,
        model_data_download_timeout_in_seconds=_seconds(llm.download_timeout) if llm else None,
        container_startup_health_check_timeout_in_seconds=_seconds(llm.startup_timeout) if llm else None,
    )


def data_capture_config(capture: DataCapture, endpoint_name: str) -> Config.DataCaptureConfigProperty:
    """Requests and responses (JSON as text), encrypted with the bucket's key."""
    artifacts = capture.artifacts
    return Config.DataCaptureConfigProperty(
        enable_capture=True,
        initial_sampling_percentage=capture.sampling_percentage,
        destination_s3_uri=artifacts.s3_uri("capture", capture.folder or endpoint_name),
        kms_key_id=artifacts.encryption_key.key_arn if artifacts.encryption_key else None,
        capture_options=[
            Config.CaptureOptionProperty(capture_mode="Input"),
            Config.CaptureOptionProperty(capture_mode="Output"),
        ],
        capture_content_type_header=Config.CaptureContentTypeHeaderProperty(
            json_content_types=["application/json"]
        ),
    )


def endpoint_config(
    scope: Construct,
    *,
    variant: Config.ProductionVariantProperty,
    shadow: Config.ProductionVariantProperty | None = None,
    kms_key_id: str | None,
    data_capture: Config.DataCaptureConfigProperty | None,
    async_inference: Config.AsyncInferenceConfigProperty | None,
    execution_role_arn: str | None,
) -> Config:
    """The config (no explicit name: a new pin replaces it), validated as CreateEndpointConfig."""
    config = Config(
        scope,
        "Config",
        production_variants=[variant],
        shadow_production_variants=[shadow] if shadow is not None else None,
        kms_key_id=kms_key_id,
        data_capture_config=data_capture,
        async_inference_config=async_inference,
        execution_role_arn=execution_role_arn,
    )
    validate_as_request(
        config, "CreateEndpointConfig", add={"EndpointConfigName": "generated-by-cloudformation"}
    )
    return config


def _words(name: str) -> list[str]:
    """A CloudFormation name's words: VolumeSizeInGB -> volume size in gb, S3OutputPath -> s3 output path."""
    return re.sub(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])", r"\1\3_\2\4", name).lower().split("_")


def _jsii(value: Any) -> Any:
    """A request's value as jsii takes a struct: its keys in camelCase (variantName, volumeSizeInGb)."""
    if isinstance(value, dict):
        return {
            (w := _words(k))[0] + "".join(p.capitalize() for p in w[1:]): _jsii(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_jsii(v) for v in value]
    return value


def config_from_request(scope: Construct, request: dict[str, Any]) -> Config:
    """The config of a CreateEndpointConfig request rendered by endpoints/config_request.py (the spec
    path: `render` shows the same request), validated as that request again at synth."""
    props = {"_".join(_words(k)): _jsii(v) for k, v in request.items()}
    config = Config(scope, "Config", **props)
    validate_as_request(
        config, "CreateEndpointConfig", add={"EndpointConfigName": "generated-by-cloudformation"}
    )
    return config
