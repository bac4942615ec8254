"""Autoscaling (aws-sagemaker-alpha's scalable-instance-count.ts): of an endpoint's instance fleet —
target tracking on invocations per instance for a real-time endpoint, on the queue per instance for
an asynchronous one, which a step policy wakes from zero instances — and of an inference
component's copies, on invocations per copy."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from sagestack.constructs.alarm_actions import allow_alarms
from sagestack.constructs.prop_types import typed_fields
from sagestack.endpoints.config_request import VARIANT

Policy = appscaling.CfnScalingPolicy


@typed_fields
@dataclass(frozen=True)
class AutoScaling:
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""

    min_capacity: int = 1
    max_capacity: int = 1
    invocations_per_instance: int = 1000
    # Async endpoints track the queue instead: ApproximateBacklogSizePerInstance. With
    # min_capacity 0 a step policy wakes the fleet when requests wait with no instance.
    backlog_per_instance: float = 5
    scale_in_cooldown: Duration = field(default_factory=lambda: Duration.minutes(5))
    scale_out_cooldown: Duration = field(default_factory=lambda: Duration.minutes(1))


def scale_variant(
    scope: Construct,
    a: AutoScaling,
    *,
    endpoint_name: str,
    endpoint: IConstruct,
    asynchronous: bool,
    alarm_topic: sns.ITopic | None = None,
) -> appscaling.CfnScalableTarget:
    """The variant's instance count between min and max, after `endpoint` exists; the alarm that
    wakes an async fleet from zero also notifies `alarm_topic`."""
    target = appscaling.CfnScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace="sagemaker",
        resource_id=f"endpoint/{endpoint_name}/variant/{VARIANT}",
        scalable_dimension="sagemaker:variant:DesiredInstanceCount",
        min_capacity=a.min_capacity,
        max_capacity=a.max_capacity,
    )
    target.node.add_dependency(endpoint)
    if asynchronous:
        _backlog_scaling(scope, a, endpoint_name, target, alarm_topic)
        return target
    Policy(
        scope,
        "InvocationsPerInstance",
        policy_name=f"{endpoint_name}-invocations",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=Policy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=float(a.invocations_per_instance),
            predefined_metric_specification=Policy.PredefinedMetricSpecificationProperty(
                predefined_metric_type="SageMakerVariantInvocationsPerInstance"
            ),
            scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
            scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
        ),
    )
    return target


def scale_copies(
    scope: Construct,
    name: str,
    *,
    component_name: str,
    component: IConstruct,
    copies: int,
    max_copies: int,
    invocations_per_copy: int,
    alarm_topic: sns.ITopic | None = None,
) -> appscaling.CfnScalableTarget:
    """An inference component's copy count between `copies` (the fewest) and `max_copies`, on
    invocations per copy; with `copies` 0, a request the component has no copy for wakes one."""
    target = appscaling.CfnScalableTarget(
        scope,
        f"ScalableTarget-{name}",
        service_namespace="sagemaker",
        resource_id=f"inference-component/{component_name}",
        scalable_dimension="sagemaker:inference-component:DesiredCopyCount",
        min_capacity=copies,
        max_capacity=max_copies,
    )
    target.node.add_dependency(component)
    Policy(
        scope,
        f"InvocationsPerCopy-{name}",
        policy_name=f"{component_name}-invocations",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=Policy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=float(invocations_per_copy),
            predefined_metric_specification=Policy.PredefinedMetricSpecificationProperty(
                predefined_metric_type="SageMakerInferenceComponentInvocationsPerCopy"
            ),
        ),
    )
    if copies <= 0:
        _wake_component(scope, name, component_name, target, alarm_topic)
    return target


def _wake_component(
    scope: Construct,
    name: str,
    component_name: str,
    target: appscaling.CfnScalableTarget,
    topic: sns.ITopic | None,
) -> None:
    """A component scaled to zero gets one copy back when a request finds none: a step policy on an
    alarm of its NoCapacityInvocationFailures, as SageMaker documents scaling inference components
    out from zero (endpoint-auto-scaling-zero-instances: ChangeInCapacity +1, the alarm on the
    metric with the InferenceComponentName dimension, >= 1)."""
    _wake_from_zero(
        scope,
        (f"WakeFromZero-{name}", f"NoCapacity-{name}"),
        target,
        name=f"{component_name}-wake",
        description=f"{component_name}: a request found no copy; start one",
        metric=("NoCapacityInvocationFailures", "InferenceComponentName", component_name),
        statistic="Maximum",
        cooldown=60,
        periods=1,
        topic=topic,
    )


def _backlog_scaling(
    scope: Construct,
    a: AutoScaling,
    endpoint_name: str,
    target: appscaling.CfnScalableTarget,
    topic: sns.ITopic | None,
) -> None:
    """Async: track the queue per instance; from zero instances, a step policy on
    HasBacklogWithoutCapacity adds the first one (target tracking cannot scale out from zero)."""
    Policy(
        scope,
        "BacklogPerInstance",
        policy_name=f"{endpoint_name}-backlog",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=Policy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=float(a.backlog_per_instance),
            customized_metric_specification=Policy.CustomizedMetricSpecificationProperty(
                namespace="AWS/SageMaker",
                metric_name="ApproximateBacklogSizePerInstance",
                dimensions=[Policy.MetricDimensionProperty(name="EndpointName", value=endpoint_name)],
                statistic="Average",
            ),
            scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
            scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
        ),
    )
    if a.min_capacity <= 0:
        _wake_on_backlog(scope, a, endpoint_name, target, topic)


def _wake_on_backlog(
    scope: Construct,
    a: AutoScaling,
    endpoint_name: str,
    target: appscaling.CfnScalableTarget,
    topic: sns.ITopic | None,
) -> None:
    _wake_from_zero(
        scope,
        ("WakeOnBacklog", "BacklogWithoutCapacity"),
        target,
        name=f"{endpoint_name}-wake",
        description=f"{endpoint_name}: requests wait and no instance runs; start one",
        metric=("HasBacklogWithoutCapacity", "EndpointName", endpoint_name),
        statistic="Average",
        cooldown=int(a.scale_out_cooldown.to_seconds()),
        periods=2,
        topic=topic,
    )


def _wake_from_zero(
    scope: Construct,
    ids: tuple[str, str],
    target: appscaling.CfnScalableTarget,
    *,
    name: str,
    description: str,
    metric: tuple[str, str, str],
    statistic: str,
    cooldown: int,
    periods: int,
    topic: sns.ITopic | None,
) -> None:
    """From zero, target tracking cannot scale out: a step policy adds one (instance or copy) when
    an alarm on `metric` (name, dimension, value) reaches 1 over `periods` minutes; the alarm also
    notifies `topic`. ids: the policy's and the alarm's construct IDs."""
    wake = Policy(
        scope,
        ids[0],
        policy_name=name,
        policy_type="StepScaling",
        scaling_target_id=target.ref,
        step_scaling_policy_configuration=Policy.StepScalingPolicyConfigurationProperty(
            adjustment_type="ChangeInCapacity",
            metric_aggregation_type=statistic,
            cooldown=cooldown,
            step_adjustments=[
                Policy.StepAdjustmentProperty(metric_interval_lower_bound=0, scaling_adjustment=1)
            ],
        ),
    )
    if topic is not None:
        allow_alarms(topic)
    metric_name, dimension, value = metric
    cloudwatch.CfnAlarm(
        scope,
        ids[1],
        alarm_name=name,
        alarm_description=description,
        namespace="AWS/SageMaker",
        metric_name=metric_name,
        dimensions=[cloudwatch.CfnAlarm.DimensionProperty(name=dimension, value=value)],
        statistic=statistic,
        period=60,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        threshold=1,
        comparison_operator="GreaterThanOrEqualToThreshold",
        treat_missing_data="missing",
        alarm_actions=[wake.ref, *([topic.topic_arn] if topic is not None else [])],
    )
