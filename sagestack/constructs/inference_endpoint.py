"""InferenceEndpoint: a SageMaker endpoint serving a model package — a compiled (Neo / Inferentia)
one as registered by a pipeline — real-time, serverless or asynchronous, or several models as
inference components on shared instances; with autoscaling that survives updates, and a guarded
update (blue/green or rolling) that CloudWatch alarms roll back.

Each part is a concept of its own, as in aws-sagemaker-alpha: the model (endpoint_model), the
config and its variant (endpoint_config), asynchronous inference (endpoint_async), the rollout and
its alarms (endpoint_rollout), autoscaling (endpoint_autoscaling) and inference components
(endpoint_components). They add their resources to the endpoint itself, so every construct ID —
and logical ID — stays where it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from aws_cdk import Duration, Tags
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.alarm_actions import notify
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.compliance import acknowledge_compliance
from sagestack.constructs.endpoint_async import AsyncInference, async_topics
from sagestack.constructs.endpoint_autoscaling import AutoScaling, scale_variant
from sagestack.constructs.endpoint_checks import check_props, check_shadow
from sagestack.constructs.endpoint_components import InferenceComponent, inference_component
from sagestack.constructs.endpoint_config import (
    ConfigSource,
    DataCapture,
    ServerlessConfig,
    ShadowVariant,
    rendered_config,
)
from sagestack.constructs.endpoint_llm import LlmModel, grant_llm, llm_model
from sagestack.constructs.endpoint_model import Batching, VpcPlacement, default_workers, serving_model
from sagestack.constructs.endpoint_rollout import Rollout, deployment_config, rollback_alarms
from sagestack.constructs.endpoint_spec import spec_door_props
from sagestack.constructs.endpoint_typed import typed_source
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import validate_as_request
from sagestack.core.names import ENDPOINT_TAG
from sagestack.endpoints.config_request import VARIANT
from sagestack.endpoints.resolved import ResolvedEndpoint

# What bills per endpoint, tagged with it (ENDPOINT_TAG) so its spend is told apart by tag
# (`sagestack cost`), not only by instance type; the rest (alarms, topics, roles) keeps the stack's.
TAGGED_TYPES = (
    "AWS::SageMaker::Endpoint",
    "AWS::SageMaker::EndpointConfig",
    "AWS::SageMaker::Model",
    "AWS::SageMaker::InferenceComponent",
)


class InferenceEndpointBase(Construct):
    """Grants and metrics of an endpoint, created here or imported (`InferenceEndpoint.from_endpoint_name`)."""

    endpoint_name: str
    variant_name: str = VARIANT

    @property
    def endpoint_arn(self) -> str:
        from aws_cdk import Stack

        return Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=self.endpoint_name
        )

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """InvokeEndpoint (and its streaming form) on this endpoint only."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(actions.ENDPOINT_INVOKE), resource_arns=[self.endpoint_arn]
        )

    def metric(
        self,
        metric_name: str,
        *,
        statistic: str = "Average",
        period: Duration | None = None,
        variant_name: str | None = None,
    ) -> cloudwatch.Metric:
        """One of the variant's AWS/SageMaker metrics (per minute unless told); variant_name: another
        variant's, e.g. the shadow's (endpoint_config.SHADOW), beside production's."""
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=metric_name,
            dimensions_map={
                "EndpointName": self.endpoint_name,
                "VariantName": variant_name or self.variant_name,
            },
            statistic=statistic,
            period=period or Duration.minutes(1),
        )

    def metric_model_latency(
        self, *, statistic: str = "p99", period: Duration | None = None
    ) -> cloudwatch.Metric:
        """ModelLatency, in microseconds."""
        return self.metric("ModelLatency", statistic=statistic, period=period)

    def metric_invocation_5xx_errors(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocation5XXErrors", statistic=statistic, period=period)

    def metric_invocation_4xx_errors(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocation4XXErrors", statistic=statistic, period=period)

    def metric_invocations(
        self, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return self.metric("Invocations", statistic=statistic, period=period)


class _ImportedEndpoint(InferenceEndpointBase):
    def __init__(self, scope: Construct, id: str, endpoint_name: str, variant_name: str) -> None:
        super().__init__(scope, id)
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name


class InferenceEndpoint(InferenceEndpointBase):
    """Props:
    endpoint_name: the physical name (callers invoke it by name; see Names.endpoint).
    model_package: the model package ARN to serve (a pipeline's registration, pinned by promotion).
    llm: LlmModel instead of model_package: an LLM container loading uncompressed weights from S3
      (or an optimized package), with its download / start-up timeouts on the variant.
    execution_role: pulls the image and the model (ExecutionRole, or any IRole).
    encryption_key: encrypts the instances' storage volumes (instance fleets; serverless takes none).
    instance_type / initial_instance_count (1): an instance fleet — one type, or up to five in
      priority order (InstancePools: SageMaker provisions from the first with capacity); or
      serverless: ServerlessConfig.
    provision_timeout: how long SageMaker tries the pools (VariantInstanceProvisionTimeoutInSeconds).
    capacity_reservation: a training plan ARN the instances come from only.
    shadow: ShadowVariant (default none): a candidate package receiving a copy of the traffic.
    autoscaling: AutoScaling (instance fleets only; default none). The current instance count is
      kept across updates (RetainAllVariantProperties), so a new model never drops an autoscaled
      fleet back to its initial count; a data capture change still takes effect.
    data_capture: DataCapture (default none).
    rollout: Rollout (default: canary 10 %, 5 min bake, rolled back on any 5XX).
    async_inference: AsyncInference (instance fleets only; default: real-time).
    vpc: VpcPlacement (default: none; the execution role needs VPC access).
    components: InferenceComponent entries instead of model_package: several models on the
      fleet, which managed instance scaling sizes between autoscaling's min and max (0: the fleet
      scales to zero with its components).
    batching: Batching (default none: the container answers one request per forward pass).
    alarm_topic: the topic the endpoint's alarms notify (rollback, waking from zero); default none.
    resolved: the spec path's door — a resolved `endpoints:` entry (ResolvedEndpoint) instead of the
      props from model_package to batching above: the construct builds its parts from the spec
      (constructs/endpoint_spec.py); with `region` (an LLM's image) and `artifacts` (an LLM's
      weights, captured data, async results).
    Either door renders the config as the CreateEndpointConfig request `sagestack render` shows
    (endpoints/config_request.py): the typed props as the spec they mean (constructs/endpoint_typed.py).
    The endpoint, its config, models and components are tagged sagestack:endpoint with the entry's
    key (the typed door: endpoint_name), which `sagestack cost` groups the spend by.
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        model_package: str | None = None,
        llm: LlmModel | None = None,
        execution_role: iam.IRole | iam.IGrantable,
        encryption_key: kms.IKey | None = None,
        instance_type: str | Sequence[str] | None = None,
        initial_instance_count: int = 1,
        provision_timeout: Duration | None = None,
        capacity_reservation: str | None = None,
        shadow: ShadowVariant | None = None,
        serverless: ServerlessConfig | None = None,
        autoscaling: AutoScaling | None = None,
        data_capture: DataCapture | None = None,
        rollout: Rollout | None = None,
        async_inference: AsyncInference | None = None,
        vpc: VpcPlacement | None = None,
        components: Sequence[InferenceComponent] = (),
        batching: Batching | None = None,
        alarm_topic: sns.ITopic | None = None,
        resolved: ResolvedEndpoint | None = None,
        region: str | None = None,
        artifacts: ArtifactBucketBase | None = None,
    ) -> None:
        super().__init__(scope, id)
        shape: dict[str, Any] = {
            "model_package": model_package,
            "llm": llm,
            "instance_type": instance_type,
            "initial_instance_count": initial_instance_count,
            "provision_timeout": provision_timeout,
            "capacity_reservation": capacity_reservation,
            "shadow": shadow,
            "serverless": serverless,
            "autoscaling": autoscaling,
            "data_capture": data_capture,
            "rollout": rollout,
            "async_inference": async_inference,
            "vpc": vpc,
            "components": components,
            "batching": batching,
        }
        self.resolved = resolved
        if resolved is not None:
            shape, source = spec_door_props(endpoint_name, resolved, shape, region, artifacts)
        else:
            source = typed_source(endpoint_name, **shape)
        for config_only in (
            "initial_instance_count",
            "provision_timeout",
            "capacity_reservation",
            "data_capture",
        ):
            del shape[config_only]
        self._build(endpoint_name, execution_role, encryption_key, alarm_topic, source, **shape)
        Tags.of(self).add(ENDPOINT_TAG, source.key, include_resource_types=list(TAGGED_TYPES))

    def _build(
        self,
        endpoint_name: str,
        execution_role: iam.IRole | iam.IGrantable,
        encryption_key: kms.IKey | None,
        alarm_topic: sns.ITopic | None,
        source: ConfigSource,
        *,
        model_package: str | None,
        llm: LlmModel | None,
        instance_type: str | Sequence[str] | None,
        shadow: ShadowVariant | None,
        serverless: ServerlessConfig | None,
        autoscaling: AutoScaling | None,
        rollout: Rollout | None,
        async_inference: AsyncInference | None,
        vpc: VpcPlacement | None,
        components: Sequence[InferenceComponent],
        batching: Batching | None,
    ) -> None:
        types = (instance_type,) if isinstance(instance_type, str) else tuple(instance_type or ())
        check_props(
            endpoint_name, model_package, llm, types, serverless, rollout, async_inference, components
        )
        check_shadow(endpoint_name, shadow, serverless, async_inference, components, rollout)
        role_arn = execution_role.role_arn if hasattr(execution_role, "role_arn") else None
        if role_arn is None:
            raise ValueError("execution_role: give an ExecutionRole or an iam.IRole")
        self.endpoint_name = endpoint_name
        self.instance_types = types
        self.instance_type = types[0] if types else None
        self.serverless = serverless
        self.async_inference = async_inference
        self.shadow = shadow
        self._role = execution_role
        self._role_arn = role_arn
        self._vpc = vpc
        self._batching = batching
        rollout = rollout or Rollout()
        self.model = self._serving_model(model_package, llm)
        self.shadow_model = self._shadow_model(shadow, llm) if shadow else None
        self.success_topic: sns.Topic | None = None
        self.error_topic: sns.Topic | None = None
        if async_inference is not None:
            self._async(async_inference, encryption_key, execution_role)
        self.config = self._config(source, encryption_key)
        self._guard(rollout, alarm_topic)
        fleet = bool(types) and not components  # an instance fleet of one model
        self.endpoint = self._endpoint(
            rollout, retain=autoscaling is not None and fleet, shared=bool(components)
        )
        # The rollback alarms are referenced by name (Ref), which orders them before the endpoint.
        self.scalable_target: appscaling.CfnScalableTarget | None = None
        if autoscaling is not None and fleet:
            self.scalable_target = scale_variant(
                self,
                autoscaling,
                endpoint_name=endpoint_name,
                endpoint=self.endpoint,
                asynchronous=async_inference is not None,
                alarm_topic=alarm_topic,
            )
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {
            c.name: self._component(c, rollout, alarm_topic) for c in components
        }

    def _serving_model(self, model_package: str | None, llm: LlmModel | None) -> sagemaker.CfnModel | None:
        if llm is not None:
            return self._llm_model("Model", llm)
        if model_package is not None:
            return self._model("Model", model_package, default_workers(self.instance_type))
        return None

    def _shadow_model(self, shadow: ShadowVariant, llm: LlmModel | None) -> sagemaker.CfnModel:
        """The candidate's model; a shadow of an LLM is a package (e.g. an optimized one) served
        with the production LLM's environment, downloaded and started within its timeouts."""
        if llm is None:
            return self._model("ShadowModel", shadow.model_package, default_workers(shadow.instance_type))
        candidate = replace(
            llm, image_uri=None, weights_uri=None, model_package=shadow.model_package, volume_size_gb=None
        )
        return self._llm_model("ShadowModel", candidate)

    def _config(self, source: ConfigSource, encryption_key: kms.IKey | None) -> sagemaker.CfnEndpointConfig:
        """The config rendered from `source` (either door's) as `render` shows it."""
        config = rendered_config(
            self,
            source,
            role_arn=self._role_arn,
            kms_key_id=encryption_key.key_arn if encryption_key is not None else "",
            model_name=self.model.attr_model_name if self.model else None,
            shadow_model_name=self.shadow_model.attr_model_name if self.shadow_model else None,
            topics=(self.success_topic.topic_arn, self.error_topic.topic_arn)
            if self.success_topic is not None and self.error_topic is not None
            else None,
        )
        if self.serverless is not None:
            acknowledge_compliance(config, ["SageMakerEndpointConfigurationKMSKeyConfigured"])
        return config

    def _guard(self, rollout: Rollout, alarm_topic: sns.ITopic | None) -> None:
        """The alarms that roll an update back — on the production variant's metrics only, so a
        shadow's errors never roll production back (they show in metric(..., variant_name=SHADOW))."""
        self.alarms = rollback_alarms(
            self,
            rollout,
            endpoint_name=self.endpoint_name,
            errors=self.metric_invocation_5xx_errors(),
            latency=self.metric_model_latency(),  # microseconds
        )
        if alarm_topic is not None:
            for alarm in self.alarms:
                notify(alarm, alarm_topic)

    def _component(
        self, c: InferenceComponent, rollout: Rollout, alarm_topic: sns.ITopic | None
    ) -> sagemaker.CfnInferenceComponent:
        model = (
            self._llm_model(f"Model-{c.name}", c.llm)
            if c.llm is not None
            else self._model(f"Model-{c.name}", c.model_package or "", c.workers)
        )
        return inference_component(
            self,
            c,
            endpoint_name=self.endpoint_name,
            endpoint=self.endpoint,
            model=model,
            rollout=rollout,
            alarms=self.alarms,
            alarm_topic=alarm_topic,
        )

    def _llm_model(self, id: str, llm: LlmModel) -> sagemaker.CfnModel:
        grant_llm(self._role, llm)
        return llm_model(self, id, llm, role_arn=self._role_arn, vpc=self._vpc)

    def _model(self, id: str, model_package: str, workers: int) -> sagemaker.CfnModel:
        return serving_model(
            self,
            id,
            role_arn=self._role_arn,
            model_package=model_package,
            workers=workers,
            batching=self._batching,
            vpc=self._vpc,
        )

    def _async(self, a: AsyncInference, key: kms.IKey | None, role: iam.IRole | iam.IGrantable) -> None:
        """The topics the config's async settings notify: success_topic / error_topic."""
        topics = async_topics(self, a, endpoint_name=self.endpoint_name, key=key, role=role)
        if topics is not None:
            self.success_topic, self.error_topic = topics.success, topics.error

    def _endpoint(self, rollout: Rollout, *, retain: bool, shared: bool) -> sagemaker.CfnEndpoint:
        """The endpoint on the config. retain: a model change keeps the variant's current instance
        count (autoscaling's, not the config's initial one) — RetainAllVariantProperties, except the
        data capture settings, which follow the new config; without autoscaling the config's count
        is the truth. shared: inference components update themselves (their own rolling policy);
        the endpoint's config changes only with the fleet."""
        # Inf1 and serverless endpoints shift all traffic at once (SageMaker's guardrail exclusions).
        all_at_once = self.serverless is not None or any(
            t.startswith("ml.inf1.") for t in self.instance_types
        )
        endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=self.endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            deployment_config=None
            if shared
            else deployment_config(rollout, self.alarms, all_at_once=all_at_once),
            retain_all_variant_properties=True if retain else None,
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type="DataCaptureConfig")
            ]
            if retain
            else None,
        )
        validate_as_request(endpoint, "UpdateEndpoint", drop=("Tags",))
        validate_as_request(
            endpoint,
            "CreateEndpoint",
            drop=("RetainAllVariantProperties", "ExcludeRetainedVariantProperties", "RetainDeploymentConfig"),
        )
        return endpoint

    @staticmethod
    @typed_props
    def from_endpoint_name(
        scope: Construct, id: str, endpoint_name: str, *, variant_name: str = VARIANT
    ) -> InferenceEndpointBase:
        """An endpoint deployed elsewhere: grant invoking it, alarm on its metrics."""
        return _ImportedEndpoint(scope, id, endpoint_name, variant_name)
