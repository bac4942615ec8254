"""An endpoint fleet's autoscaling as Application Auto Scaling requests, rendered once: the
RegisterScalableTarget of its variant's instance count (between min and max) and each
PutScalingPolicy — target tracking on invocations per instance for a real-time endpoint, on the
queue per instance for an asynchronous one, with a step policy that wakes an async fleet from zero.

`sagestack plan` reads the fleet's maximum from the target (capacity/assess.py), the environment's
rendering validates both against botocore's `application-autoscaling` model, and InferenceEndpoint
builds its AWS::ApplicationAutoScaling::ScalableTarget and ScalingPolicy resources from the same
requests rendered with the deployment's endpoint name (constructs/endpoint_autoscaling.py). A field
of the fleet's scaling is added here; the construct needs no change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.service_model import validate_request as validate_in_service
from sagestack.endpoints.config_request import VARIANT
from sagestack.endpoints.models import AutoscalingSpec

SERVICE = "application-autoscaling"  # botocore's model that judges these requests
NAMESPACE = "sagemaker"
VARIANT_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
REGISTER = "RegisterScalableTarget"
POLICY = "PutScalingPolicy"  # the operation; a rendering names each policy 'PutScalingPolicy <name>'
OPERATIONS = (REGISTER, POLICY)


@dataclass(frozen=True)
class FleetScaling:
    """A fleet's scaling values (the spec's `autoscaling:`, or a library user's AutoScaling props),
    cooldowns in seconds."""

    min_capacity: int = 1
    max_capacity: int = 1
    invocations_per_instance: int = 1000
    backlog_per_instance: float = 5
    scale_in_cooldown: int = 300
    scale_out_cooldown: int = 60

    @staticmethod
    def of(a: AutoscalingSpec) -> FleetScaling:
        return FleetScaling(
            min_capacity=a.min,
            max_capacity=a.max,
            invocations_per_instance=a.invocations_per_instance,
            backlog_per_instance=a.backlog_per_instance,
            scale_in_cooldown=a.scale_in_cooldown,
            scale_out_cooldown=a.scale_out_cooldown,
        )


def variant_resource(endpoint_name: str) -> dict[str, str]:
    """What each request names: the endpoint's variant's instance count."""
    return {
        "ServiceNamespace": NAMESPACE,
        "ResourceId": f"endpoint/{endpoint_name}/variant/{VARIANT}",
        "ScalableDimension": VARIANT_DIMENSION,
    }


def variant_scaling_requests(
    endpoint_name: str,
    s: FleetScaling,
    *,
    asynchronous: bool,
    tags: tuple[tuple[str, str], ...] = (),
) -> dict[str, dict[str, Any]]:
    """'RegisterScalableTarget' and 'PutScalingPolicy <policy name>' for each policy, in the order
    they are created; `tags`: the target's (the stack tags its resource itself)."""
    resource = variant_resource(endpoint_name)
    out: dict[str, dict[str, Any]] = {
        REGISTER: {**resource, "MinCapacity": s.min_capacity, "MaxCapacity": s.max_capacity}
    }
    if tags:
        out[REGISTER]["Tags"] = dict(tags)
    tracking: dict[str, Any] = {"TargetValue": float(s.invocations_per_instance)}
    name = f"{endpoint_name}-invocations"
    if asynchronous:
        name = f"{endpoint_name}-backlog"
        tracking = {
            "TargetValue": float(s.backlog_per_instance),
            "CustomizedMetricSpecification": {
                "MetricName": "ApproximateBacklogSizePerInstance",
                "Namespace": "AWS/SageMaker",
                "Dimensions": [{"Name": "EndpointName", "Value": endpoint_name}],
                "Statistic": "Average",
            },
        }
    else:
        tracking["PredefinedMetricSpecification"] = {
            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
        }
    tracking["ScaleInCooldown"] = s.scale_in_cooldown
    tracking["ScaleOutCooldown"] = s.scale_out_cooldown
    out[f"{POLICY} {name}"] = {
        "PolicyName": name,
        **resource,
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": tracking,
    }
    if asynchronous and s.min_capacity <= 0:  # target tracking cannot scale out from zero
        wake = f"{endpoint_name}-wake"
        out[f"{POLICY} {wake}"] = {
            "PolicyName": wake,
            **resource,
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": step_up_by_one("Average", s.scale_out_cooldown),
        }
    return out


def step_up_by_one(statistic: str, cooldown: int) -> dict[str, Any]:
    """A step policy adding one (instance or copy) when its alarm reaches 1."""
    return {
        "AdjustmentType": "ChangeInCapacity",
        "MetricAggregationType": statistic,
        "Cooldown": cooldown,
        "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
    }


def scaling_bounds(requests: Mapping[str, Mapping[str, Any]]) -> tuple[int, int] | None:
    """(min, max) of the fleet a rendering registers, None when it registers none."""
    target = requests.get(REGISTER)
    if target is None:
        return None
    return int(target["MinCapacity"]), int(target["MaxCapacity"])


def validate_scaling(requests: dict[str, dict[str, Any]]) -> None:
    """Each Application Auto Scaling request of a rendering against botocore's model for it (the
    rendering's other requests are SageMaker's, validated by their own renderer)."""
    for op, request in requests.items():
        operation = op.split(" ")[0]
        if operation in OPERATIONS:
            validate_in_service(operation, request, service=SERVICE)
