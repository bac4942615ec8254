"""The spec path's door into InferenceEndpoint: a resolved `endpoints:` entry (ResolvedEndpoint) as
the parts the construct builds besides its config — the model (a pinned package, or an LLM hosted
as llm/hosting.py says), the shadow, components, autoscaling, batching, VPC, data capture, async
inference and the rollout. The endpoint config itself is not translated: the construct renders it
from the spec (endpoints/config_request.py, `ConfigSource`), as `sagestack render` does.

`batching_of` is the one spelling of `batching:` as the Batching prop (bench/serve.py uses it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Duration, Size

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.endpoint_async import AsyncInference
from sagestack.constructs.endpoint_autoscaling import AutoScaling
from sagestack.constructs.endpoint_components import InferenceComponent
from sagestack.constructs.endpoint_config import ConfigSource, DataCapture, ServerlessConfig, ShadowVariant
from sagestack.constructs.endpoint_llm import LlmModel
from sagestack.constructs.endpoint_model import Batching, VpcPlacement
from sagestack.constructs.endpoint_rollout import Rollout
from sagestack.endpoints.models import BatchingSpec, ComponentSpec, EndpointSpec
from sagestack.endpoints.resolved import ResolvedEndpoint
from sagestack.llm.hosting import llm_hosting
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import accelerator_devices


def batching_of(b: BatchingSpec) -> Batching:
    """An endpoint's `batching:` as the construct's Batching prop."""
    return Batching(
        max_batch_size=b.max_batch_size,
        max_delay=Duration.millis(b.max_delay_ms),
        workers=b.workers,
        threads_per_worker=b.threads_per_worker,
        response_timeout=Duration.seconds(b.response_timeout),
        handler="inference:handle" if b.handler == "batched" else None,
    )


def _seconds(value: int | None) -> Duration | None:
    return Duration.seconds(value) if value is not None else None


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
    """`spec` hosted (llm/hosting.py) as the LlmModel prop."""
    hosted = llm_hosting(
        spec,
        region=region,
        instance_types=instance_types,
        bucket_name=bucket_name,
        accelerators=accelerators,
        model_package=model_package,
        volume=volume,
    )
    return LlmModel(
        image_uri=hosted.image_uri,
        weights_uri=hosted.weights_uri,
        environment=hosted.environment,
        model_package=hosted.model_package,
        download_timeout=_seconds(hosted.download_timeout),
        startup_timeout=_seconds(hosted.startup_timeout),
        volume_size_gb=hosted.volume_size_gb,
    )


def component_of(
    name: str, c: ComponentSpec, *, region: str, instance_types: Sequence[str], bucket_name: str
) -> InferenceComponent:
    """A `components:` entry: an LLM's copy spans the tensor-parallel degree's accelerators (GPUs,
    or Neuron devices: the degree counts NeuronCores; unless `accelerators` says otherwise) and
    starts within its timeouts."""
    hosted = c.llm is not None and bool(instance_types)
    return InferenceComponent(
        name=name,
        model_package=c.model_package,
        llm=llm_model_of(
            c.llm,
            region=region,
            instance_types=instance_types,
            bucket_name=bucket_name,
            accelerators=c.accelerators,
            volume=False,
        )
        if c.llm is not None and hosted
        else None,
        memory=Size.mebibytes(c.memory_mb),
        cpu_cores=c.cpu_cores,
        accelerators=accelerator_devices(c.llm, instance_types[0], c.accelerators)
        if c.llm is not None and hosted
        else c.accelerators,
        copies=c.copies,
        max_copies=c.max_copies,
        min_copies=c.min_copies,
        invocations_per_copy=c.invocations_per_copy,
    )


def _fleet(spec: EndpointSpec, types: list[str], region: str, bucket_name: str) -> dict[str, Any]:
    """What runs on the instances: the model (a package, or an LLM), its shadow, the components."""
    return {
        "shadow": ShadowVariant(
            model_package=spec.shadow.model_package,
            instance_type=spec.shadow.instance_type or types[0],
            initial_instance_count=spec.shadow.initial_instance_count,
            sampling_percent=spec.shadow.sampling_percent,
        )
        if spec.shadow and types
        else None,
        "llm": llm_model_of(
            spec.llm,
            region=region,
            instance_types=types,
            bucket_name=bucket_name,
            model_package=spec.model_package,
        )
        if spec.llm and types
        else None,
        "model_package": None if spec.llm else spec.model_package,
        "components": [
            component_of(name, c, region=region, instance_types=types, bucket_name=bucket_name)
            for name, c in spec.components.items()
        ],
    }


def endpoint_props_of(
    endpoint: ResolvedEndpoint, *, region: str, artifacts: ArtifactBucketBase
) -> dict[str, Any]:
    """The InferenceEndpoint props `endpoint`'s spec means: an LLM's image from `region`, its weights
    (unless an s3:// URI), the captured data and async results in `artifacts`."""
    spec = endpoint.spec
    types = list(spec.instance_type or ())
    r, a, asynchronous = spec.rollout, spec.autoscaling, spec.async_
    return {
        **_fleet(spec, types, region, artifacts.bucket_name),
        "instance_type": types or None,
        "initial_instance_count": spec.initial_instance_count,
        "provision_timeout": _seconds(spec.provision_timeout) if spec.provision_timeout else None,
        "capacity_reservation": spec.capacity_reservation,
        "serverless": ServerlessConfig(
            memory_size=Size.mebibytes(spec.serverless.memory_mb),
            max_concurrency=spec.serverless.max_concurrency,
        )
        if spec.serverless
        else None,
        "autoscaling": AutoScaling(
            min_capacity=a.min,
            max_capacity=a.max,
            invocations_per_instance=a.invocations_per_instance,
            backlog_per_instance=a.backlog_per_instance,
            scale_in_cooldown=Duration.seconds(a.scale_in_cooldown),
            scale_out_cooldown=Duration.seconds(a.scale_out_cooldown),
        )
        if a
        else None,
        "data_capture": DataCapture(
            artifacts=artifacts, sampling_percentage=spec.data_capture.sampling_percent, folder=endpoint.key
        )
        if spec.data_capture
        else None,
        "async_inference": AsyncInference(
            artifacts=artifacts,
            max_concurrent_invocations_per_instance=asynchronous.max_concurrent_invocations_per_instance,
            notify=asynchronous.notify,
            include_response_in_notification=asynchronous.include_response_in_notification,
            folder=endpoint.key,
        )
        if asynchronous
        else None,
        "batching": batching_of(spec.batching) if spec.batching else None,
        "vpc": VpcPlacement(
            subnet_ids=tuple(spec.vpc.subnets), security_group_ids=tuple(spec.vpc.security_groups)
        )
        if spec.vpc
        else None,
        "rollout": Rollout(
            traffic=r.traffic,
            step_percent=r.batch_percent if r.traffic == "rolling" else r.canary_percent,
            wait=Duration.seconds(r.wait),
            termination_wait=Duration.seconds(r.termination_wait),
            max_5xx_errors=r.max_5xx_errors,
            max_latency=Duration.millis(r.max_latency_ms) if r.max_latency_ms is not None else None,
        ),
    }


def spec_door_props(
    endpoint_name: str,
    resolved: ResolvedEndpoint,
    shape: dict[str, Any],
    region: str | None,
    artifacts: ArtifactBucketBase | None,
) -> tuple[dict[str, Any], ConfigSource]:
    """The props `resolved`'s spec means (constructs/endpoint_spec.py), refused beside any of them,
    and the source its config is rendered from: the spec itself, in `artifacts`' bucket."""
    defaults: dict[str, Any] = {"initial_instance_count": 1, "components": ()}
    given = [k for k, v in shape.items() if v is not None and v != defaults.get(k)]
    if given:
        raise ValueError(
            f"endpoint '{endpoint_name}': resolved is the whole endpoint; drop {', '.join(given)}"
        )
    if region is None or artifacts is None:
        raise ValueError(f"endpoint '{endpoint_name}': resolved needs region and artifacts")
    source = ConfigSource(resolved.key, resolved.spec, bucket=artifacts.bucket_name, region=region)
    return endpoint_props_of(resolved, region=region, artifacts=artifacts), source
