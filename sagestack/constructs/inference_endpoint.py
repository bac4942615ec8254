"""InferenceEndpoint: a SageMaker real-time (or serverless) endpoint serving a model package, with
target-tracking autoscaling and a guarded blue/green rollout that CloudWatch alarms roll back."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.spec.models import EndpointSpec

VARIANT = "AllTraffic"  # blue/green updates need the same variant name in the old and new config
MAX_EXECUTION_TIMEOUT = 14400  # BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds ceiling
MIN_EXECUTION_TIMEOUT = 600


@dataclass(frozen=True)
class CaptureTarget:
    s3_uri: str  # s3://bucket/capture/<endpoint>
    kms_key_id: str


class InferenceEndpoint(Construct):
    """Props:
    endpoint_name: the physical name (callers invoke it by name).
    spec: the endpoint's spec (instance fleet or serverless, autoscaling, data capture, rollout).
    model_package_arn: the package to serve (the environment's pin).
    execution_role_arn: the role SageMaker assumes to pull the image and the model.
    kms_key_id: encrypts the instances' storage volumes (instance fleets only; serverless takes none).
    capture: where data capture writes (required when spec.data_capture is set).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint_name: str,
        spec: EndpointSpec,
        model_package_arn: str,
        execution_role_arn: str,
        kms_key_id: str,
        capture: CaptureTarget | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.endpoint_name = endpoint_name
        # No explicit names on the model and config: a new pin replaces them, and the endpoint moves
        # to the new config by a blue/green update.
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=execution_role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                model_package_name=model_package_arn
            ),
            enable_network_isolation=True,
        )
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=VARIANT,
            model_name=self.model.attr_model_name,
            initial_variant_weight=1.0,
            initial_instance_count=spec.initial_instance_count if spec.instance_type else None,
            instance_type=spec.instance_type,
            serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                memory_size_in_mb=spec.serverless.memory_mb, max_concurrency=spec.serverless.max_concurrency
            )
            if spec.serverless
            else None,
        )
        data_capture = None
        if spec.data_capture is not None:
            if capture is None:
                raise ValueError("data_capture needs a capture target (bucket URI and key)")
            data_capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True,
                initial_sampling_percentage=spec.data_capture.sampling_percent,
                destination_s3_uri=capture.s3_uri,
                kms_key_id=capture.kms_key_id,
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
            kms_key_id=kms_key_id if spec.instance_type else None,
            data_capture_config=data_capture,
        )
        self.alarms = self._alarms(spec)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Resource",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.config.attr_endpoint_config_name,
            deployment_config=self._deployment(spec),
        )
        # The rollback alarms are referenced by name (Ref), which orders them before the endpoint.
        self.scalable_target: appscaling.CfnScalableTarget | None = None
        if spec.autoscaling is not None and spec.instance_type is not None:
            self._autoscaling(spec)

    def _alarms(self, spec: EndpointSpec) -> list[cloudwatch.Alarm]:
        r = spec.rollout
        alarms = [
            self._alarm(
                "Errors",
                "5xx",
                "model errors (5XX) during or after a rollout",
                metric="Invocation5XXErrors",
                statistic="Sum",
                threshold=r.max_5xx_errors,
                periods=1,
            )
        ]
        if r.max_latency_ms is not None:
            alarms.append(
                self._alarm(
                    "Latency",
                    "latency",
                    f"p99 model latency above {r.max_latency_ms} ms",
                    metric="ModelLatency",  # microseconds
                    statistic="p99",
                    threshold=r.max_latency_ms * 1000,
                    periods=2,
                )
            )
        return alarms

    def _alarm(
        self, id: str, suffix: str, what: str, *, metric: str, statistic: str, threshold: float, periods: int
    ) -> cloudwatch.Alarm:
        """An alarm on one of the variant's per-minute AWS/SageMaker metrics, rising above `threshold`."""
        return cloudwatch.Alarm(
            self,
            id,
            alarm_name=f"{self.endpoint_name}-{suffix}",
            alarm_description=f"{self.endpoint_name}: {what}",
            metric=cloudwatch.Metric(
                namespace="AWS/SageMaker",
                metric_name=metric,
                dimensions_map={"EndpointName": self.endpoint_name, "VariantName": VARIANT},
                statistic=statistic,
                period=Duration.minutes(1),
            ),
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=periods,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    def _deployment(self, spec: EndpointSpec) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        r = spec.rollout
        traffic = r.traffic
        # Inf1 and serverless endpoints shift all traffic at once (SageMaker's guardrail exclusions).
        if spec.serverless is not None or (spec.instance_type or "").startswith("ml.inf1."):
            traffic = "all_at_once"
        step = sagemaker.CfnEndpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.canary_percent)
        routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type=traffic.upper(),
            wait_interval_in_seconds=r.wait,
            canary_size=step if traffic == "canary" else None,
            linear_step_size=step if traffic == "linear" else None,
        )
        steps = {"canary": 2, "linear": -(-100 // r.canary_percent), "all_at_once": 1}[traffic]
        timeout = min(
            MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * r.wait + r.termination_wait + 1800)
        )
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=routing,
                termination_wait_in_seconds=r.termination_wait,
                maximum_execution_timeout_in_seconds=timeout,
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in self.alarms]
            ),
        )

    def _autoscaling(self, spec: EndpointSpec) -> None:
        a = spec.autoscaling
        assert a is not None
        self.scalable_target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=a.min,
            max_capacity=a.max,
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
                scale_in_cooldown=a.scale_in_cooldown,
                scale_out_cooldown=a.scale_out_cooldown,
            ),
        )
