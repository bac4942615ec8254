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

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.alarm_actions import notify
from sagestack.constructs.compliance import acknowledge_compliance
from sagestack.constructs.endpoint_async import AsyncInference, async_inference_config
from sagestack.constructs.endpoint_autoscaling import AutoScaling, scale_variant
from sagestack.constructs.endpoint_components import InferenceComponent, inference_component
from sagestack.constructs.endpoint_config import (
    VARIANT,
    DataCapture,
    ServerlessConfig,
    data_capture_config,
    endpoint_config,
    production_variant,
)
from sagestack.constructs.endpoint_model import Batching, VpcPlacement, default_workers, serving_model
from sagestack.constructs.endpoint_rollout import Rollout, deployment_config, rollback_alarms
from sagestack.constructs.validation import validate_as_request


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
        self, metric_name: str, *, statistic: str = "Average", period: Duration | None = None
    ) -> cloudwatch.Metric:
        """One of the variant's AWS/SageMaker metrics (per minute unless told)."""
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": self.variant_name},
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
    execution_role: pulls the image and the model (ExecutionRole, or any IRole).
    encryption_key: encrypts the instances' storage volumes (instance fleets; serverless takes none).
    instance_type / initial_instance_count (1): an instance fleet; or serverless: ServerlessConfig.
    autoscaling: AutoScaling (instance fleets only; default none). The current instance count is
      kept across updates (RetainAllVariantProperties), so a new model never drops an autoscaled
      fleet back to its initial count; a data capture change still takes effect.
    data_capture: DataCapture (default none).
    rollout: Rollout (default: canary 10 %, 5 min bake, rolled back on any 5XX).
    async_inference: AsyncInference (instance fleets only; default: real-time).
    vpc: VpcPlacement (default: none; the execution role needs VPC access).
    components: InferenceComponent entries instead of model_package: several models on the
      fleet, which managed instance scaling sizes between autoscaling's min and max.
    batching: Batching (default none: the container answers one request per forward pass).
    alarm_topic: the topic the endpoint's alarms notify (rollback, waking from zero); default none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        model_package: str | None = None,
        execution_role: iam.IRole | iam.IGrantable,
        encryption_key: kms.IKey | None = None,
        instance_type: str | None = None,
        initial_instance_count: int = 1,
        serverless: ServerlessConfig | None = None,
        autoscaling: AutoScaling | None = None,
        data_capture: DataCapture | None = None,
        rollout: Rollout | None = None,
        async_inference: AsyncInference | None = None,
        vpc: VpcPlacement | None = None,
        components: Sequence[InferenceComponent] = (),
        batching: Batching | None = None,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        _check_props(
            endpoint_name, model_package, instance_type, serverless, rollout, async_inference, components
        )
        role_arn = execution_role.role_arn if hasattr(execution_role, "role_arn") else None
        if role_arn is None:
            raise ValueError("execution_role: give an ExecutionRole or an iam.IRole")
        self.endpoint_name = endpoint_name
        self.instance_type = instance_type
        self.serverless = serverless
        self.async_inference = async_inference
        self._role_arn = role_arn
        self._vpc = vpc
        self._batching = batching
        rollout = rollout or Rollout()
        self.model = (
            self._model("Model", model_package, default_workers(instance_type)) if model_package else None
        )
        self.success_topic: sns.Topic | None = None
        self.error_topic: sns.Topic | None = None
        asynchronous = (
            self._async(async_inference, encryption_key, execution_role) if async_inference else None
        )
        self.config = endpoint_config(
            self,
            variant=production_variant(
                model_name=self.model.attr_model_name if self.model else None,
                instance_type=instance_type,
                initial_instance_count=initial_instance_count,
                serverless=serverless,
                autoscaling=autoscaling,
                shared=bool(components),
            ),
            kms_key_id=encryption_key.key_arn if (encryption_key is not None and instance_type) else None,
            data_capture=data_capture_config(data_capture, endpoint_name) if data_capture else None,
            async_inference=asynchronous,
            # Inference components name their models; the endpoint config names the role instead.
            execution_role_arn=role_arn if components else None,
        )
        if serverless is not None:
            acknowledge_compliance(self.config, ["SageMakerEndpointConfigurationKMSKeyConfigured"])
        self.alarms = rollback_alarms(
            self,
            rollout,
            endpoint_name=endpoint_name,
            errors=self.metric_invocation_5xx_errors(),
            latency=self.metric_model_latency(),  # microseconds
        )
        if alarm_topic is not None:
            for alarm in self.alarms:
                notify(alarm, alarm_topic)
        fleet = instance_type is not None and not components  # an instance fleet of one model
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
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {}
        for c in components:
            self.components[c.name] = inference_component(
                self,
                c,
                endpoint_name=endpoint_name,
                endpoint=self.endpoint,
                model=self._model(f"Model-{c.name}", c.model_package, c.workers),
                rollout=rollout,
                alarms=self.alarms,
            )

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

    def _async(
        self, a: AsyncInference, key: kms.IKey | None, role: iam.IRole | iam.IGrantable
    ) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        """The config's async settings; the topics it notifies become success_topic / error_topic."""
        config, topics = async_inference_config(self, a, endpoint_name=self.endpoint_name, key=key, role=role)
        if topics is not None:
            self.success_topic, self.error_topic = topics.success, topics.error
        return config

    def _endpoint(self, rollout: Rollout, *, retain: bool, shared: bool) -> sagemaker.CfnEndpoint:
        """The endpoint on the config. retain: a model change keeps the variant's current instance
        count (autoscaling's, not the config's initial one) — RetainAllVariantProperties, except the
        data capture settings, which follow the new config; without autoscaling the config's count
        is the truth. shared: inference components update themselves (their own rolling policy);
        the endpoint's config changes only with the fleet."""
        # Inf1 and serverless endpoints shift all traffic at once (SageMaker's guardrail exclusions).
        all_at_once = self.serverless is not None or (self.instance_type or "").startswith("ml.inf1.")
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
    def from_endpoint_name(
        scope: Construct, id: str, endpoint_name: str, *, variant_name: str = VARIANT
    ) -> InferenceEndpointBase:
        """An endpoint deployed elsewhere: grant invoking it, alarm on its metrics."""
        return _ImportedEndpoint(scope, id, endpoint_name, variant_name)


def _check_props(
    endpoint_name: str,
    model_package: str | None,
    instance_type: str | None,
    serverless: ServerlessConfig | None,
    rollout: Rollout | None,
    async_inference: AsyncInference | None,
    components: Sequence[InferenceComponent],
) -> None:
    if (instance_type is None) == (serverless is None):
        raise ValueError(f"endpoint '{endpoint_name}': give either instance_type or serverless")
    if (model_package is None) == (not components):
        raise ValueError(f"endpoint '{endpoint_name}': give either model_package or components")
    if serverless is not None and (async_inference is not None or components):
        raise ValueError(f"endpoint '{endpoint_name}': serverless endpoints are neither async nor shared")
    if rollout is not None and rollout.traffic == "rolling" and serverless is not None:
        raise ValueError(f"endpoint '{endpoint_name}': serverless endpoints cannot roll; use all_at_once")
