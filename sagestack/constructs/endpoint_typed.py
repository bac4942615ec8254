"""The typed props' door into InferenceEndpoint's config: a library user's props (instance types,
pools, shadow, serverless, autoscaling, capture, async, components, an LLM) as the EndpointSpec
an `endpoints:` entry would be and the Placement of what the props give as values (an LlmModel's
timeouts and volume, the shadow's name, each part's bucket, folder and key) — so the config is
rendered by endpoints/config_request.py for both doors, as `sagestack render` shows it.

The spec is built unvalidated (`model_construct`), as the deployment's tokens are: a prop may be
a CloudFormation token (a model package or training plan ARN from a parameter), and the props'
judge stays botocore's model, which the rendered request is validated against at synth with
stand-ins for the tokens (constructs/validation.py). It holds what CreateEndpointConfig reads;
an LLM (an LlmModel has no spec form) reaches the config through the Placement's hosting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.endpoint_async import AsyncInference
from sagestack.constructs.endpoint_autoscaling import AutoScaling
from sagestack.constructs.endpoint_components import InferenceComponent
from sagestack.constructs.endpoint_config import ConfigSource, DataCapture, ServerlessConfig, ShadowVariant
from sagestack.constructs.endpoint_llm import LlmModel
from sagestack.endpoints.config_request import SHADOW, Hosting, Placement, Storage
from sagestack.endpoints.models import (
    AsyncSpec,
    AutoscalingSpec,
    ComponentSpec,
    DataCaptureSpec,
    EndpointSpec,
    ServerlessSpec,
)
from sagestack.llm.models import ShadowSpec


def _seconds(d: Duration | None) -> int | None:
    return int(d.to_seconds()) if d is not None else None


def _storage(artifacts: ArtifactBucketBase, prefix: str, folder: str) -> Storage:
    """<prefix>/<folder> in `artifacts`, encrypted with the bucket's key."""
    key = artifacts.encryption_key
    return Storage(artifacts.s3_uri(prefix, folder), key.key_arn if key is not None else None)


def _component(c: InferenceComponent) -> ComponentSpec:
    """A component as its spec (an LLM's model stays the construct's: the config reads neither)."""
    return ComponentSpec.model_construct(
        model_package=c.model_package,
        copies=c.copies,
        max_copies=c.max_copies,
        invocations_per_copy=c.invocations_per_copy,
        min_copies=c.min_copies,
        cpu_cores=c.cpu_cores,
        memory_mb=int(c.memory.to_mebibytes()),
        accelerators=c.accelerators,
    )


def _autoscaling(a: AutoScaling) -> AutoscalingSpec:
    return AutoscalingSpec.model_construct(
        min=a.min_capacity,
        max=a.max_capacity,
        invocations_per_instance=a.invocations_per_instance,
        backlog_per_instance=a.backlog_per_instance,
        scale_in_cooldown=_seconds(a.scale_in_cooldown),
        scale_out_cooldown=_seconds(a.scale_out_cooldown),
    )


def _shadow(s: ShadowVariant) -> ShadowSpec:
    return ShadowSpec.model_construct(
        model_package=s.model_package,
        sampling_percent=s.sampling_percent,
        instance_type=s.instance_type,
        initial_instance_count=s.initial_instance_count,
    )


def typed_source(
    endpoint_name: str,
    *,
    model_package: str | None,
    llm: LlmModel | None,
    instance_type: str | Sequence[str] | None,
    initial_instance_count: int,
    provision_timeout: Duration | None,
    capacity_reservation: str | None,
    shadow: ShadowVariant | None,
    serverless: ServerlessConfig | None,
    autoscaling: AutoScaling | None,
    data_capture: DataCapture | None,
    async_inference: AsyncInference | None,
    components: Sequence[InferenceComponent],
    **_parts: Any,  # the rollout, VPC and batching: the model's and the endpoint's, not the config's
) -> ConfigSource:
    """The typed props as the config's source: the spec they mean and their placement."""
    types = [instance_type] if isinstance(instance_type, str) else list(instance_type or ())
    a = async_inference
    spec = EndpointSpec.model_construct(
        model_package=model_package,
        instance_type=types or None,
        initial_instance_count=initial_instance_count,
        provision_timeout=_seconds(provision_timeout),
        capacity_reservation=capacity_reservation,
        shadow=_shadow(shadow) if shadow is not None else None,
        serverless=ServerlessSpec.model_construct(
            memory_mb=int(serverless.memory_size.to_mebibytes()), max_concurrency=serverless.max_concurrency
        )
        if serverless is not None
        else None,
        autoscaling=_autoscaling(autoscaling) if autoscaling is not None else None,
        data_capture=DataCaptureSpec.model_construct(sampling_percent=data_capture.sampling_percentage)
        if data_capture is not None
        else None,
        async_=AsyncSpec.model_construct(
            max_concurrent_invocations_per_instance=a.max_concurrent_invocations_per_instance,
            notify=a.notify,
            include_response_in_notification=a.include_response_in_notification,
        )
        if a is not None
        else None,
        components={c.name: _component(c) for c in components},
    )
    placement = Placement(
        hosting=Hosting(_seconds(llm.download_timeout), _seconds(llm.startup_timeout), llm.volume_size_gb)
        if llm is not None and not components
        else None,
        shadow_name=shadow.variant_name if shadow is not None else SHADOW,
        capture=_storage(data_capture.artifacts, "capture", data_capture.folder or endpoint_name)
        if data_capture is not None
        else None,
        async_output=_storage(a.artifacts, "async", a.folder or endpoint_name) if a is not None else None,
    )
    return ConfigSource(endpoint_name, spec, placement)
