"""ServingStack: the endpoints of one environment, each serving the model package its config pins.

Promotion changes the pin (`sagestack promote`), reviewed in git; `cdk deploy` then replaces the
model and endpoint config and moves the endpoint to them by a blue/green update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.app.foundation import FoundationStack
from sagestack.constructs import (
    InferenceEndpoint,
    ModelMonitor,
    TrainingImage,
    TransformPipeline,
)
from sagestack.constructs.endpoint_llm import grant_weights_key
from sagestack.endpoints.models import EndpointSpec
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
        """The endpoint through the spec path's door: the construct builds its parts and renders its
        config from the resolved entry itself (the request `sagestack render` shows)."""
        foundation = self._foundation
        return InferenceEndpoint(
            self,
            f"Endpoint-{ep.key}",
            endpoint_name=ep.endpoint_name,
            execution_role=foundation.execution_role,
            encryption_key=foundation.key,
            alarm_topic=self._topic(self._plan, foundation),
            resolved=ep,
            region=self._plan.region,
            artifacts=foundation.artifacts,
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
