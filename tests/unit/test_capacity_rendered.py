"""Capacity counts the environment's one rendering: every endpoint's fleet (CreateEndpointConfig and,
when it autoscales, RegisterScalableTarget / PutScalingPolicy, judged by botocore's
application-autoscaling model), every cluster's CreateCluster and every transform's
CreateTransformJob are in `render_training`'s rendering — the one synth's quota check, `plan`,
`check`, `cost` and `render` read — and a count changed in a request is the count capacity reports."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from sagestack.capacity.assess import assess
from sagestack.capacity.ledger import QuotaBook
from sagestack.core.catalog.service_model import RequestValidationError
from sagestack.endpoints.scaling_request import validate_scaling
from sagestack.project import resolve_environment
from sagestack.project.requests import render_environment, render_training, requests_named
from tests.unit.test_capacity import BROAD

OFF = QuotaBook.none("off")


@pytest.fixture
def broad(project):
    project.spec(BROAD).env("dev")
    return project, resolve_environment(project.load("dev", run_rules=False))


def test_every_endpoint_cluster_and_transform_is_in_the_one_rendering(broad):
    project, plan = broad
    out = render_training(plan, project.root)
    assert {key: list(ops) for key, ops in out.fleets.items()} == {
        "fleet": ["CreateEndpointConfig"],
        "pinned": [
            "CreateEndpointConfig",
            "RegisterScalableTarget",
            "PutScalingPolicy digits-dev-pinned-invocations",
        ],
        "queue": [
            "CreateEndpointConfig",
            "RegisterScalableTarget",
            "PutScalingPolicy digits-dev-queue-backlog",
            "PutScalingPolicy digits-dev-queue-wake",  # async from zero: a step policy wakes it
        ],
        "lambda-like": ["CreateEndpointConfig"],
    }
    assert out.fleets["queue"]["RegisterScalableTarget"] == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/digits-dev-queue/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 0,
        "MaxCapacity": 2,
        "Tags": {"sagestack:environment": "dev", "sagestack:project": "digits"},
    }
    assert [g["InstanceGroupName"] for g in out.clusters["lab"]["InstanceGroups"]] == ["ctl", "gpu"]
    assert list(out.transforms["score"]) == [
        "CreateModel",
        "CreateTransformJob ml.m5.xlarge",
        "CreateTransformJob ml.c5.xlarge",
    ]
    # plan, render and lock render the environment on top of the very same requests
    whole = render_environment(plan, project.root)
    assert whole.fleets is out.fleets and whole.clusters is out.clusters
    assert whole.transforms["rescore"] is out.transforms["rescore"]  # a pinned package: no model steps
    shown = [(s.operation, s.label) for s in requests_named(plan, whole, "pinned")]
    assert shown == [
        ("CreateEndpointConfig", "pinned"),
        ("RegisterScalableTarget", "pinned"),
        ("PutScalingPolicy", "digits-dev-pinned-invocations"),
    ]
    assert [s.operation for s in requests_named(plan, whole, "lab")] == ["CreateCluster"]


def test_the_autoscaling_requests_are_judged_by_application_autoscaling_s_model(broad):
    project, plan = broad
    queue = render_training(plan, project.root).fleets["queue"]
    validate_scaling(queue)  # as rendered: valid
    bad = copy.deepcopy(queue)
    bad["RegisterScalableTarget"]["MinCapacity"] = "none"
    bad["PutScalingPolicy digits-dev-queue-wake"]["PolicyType"] = "Sometimes"
    with pytest.raises(RequestValidationError) as refused:
        validate_scaling(bad)
    assert "application-autoscaling:RegisterScalableTarget" in str(refused.value)


def test_capacity_counts_what_the_requests_hold_not_what_the_spec_says(broad):
    """The rendering is the one source: a count changed in a request (and not in the spec) is the
    count the report shows."""
    project, plan = broad
    out = render_training(plan, project.root)
    fleets, clusters, transforms = (copy.deepcopy(x) for x in (out.fleets, out.clusters, out.transforms))
    fleets["pinned"]["RegisterScalableTarget"]["MaxCapacity"] = 7
    fleets["fleet"]["CreateEndpointConfig"]["ShadowProductionVariants"] = [
        {
            "VariantName": "Shadow",
            "InstanceType": "ml.c5.xlarge",
            "InitialInstanceCount": 2,
            "InitialVariantWeight": 0.25,
        }
    ]
    clusters["lab"]["InstanceGroups"][1]["InstanceCount"] = 6
    transforms["rescore"]["CreateTransformJob ml.m5.2xlarge"]["TransformResources"]["InstanceType"] = (
        "ml.c5.4xlarge"
    )
    changed = dataclasses.replace(out, fleets=fleets, clusters=clusters, transforms=transforms)

    before = {(r.kind, r.key, r.instance_type): r for r in assess(plan, out, OFF).rows}
    after = {(r.kind, r.key, r.instance_type): r for r in assess(plan, changed, OFF).rows}
    assert before["endpoint", "pinned", "ml.c5.2xlarge"].count == 3  # the spec's autoscaling max
    assert after["endpoint", "pinned", "ml.c5.2xlarge"].count == 7
    assert after["endpoint", "pinned", "ml.c5.2xlarge"].cost_basis == "per month at 1 instance(s) (7 at most)"
    assert ("shadow", "fleet", "ml.c5.xlarge") not in before
    shadow = after["shadow", "fleet", "ml.c5.xlarge"]
    assert shadow.count == 2 and shadow.note == "shadow: 25% of requests copied"
    assert after["endpoint", "fleet", "ml.c5.xlarge"].needed == 4  # production's 2 + the shadow's 2
    assert after["cluster", "lab/gpu", "ml.g5.8xlarge"].count == 6
    assert ("transform", "rescore", "ml.m5.2xlarge") not in after
    assert after["transform", "rescore", "ml.c5.4xlarge"].quota == "ml.c5.4xlarge for transform job usage"


def test_synth_s_quota_check_and_plan_count_alike(broad):
    """Synth checks `render_training`'s rendering, `plan` `render_environment`'s: the same rows."""
    project, plan = broad
    training = assess(plan, render_training(plan, project.root), OFF).rows
    environment = assess(plan, render_environment(plan, project.root), OFF).rows
    assert training == environment
    assert {r.kind for r in training} >= {"job", "tuning", "endpoint", "transform", "cluster", "aggregate"}
