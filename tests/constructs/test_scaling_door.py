"""An endpoint fleet's autoscaling has one door: the RegisterScalableTarget and PutScalingPolicy
requests the environment renders (endpoints/scaling_request.py — what `plan` counts the fleet's
maximum from and `render` prints) are what the serving stack's ScalableTarget and ScalingPolicy
resources carry, property for property (a policy names its target by reference instead of by
namespace, resource and dimension)."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from tests.conftest import MINIMAL
from tests.support.cdk_app import BuiltApp

pytestmark = pytest.mark.synth

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
ENDPOINTS = f"""endpoints:
  queue:
    model_package: "{PIN}"
    instance_type: ml.g5.xlarge
    async: {{}}
    autoscaling: {{min: 0, max: 3, backlog_per_instance: 2, scale_out_cooldown: 120}}
  web:
    model_package: "{PIN}"
    instance_type: [ml.c5.xlarge, ml.c5.2xlarge]
    autoscaling: {{min: 1, max: 5, invocations_per_instance: 70, scale_in_cooldown: 600}}
"""
TARGETED = ("ServiceNamespace", "ResourceId", "ScalableDimension")


def test_the_stack_s_scaling_resources_are_the_rendered_requests(project, tmp_path):
    from sagestack.project.requests import render_environment

    project.spec(MINIMAL + ENDPOINTS).env("prod", 'account: "111111111111"\n')
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    stage = app.stages["prod"]
    t = Template.from_stack(stage.serving)
    fleets = render_environment(stage.plan, project.root).fleets
    targets = [
        r["Properties"] for r in t.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    ]
    policies = {
        r["Properties"]["PolicyName"]: r["Properties"]
        for r in t.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }
    rendered_policies = {}
    for key in ("queue", "web"):
        registered = dict(fleets[key]["RegisterScalableTarget"])
        tags = [{"Key": k, "Value": v} for k, v in registered.pop("Tags").items()]
        assert {**registered, "Tags": tags} in targets, key
        rendered_policies.update(
            {r["PolicyName"]: r for op, r in fleets[key].items() if op.startswith("PutScalingPolicy ")}
        )
    assert (
        set(policies)
        == set(rendered_policies)
        == {
            "digits-prod-queue-backlog",
            "digits-prod-queue-wake",
            "digits-prod-web-invocations",
        }
    )
    for name, request in rendered_policies.items():
        held = {k: v for k, v in policies[name].items() if k != "ScalingTargetId"}
        assert held == {k: v for k, v in request.items() if k not in TARGETED}, name
