"""How an endpoint moves to a new config: a blue/green traffic shift (canary, linear, all at once)
or a rolling update, while CloudWatch alarms on the variant's errors and latency watch and roll it
back (AWS::SageMaker::Endpoint DeploymentConfig)."""

from __future__ import annotations

from dataclasses import dataclass, field

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs.prop_types import typed_fields

Endpoint = sagemaker.CfnEndpoint
MAX_EXECUTION_TIMEOUT = 14400  # BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds ceiling
MIN_EXECUTION_TIMEOUT = 600


@typed_fields
@dataclass(frozen=True)
class Rollout:
    """A guarded update while alarms watch; an alarm rolls it back. traffic: 'canary' | 'linear' |
    'all_at_once' shift traffic to a second (blue/green) fleet; 'rolling' replaces the fleet
    step_percent (of 5-50 %) at a time without a second fleet. Inf1 and serverless always shift all at
    once (SageMaker's guardrail exclusions); serverless cannot roll."""

    traffic: str = "canary"
    step_percent: int = 10
    wait: Duration = field(default_factory=lambda: Duration.minutes(5))
    termination_wait: Duration = field(default_factory=lambda: Duration.minutes(10))
    max_5xx_errors: int = 0
    max_latency: Duration | None = None


def rollback_alarms(
    scope: Construct,
    r: Rollout,
    *,
    endpoint_name: str,
    errors: cloudwatch.Metric,
    latency: cloudwatch.Metric,
) -> list[cloudwatch.Alarm]:
    """The alarms that roll an update back: model errors (5XX) above r.max_5xx_errors, and, when
    r.max_latency is set, p99 model latency (`latency`, in microseconds) above it."""
    alarms = [
        _alarm(
            scope,
            "Errors",
            endpoint_name,
            "5xx",
            "model errors (5XX) during or after a rollout",
            errors,
            threshold=r.max_5xx_errors,
            periods=1,
        )
    ]
    if r.max_latency is not None:
        ms = int(r.max_latency.to_milliseconds())
        alarms.append(
            _alarm(
                scope,
                "Latency",
                endpoint_name,
                "latency",
                f"p99 model latency above {ms} ms",
                latency,
                threshold=ms * 1000,
                periods=2,
            )
        )
    return alarms


def _alarm(
    scope: Construct,
    id: str,
    endpoint_name: str,
    suffix: str,
    what: str,
    metric: cloudwatch.Metric,
    *,
    threshold: float,
    periods: int,
) -> cloudwatch.Alarm:
    """An alarm on one of the variant's metrics rising above `threshold`."""
    return cloudwatch.Alarm(
        scope,
        id,
        alarm_name=f"{endpoint_name}-{suffix}",
        alarm_description=f"{endpoint_name}: {what}",
        metric=metric,
        threshold=threshold,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=periods,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )


def deployment_config(
    r: Rollout, alarms: list[cloudwatch.Alarm], *, all_at_once: bool
) -> Endpoint.DeploymentConfigProperty:
    """The endpoint's update policy; all_at_once: Inf1 and serverless endpoints shift all traffic at
    once (SageMaker's guardrail exclusions)."""
    traffic = "all_at_once" if all_at_once else r.traffic
    rollback = Endpoint.AutoRollbackConfigProperty(
        alarms=[Endpoint.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]
    )
    if traffic == "rolling":
        return Endpoint.DeploymentConfigProperty(
            rolling_update_policy=_rolling(r), auto_rollback_configuration=rollback
        )
    wait = int(r.wait.to_seconds())
    termination_wait = int(r.termination_wait.to_seconds())
    step = Endpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.step_percent)
    routing = Endpoint.TrafficRoutingConfigProperty(
        type=traffic.upper(),
        wait_interval_in_seconds=wait,
        canary_size=step if traffic == "canary" else None,
        linear_step_size=step if traffic == "linear" else None,
    )
    steps = {"canary": 2, "linear": -(-100 // r.step_percent), "all_at_once": 1}[traffic]
    timeout = min(MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * wait + termination_wait + 1800))
    return Endpoint.DeploymentConfigProperty(
        blue_green_update_policy=Endpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=termination_wait,
            maximum_execution_timeout_in_seconds=timeout,
        ),
        auto_rollback_configuration=rollback,
    )


def _rolling(r: Rollout) -> Endpoint.RollingUpdatePolicyProperty:
    wait = int(r.wait.to_seconds())
    steps = -(-100 // r.step_percent)
    return Endpoint.RollingUpdatePolicyProperty(
        maximum_batch_size=Endpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=r.step_percent),
        wait_interval_in_seconds=wait,
        maximum_execution_timeout_in_seconds=min(
            MAX_EXECUTION_TIMEOUT, max(MIN_EXECUTION_TIMEOUT, steps * (wait + 900))
        ),
        # A rollback brings the whole old fleet back at once: the new one misbehaves.
        rollback_maximum_batch_size=Endpoint.CapacitySizeProperty(type="CAPACITY_PERCENT", value=100),
    )
