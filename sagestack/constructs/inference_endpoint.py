"""InferenceEndpoint: a SageMaker real-time (or serverless) endpoint serving a model package — a
compiled (Neo / Inferentia) one as registered by a pipeline — with target-tracking autoscaling and a
guarded blue/green rollout that CloudWatch alarms roll back."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration, Size
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase

VARIANT = "AllTraffic"  # blue/green updates need the same variant name in the old and new config
MAX_EXECUTION_TIMEOUT = 14400  # BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds ceiling
MIN_EXECUTION_TIMEOUT = 600


@dataclass(frozen=True)
class ServerlessConfig:
    """A serverless endpoint: memory (1-6 GiB in 1 GiB steps) and concurrent invocations (1-200)."""

    memory_size: Size
    max_concurrency: int = 5


@dataclass(frozen=True)
class AutoScaling:
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""

    min_capacity: int = 1
    max_capacity: int = 1
    invocations_per_instance: int = 1000
    scale_in_cooldown: Duration = field(default_factory=lambda: Duration.minutes(5))
    scale_out_cooldown: Duration = field(default_factory=lambda: Duration.minutes(1))


@dataclass(frozen=True)
class DataCapture:
    """Capture requests and responses under the artifact bucket's capture/<endpoint>/ prefix."""

    artifacts: ArtifactBucketBase
    sampling_percentage: int = 100
    folder: str | None = None  # under capture/ (default: the endpoint's name)


@dataclass(frozen=True)
class Rollout:
    """A guarded (blue/green) update: traffic shifts to the new fleet while alarms watch; an alarm
    rolls it back. traffic: 'canary' | 'linear' | 'all_at_once' (Inf1 and serverless always shift all
    at once: SageMaker's guardrail exclusions)."""

    traffic: str = "canary"
    step_percent: int = 10
    wait: Duration = field(default_factory=lambda: Duration.minutes(5))
    termination_wait: Duration = field(default_factory=lambda: Duration.minutes(10))
    max_5xx_errors: int = 0
    max_latency: Duration | None = None


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
    autoscaling: AutoScaling (instance fleets only; default none).
    data_capture: DataCapture (default none).
    rollout: Rollout (default: canary 10 %, 5 min bake, rolled back on any 5XX).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        model_package: str,
        execution_role: iam.IRole | iam.IGrantable,
        encryption_key: kms.IKey | None = None,
        instance_type: str | None = None,
        initial_instance_count: int = 1,
        serverless: ServerlessConfig | None = None,
        autoscaling: AutoScaling | None = None,
        data_capture: DataCapture | None = None,
        rollout: Rollout | None = None,
    ) -> None:
        super().__init__(scope, id)
        if (instance_type is None) == (serverless is None):
            raise ValueError(f"endpoint '{endpoint_name}': give either instance_type or serverless")
        self.endpoint_name = endpoint_name
        self.instance_type = instance_type
        self.serverless = serverless
        role_arn = execution_role.role_arn if hasattr(execution_role, "role_arn") else None
        if role_arn is None:
            raise ValueError("execution_role: give an ExecutionRole or an iam.IRole")
        rollout = rollout or Rollout()
        # No explicit names on the model and config: a new pin replaces them, and the endpoint moves
        # to the new config by a blue/green update.
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                model_package_name=model_package
            ),
            enable_network_isolation=True,
        )
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT,
            model_name=self.model.attr_model_name,
            initial_variant_weight=1.0,
            initial_instance_count=initial_instance_count if instance_type else None,
            instance_type=instance_type,
            serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                memory_size_in_mb=int(serverless.memory_size.to_mebibytes()),
                max_concurrency=serverless.max_concurrency,
            )
            if serverless
            else None,
        )
        capture = None
        if data_capture is not None:
            capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True,
                initial_sampling_percentage=data_capture.sampling_percentage,
                destination_s3_uri=data_capture.artifacts.s3_uri(
                    "capture", data_capture.folder or endpoint_name
                ),
                kms_key_id=data_capture.artifacts.encryption_key.key_arn
                if data_capture.artifacts.encryption_key
                else None,
                capture_options=[
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output"),
                ],
                capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                    json_content_types=["application/json"]
                ),
            )
        self.config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[variant],
            kms_key_id=encryption_key.key_arn if (encryption_key is not None and instance_type) else None,
            data_capture_config=capture,
        )
        self.alarms = self._alarms(rollout)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            deployment_config=self._deployment(rollout),
        )
        # The rollback alarms are referenced by name (Ref), which orders them before the endpoint.
        self.scalable_target: appscaling.CfnScalableTarget | None = None
        if autoscaling is not None and instance_type is not None:
            self._autoscaling(autoscaling)

    @staticmethod
    def from_endpoint_name(
        scope: Construct, id: str, endpoint_name: str, *, variant_name: str = VARIANT
    ) -> InferenceEndpointBase:
        """An endpoint deployed elsewhere: grant invoking it, alarm on its metrics."""
        return _ImportedEndpoint(scope, id, endpoint_name, variant_name)

    def _alarms(self, r: Rollout) -> list[cloudwatch.Alarm]:
        alarms = [
            self._alarm(
                "Errors",
                "5xx",
                "model errors (5XX) during or after a rollout",
                self.metric_invocation_5xx_errors(),
                threshold=r.max_5xx_errors,
                periods=1,
            )
        ]
        if r.max_latency is not None:
            ms = int(r.max_latency.to_milliseconds())
            alarms.append(
                self._alarm(
                    "Latency",
                    "latency",
                    f"p99 model latency above {ms} ms",
                    self.metric_model_latency(),  # microseconds
                    threshold=ms * 1000,
                    periods=2,
                )
            )
        return alarms

    def _alarm(
        self, id: str, suffix: str, what: str, metric: cloudwatch.Metric, *, threshold: float, periods: int
    ) -> cloudwatch.Alarm:
        """An alarm on one of the variant's metrics rising above `threshold`."""
        return cloudwatch.Alarm(
            self,
            id,
            alarm_name=f"{self.endpoint_name}-{suffix}",
            alarm_description=f"{self.endpoint_name}: {what}",
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=periods,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _deployment(self, r: Rollout) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        traffic = r.traffic
        # Inf1 and serverless endpoints shift all traffic at once (SageMaker's guardrail exclusions).
        if self.serverless is not None or (self.instance_type or "").startswith("ml.inf1."):
            traffic = "all_at_once"
        wait = int(r.wait.to_seconds())
        termination_wait = int(r.termination_wait.to_seconds())
        step = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.step_percent)
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=traffic.upper(),
            wait_interval_in_seconds=wait,
            canary_size=step if traffic == "canary" else None,
            linear_step_size=step if traffic == "linear" else None,
        )
        steps = {"canary": 2, "linear": -(-100 // r.step_percent), "all_at_once": 1}[traffic]
        timeout = min(
            MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * wait + termination_wait + 1800)
        )
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=routing,
                termination_wait_in_seconds=termination_wait,
                maximum_execution_timeout_in_seconds=timeout,
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in self.alarms]
            ),
        )

    def _autoscaling(self, a: AutoScaling) -> None:
        self.scalable_target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=a.min_capacity,
            max_capacity=a.max_capacity,
        )
        self.scalable_target.node.add_dependency(self.endpoint)
        appscaling.CfnScalingPolicy(
            self,
            "InvocationsPerInstance",
            policy_name=f"{self.endpoint_name}-invocations",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=float(a.invocations_per_instance),
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerVariantInvocationsPerInstance"
                ),
                scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
                scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
            ),
        )
