"""Autoscaling (aws-sagemaker-alpha's scalable-instance-count.ts): of an endpoint's instance fleet —
target tracking on invocations per instance for a real-time endpoint, on the queue per instance for
an asynchronous one, which a step policy wakes from zero instances — built from the fleet's
rendered RegisterScalableTarget and PutScalingPolicy requests (endpoints/scaling_request.py: the
requests `sagestack plan` counts the fleet's maximum from); and of an inference component's
copies, on invocations per copy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from sagestack.constructs.alarm_actions import allow_alarms
from sagestack.constructs.prop_types import typed_fields
from sagestack.endpoints.scaling_request import (
    POLICY,
    REGISTER,
    FleetScaling,
    step_up_by_one,
    validate_scaling,
    variant_scaling_requests,
)

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
    """The variant's instance count between min and max, after `endpoint` exists: the target and
    policies built from their rendered requests (endpoints/scaling_request.py, validated against
    botocore's application-autoscaling model); the alarm that wakes an async fleet from zero also
    notifies `alarm_topic`."""
    scaling = FleetScaling(
        min_capacity=a.min_capacity,
        max_capacity=a.max_capacity,
        invocations_per_instance=a.invocations_per_instance,
        backlog_per_instance=a.backlog_per_instance,
        scale_in_cooldown=int(a.scale_in_cooldown.to_seconds()),
        scale_out_cooldown=int(a.scale_out_cooldown.to_seconds()),
    )
    requests = variant_scaling_requests(endpoint_name, scaling, asynchronous=asynchronous)
    validate_scaling(requests)
    registered = requests[REGISTER]
    target = appscaling.CfnScalableTarget(
        scope,
        "ScalableTarget",
        service_namespace=registered["ServiceNamespace"],
        resource_id=registered["ResourceId"],
        scalable_dimension=registered["ScalableDimension"],
        min_capacity=registered["MinCapacity"],
        max_capacity=registered["MaxCapacity"],
    )
    target.node.add_dependency(endpoint)
    policies = [r for op, r in requests.items() if op.startswith(POLICY)]
    tracking_id = "BacklogPerInstance" if asynchronous else "InvocationsPerInstance"
    _policy(scope, tracking_id, policies[0], target)
    if len(policies) > 1:  # the step policy that wakes an async fleet from zero
        wake = _policy(scope, "WakeOnBacklog", policies[1], target)
        _wake_alarm(
            scope,
            "BacklogWithoutCapacity",
            wake,
            name=policies[1]["PolicyName"],
            description=f"{endpoint_name}: requests wait and no instance runs; start one",
            metric=("HasBacklogWithoutCapacity", "EndpointName", endpoint_name),
            statistic="Average",
            periods=2,
            topic=alarm_topic,
        )
    return target


def _policy(
    scope: Construct, id: str, request: dict[str, Any], target: appscaling.CfnScalableTarget
) -> Policy:
    """An AWS::ApplicationAutoScaling::ScalingPolicy from its PutScalingPolicy request (the target
    referenced, not named again)."""
    tracking = request.get("TargetTrackingScalingPolicyConfiguration")
    step = request.get("StepScalingPolicyConfiguration")
    return Policy(
        scope,
        id,
        policy_name=request["PolicyName"],
        policy_type=request["PolicyType"],
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=_tracking(tracking) if tracking else None,
        step_scaling_policy_configuration=_step(step) if step else None,
    )


def _tracking(c: dict[str, Any]) -> Policy.TargetTrackingScalingPolicyConfigurationProperty:
    predefined = c.get("PredefinedMetricSpecification")
    custom = c.get("CustomizedMetricSpecification")
    return Policy.TargetTrackingScalingPolicyConfigurationProperty(
        target_value=c["TargetValue"],
        predefined_metric_specification=Policy.PredefinedMetricSpecificationProperty(
            predefined_metric_type=predefined["PredefinedMetricType"]
        )
        if predefined
        else None,
        customized_metric_specification=Policy.CustomizedMetricSpecificationProperty(
            namespace=custom["Namespace"],
            metric_name=custom["MetricName"],
            dimensions=[
                Policy.MetricDimensionProperty(name=d["Name"], value=d["Value"]) for d in custom["Dimensions"]
            ],
            statistic=custom["Statistic"],
        )
        if custom
        else None,
        scale_in_cooldown=c.get("ScaleInCooldown"),
        scale_out_cooldown=c.get("ScaleOutCooldown"),
    )


def _step(c: dict[str, Any]) -> Policy.StepScalingPolicyConfigurationProperty:
    return Policy.StepScalingPolicyConfigurationProperty(
        adjustment_type=c["AdjustmentType"],
        metric_aggregation_type=c["MetricAggregationType"],
        cooldown=c["Cooldown"],
        step_adjustments=[
            Policy.StepAdjustmentProperty(
                metric_interval_lower_bound=s["MetricIntervalLowerBound"],
                scaling_adjustment=s["ScalingAdjustment"],
            )
            for s in c["StepAdjustments"]
        ],
    )


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
    an alarm on `metric` reaches 1 over `periods` minutes. ids: the policy's and the alarm's
    construct IDs."""
    request = {
        "PolicyName": name,
        "PolicyType": "StepScaling",
        "StepScalingPolicyConfiguration": step_up_by_one(statistic, cooldown),
    }
    wake = _policy(scope, ids[0], request, target)
    _wake_alarm(
        scope,
        ids[1],
        wake,
        name=name,
        description=description,
        metric=metric,
        statistic=statistic,
        periods=periods,
        topic=topic,
    )


def _wake_alarm(
    scope: Construct,
    id: str,
    wake: Policy,
    *,
    name: str,
    description: str,
    metric: tuple[str, str, str],
    statistic: str,
    periods: int,
    topic: sns.ITopic | None,
) -> None:
    """The alarm on `metric` (name, dimension, value) that starts the `wake` step policy when it
    reaches 1 over `periods` minutes; it also notifies `topic`."""
    if topic is not None:
        allow_alarms(topic)
    metric_name, dimension, value = metric
    cloudwatch.CfnAlarm(
        scope,
        id,
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
