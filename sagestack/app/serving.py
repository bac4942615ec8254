"""ServingStack: the endpoints of one environment, each serving the model package its config pins.

Promotion changes the pin (`sagestack promote`), reviewed in git; `cdk deploy` then replaces the
model and endpoint config and moves the endpoint to them by a blue/green update."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Size, Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.app.serving_llm import component_accelerators, llm_model_of
from sagestack.constructs import (
    AsyncInference,
    AutoScaling,
    Batching,
    DataCapture,
    InferenceComponent,
    InferenceEndpoint,
    ModelMonitor,
    Rollout,
    ServerlessConfig,
    ShadowVariant,
    TrainingImage,
    TransformPipeline,
    VpcPlacement,
)
from sagestack.constructs.endpoint_llm import grant_weights_key
from sagestack.endpoints.models import BatchingSpec, ComponentSpec, EndpointSpec
from sagestack.endpoints.resolved import ResolvedEndpoint, resolve_endpoint, resolve_transform_registration
from sagestack.monitoring.models import MonitorSpec
from sagestack.project import ResolvedEnvironment
from sagestack.transforms.models import TransformSpec


def served_endpoints(plan: ResolvedEnvironment) -> list[ResolvedEndpoint]:
    """Endpoints this environment deploys: those with a pinned model package, components, or an
    LLM (its weights are given: it needs no pin)."""
    return [resolve_endpoint(plan, k) for k, ep in plan.spec.endpoints.items() if is_served(ep)]


def is_served(ep: EndpointSpec) -> bool:
    """Whether an `endpoints:` entry deploys in its environment (stage.serving_needed asks too)."""
    return ep.deploy and bool(ep.model_package or ep.components or ep.llm)


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


def endpoint_props(spec: EndpointSpec, *, region: str = "", bucket_name: str = "") -> dict[str, Any]:
    """An `endpoints:` entry as InferenceEndpoint props (the capture target and role come from the
    foundation; an LLM's image from `region`, its weights from `bucket_name` unless an s3:// URI)."""
    r = spec.rollout
    a = spec.autoscaling
    types = list(spec.instance_type or ())
    return {
        "instance_type": types or None,
        "initial_instance_count": spec.initial_instance_count,
        "provision_timeout": Duration.seconds(spec.provision_timeout) if spec.provision_timeout else None,
        "capacity_reservation": spec.capacity_reservation,
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
        "batching": batching_of(spec.batching) if spec.batching else None,
        "vpc": VpcPlacement(
            subnet_ids=tuple(spec.vpc.subnets), security_group_ids=tuple(spec.vpc.security_groups)
        )
        if spec.vpc
        else None,
        "components": [
            component_of(name, c, region=region, instance_types=types, bucket_name=bucket_name)
            for name, c in spec.components.items()
        ],
        "rollout": Rollout(
            traffic=r.traffic,
            step_percent=r.batch_percent if r.traffic == "rolling" else r.canary_percent,
            wait=Duration.seconds(r.wait),
            termination_wait=Duration.seconds(r.termination_wait),
            max_5xx_errors=r.max_5xx_errors,
            max_latency=Duration.millis(r.max_latency_ms) if r.max_latency_ms is not None else None,
        ),
    }


def component_of(
    name: str, c: ComponentSpec, *, region: str, instance_types: Sequence[str], bucket_name: str
) -> InferenceComponent:
    """A `components:` entry as an InferenceComponent: an LLM's copy spans the tensor-parallel
    degree's accelerators (unless `accelerators` says otherwise) and starts within its timeouts."""
    llm = (
        llm_model_of(
            c.llm,
            region=region,
            instance_types=instance_types,
            bucket_name=bucket_name,
            accelerators=c.accelerators,
            volume=False,
        )
        if c.llm and instance_types
        else None
    )
    accelerators = (
        component_accelerators(c.llm, instance_types[0], c.accelerators)
        if c.llm and instance_types
        else c.accelerators
    )
    return InferenceComponent(
        name=name,
        model_package=c.model_package,
        llm=llm,
        memory=Size.mebibytes(c.memory_mb),
        cpu_cores=c.cpu_cores,
        accelerators=accelerators,
        copies=c.copies,
        max_copies=c.max_copies,
        min_copies=c.min_copies,
        invocations_per_copy=c.invocations_per_copy,
    )


class ServingStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: ResolvedEnvironment,
        foundation: FoundationStack,
        project_root: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self._plan = plan
        self._foundation = foundation
        self.endpoints: dict[str, InferenceEndpoint] = {}
        self.monitors: dict[str, ModelMonitor] = {}
        self.topic: sns.Topic | None = None
        for ep in served_endpoints(plan):
            self.endpoints[ep.key] = self._endpoint(ep)
            CfnOutput(self, f"EndpointName{ep.key.replace('-', '').replace('_', '')}", value=ep.endpoint_name)
            if ep.spec.monitor is not None:
                self.monitors[ep.key] = self._monitor(ep, ep.spec.monitor)
            self._grant_serving(ep)
        # Pinned transforms: each its own pipeline, started by `sagestack run TRANSFORM`; the
        # training pipeline of a transform's model runs the others.
        self.transforms: dict[str, TransformPipeline] = {
            key: self._transform(key, t) for key, t in plan.spec.transforms.items() if t.model_package
        }

    def _endpoint(self, ep: ResolvedEndpoint) -> InferenceEndpoint:
        foundation = self._foundation
        capture = ep.spec.data_capture
        asynchronous = ep.spec.async_
        return InferenceEndpoint(
            self,
            f"Endpoint-{ep.key}",
            endpoint_name=ep.endpoint_name,
            execution_role=foundation.execution_role,
            encryption_key=foundation.key,
            data_capture=DataCapture(
                artifacts=foundation.artifacts,
                sampling_percentage=capture.sampling_percent,
                folder=ep.key,
            )
            if capture
            else None,
            async_inference=AsyncInference(
                artifacts=foundation.artifacts,
                max_concurrent_invocations_per_instance=asynchronous.max_concurrent_invocations_per_instance,
                notify=asynchronous.notify,
                include_response_in_notification=asynchronous.include_response_in_notification,
                folder=ep.key,
            )
            if asynchronous
            else None,
            alarm_topic=self._topic(self._plan, foundation),
            **endpoint_props(ep.spec, region=self._plan.region, bucket_name=foundation.artifacts.bucket_name),
        )

    def _monitor(self, ep: ResolvedEndpoint, monitor: MonitorSpec) -> ModelMonitor:
        plan, foundation = self._plan, self._foundation
        return ModelMonitor(
            self,
            f"Monitor-{ep.key}",
            endpoint=self.endpoints[ep.key],
            endpoint_key=ep.key,
            names=plan.names,
            execution_role=foundation.execution_role,
            artifacts=foundation.artifacts,
            encryption_key=foundation.key,
            baseline_data=monitor.baseline_data,
            dataset_format=monitor.dataset_format,
            csv_header=monitor.csv_header,
            schedule=monitor.schedule,
            instance_type=monitor.instance_type,
            max_runtime=Duration.seconds(monitor.max_runtime),
            alarm_features=monitor.alarm_features,
            drift_threshold=monitor.drift_threshold,
            topic=self._topic(plan, foundation),
            poll_interval=Duration.seconds(plan.spec.pipeline.poll_interval),
            region=plan.region,
        )

    def _grant_serving(self, ep: ResolvedEndpoint) -> None:
        """The role pulls the endpoint's image and decrypts LLM weights kept in another bucket under
        their own key (weights.kms_key). Every pinned package is the environment's own (rule
        pin-own-account): its model lies in the environment's bucket, which the role reads already."""
        role = self._foundation.execution_role
        if ep.image_uri:
            TrainingImage.from_registry(ep.image_uri).grant_pull(role)
        spec = ep.spec
        llms = [spec.llm] if spec.llm is not None and not spec.model_package else []
        llms += [c.llm for c in spec.components.values() if c.llm is not None and not c.model_package]
        for key_arn in sorted({llm.weights.kms_key for llm in llms if llm.weights.kms_key}):
            grant_weights_key(role, key_arn)

    def _transform(self, key: str, t: TransformSpec) -> TransformPipeline:
        plan, foundation = self._plan, self._foundation
        assert t.model_package is not None
        pipeline = TransformPipeline(
            self,
            f"Transform-{key}",
            names=plan.names,
            transform=key,
            model_package=t.model_package,
            instance_types=t.instance_type,
            instance_count=t.instance_count,
            execution_role=foundation.execution_role,
            artifacts=foundation.artifacts,
            encryption_key=foundation.key,
            options=transform_options(t),
            poll_interval=Duration.seconds(plan.spec.pipeline.poll_interval),
            quota_codes=plan.files.quota_codes,
            tags=plan.tags,
            topic=self._topic(plan, foundation),
        )
        if t.model is not None:
            # The image a pipeline registers the model with (a promoted copy keeps it): pulled by the
            # role in this account too, as an endpoint's is.
            image = resolve_transform_registration(plan, key).image_uri
            TrainingImage.from_registry(image).grant_pull(foundation.execution_role)
        return pipeline

    def _topic(self, plan: ResolvedEnvironment, foundation: FoundationStack) -> sns.Topic:
        """What the serving side's alarms notify (rollback, waking from zero, drift, a failed
        transform) and the baseline's notifications (made when first needed)."""
        if self.topic is None:
            self.topic = foundation.notifications(self, f"sagestack {plan.names.prefix} serving")
        return self.topic


def transform_options(t: TransformSpec) -> dict[str, Any]:
    """A `transforms:` entry's keys that TransformPipeline takes as options."""
    return t.model_dump(
        mode="json",
        exclude={"model", "model_package", "instance_type", "instance_count"},
        exclude_defaults=True,
    )
