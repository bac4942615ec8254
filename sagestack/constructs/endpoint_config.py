"""An endpoint's configuration (AWS::SageMaker::EndpointConfig; aws-sagemaker-alpha's
endpoint-config.ts): its one production variant — an instance fleet, serverless, or the shared
fleet of inference components — and what it captures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import Size
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.validation import validate_as_request

if TYPE_CHECKING:
    from sagestack.constructs.endpoint_autoscaling import AutoScaling

VARIANT = "AllTraffic"  # blue/green updates need the same variant name in the old and new config
Config = sagemaker.CfnEndpointConfig


@dataclass(frozen=True)
class ServerlessConfig:
    """A serverless endpoint: memory (1-6 GiB in 1 GiB steps) and concurrent invocations (1-200)."""

    memory_size: Size
    max_concurrency: int = 5


@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses under the artifact bucket's capture/<endpoint>/ prefix."""

    artifacts: ArtifactBucketBase
    sampling_percentage: int = 100
    folder: str | None = None  # under capture/ (default: the endpoint's name)


def production_variant(
    *,
    model_name: str | None,
    instance_type: str | None,
    initial_instance_count: int,
    serverless: ServerlessConfig | None,
    autoscaling: AutoScaling | None,
    shared: bool,
) -> Config.ProductionVariantProperty:
    """The variant: `model_name` on an instance fleet or serverless; or (shared) a fleet the
    inference components share, which managed instance scaling sizes between autoscaling's min and max."""
    return Config.ProductionVariantProperty(
        variant_name=VARIANT,
        model_name=model_name,
        initial_variant_weight=None if shared else 1.0,
        initial_instance_count=initial_instance_count if instance_type else None,
        instance_type=instance_type,
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
        kms_key_id=kms_key_id,
        data_capture_config=data_capture,
        async_inference_config=async_inference,
        execution_role_arn=execution_role_arn,
    )
    validate_as_request(
        config, "CreateEndpointConfig", add={"EndpointConfigName": "generated-by-cloudformation"}
    )
    return config
