"""An endpoint's configuration (AWS::SageMaker::EndpointConfig; aws-sagemaker-alpha's
endpoint-config.ts): its one production variant — an instance fleet (of one type, or several
instance pools in priority order), serverless, or the shared fleet of inference components — a
shadow variant that receives a copy of the traffic, and what it captures: the props' types, and the
L1 built from the CreateEndpointConfig request rendered once (endpoints/config_request.py) for
both of InferenceEndpoint's doors."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Size
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.validation import token_deployment, validate_as_request
from sagestack.endpoints.config_request import SHADOW, Placement, endpoint_config_request
from sagestack.endpoints.models import EndpointSpec

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


@dataclass(frozen=True)
class ConfigSource:
    """What an endpoint's config is rendered from (endpoints/config_request.py), on either door:
    the spec under `key` — an `endpoints:` entry, or the typed props as one
    (constructs/endpoint_typed.py) — with the placement of the props' own values (None: the spec's)
    and the deployment's artifact bucket and region (None: the stack's)."""

    key: str
    spec: EndpointSpec
    placement: Placement | None = None
    bucket: str = ""
    region: str | None = None


def rendered_config(
    scope: Construct,
    source: ConfigSource,
    *,
    role_arn: str,
    kms_key_id: str,
    model_name: str | None,
    shadow_model_name: str | None,
    topics: tuple[str, str] | None,
) -> Config:
    """The config: the CreateEndpointConfig request `render` shows, rendered with the deployment's
    tokens (the role, the bucket, the key) and the names CloudFormation gives the models and
    topics."""
    deployment = token_deployment(
        scope, role_arn=role_arn, bucket=source.bucket, kms_key_id=kms_key_id, region=source.region
    )
    request = endpoint_config_request(
        source.key,
        source.spec,
        deployment,
        model_name=model_name,
        shadow_model_name=shadow_model_name,
        topics=topics,
        placement=source.placement,
    )
    return config_from_request(scope, request)


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
