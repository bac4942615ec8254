"""InferenceEndpoint's two doors build one config: a resolved `endpoints:` entry (the spec path) and
a library user's typed props meaning the same endpoint render the same CreateEndpointConfig
(endpoints/config_request.py) into the same AWS::SageMaker::EndpointConfig — so a field added to one
door and not the other, or translated differently, fails here. Also: the typed door takes
CloudFormation tokens where the deployment gives the value (a model package or training plan ARN
from a parameter), validated at synth with stand-ins as the deployment's own tokens are."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Duration, Size, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from sagestack.constructs import (
    ArtifactBucket,
    AsyncInference,
    AutoScaling,
    DataCapture,
    InferenceComponent,
    InferenceEndpoint,
    LlmModel,
    ServerlessConfig,
    ShadowVariant,
)
from sagestack.endpoints.models import EndpointSpec
from sagestack.endpoints.resolved import ResolvedEndpoint
from sagestack.llm.hosting import volume_size_gb
from sagestack.llm.sizing import timeouts

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
CANDIDATE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/4"
PLAN = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/plan-1"
LLM = {"container": "djl-lmi", "weights": {"s3": "models/chat/"}, "parameters": 8.0e9, "dtype": "bf16"}
KEY = "digits"  # the endpoint's key: its folder under capture/ and async/

# (the `endpoints:` entry, the typed props meaning the same endpoint: artifacts -> props)
CASES: dict[str, tuple[dict[str, Any], Any]] = {
    "pools, reservation, shadow, capture": (
        {
            "model_package": PIN,
            "instance_type": ["ml.g5.xlarge", "ml.g6.xlarge", "ml.m5.large"],
            "initial_instance_count": 2,
            "provision_timeout": 600,
            "capacity_reservation": PLAN,
            "shadow": {"model_package": CANDIDATE, "sampling_percent": 30, "instance_type": "ml.m5.large"},
            "data_capture": {"sampling_percent": 20},
            "autoscaling": {"min": 2, "max": 5},
        },
        lambda art: {
            "model_package": PIN,
            "instance_type": ["ml.g5.xlarge", "ml.g6.xlarge", "ml.m5.large"],
            "initial_instance_count": 2,
            "provision_timeout": Duration.minutes(10),
            "capacity_reservation": PLAN,
            "shadow": ShadowVariant(
                model_package=CANDIDATE, instance_type="ml.m5.large", sampling_percent=30
            ),
            "data_capture": DataCapture(artifacts=art, sampling_percentage=20, folder=KEY),
            "autoscaling": AutoScaling(min_capacity=2, max_capacity=5),
        },
    ),
    "async, notified": (
        {
            "model_package": PIN,
            "instance_type": "ml.m5.large",
            "async": {"max_concurrent_invocations_per_instance": 4, "include_response_in_notification": True},
            "autoscaling": {"min": 0, "max": 3},
        },
        lambda art: {
            "model_package": PIN,
            "instance_type": "ml.m5.large",
            "async_inference": AsyncInference(
                artifacts=art,
                max_concurrent_invocations_per_instance=4,
                include_response_in_notification=True,
                folder=KEY,
            ),
            "autoscaling": AutoScaling(min_capacity=0, max_capacity=3),
        },
    ),
    "serverless": (
        {"model_package": PIN, "serverless": {"memory_mb": 3072, "max_concurrency": 7}},
        lambda art: {
            "model_package": PIN,
            "serverless": ServerlessConfig(memory_size=Size.gibibytes(3), max_concurrency=7),
        },
    ),
    "components": (
        {
            "instance_type": "ml.g5.12xlarge",
            "autoscaling": {"min": 0, "max": 4},
            "components": {"small": {"model_package": PIN, "memory_mb": 1024, "copies": 2}},
        },
        lambda art: {
            "instance_type": "ml.g5.12xlarge",
            "autoscaling": AutoScaling(min_capacity=0, max_capacity=4),
            "components": [
                InferenceComponent(name="small", memory=Size.mebibytes(1024), model_package=PIN, copies=2)
            ],
        },
    ),
    "an LLM with a shadow": (
        {"llm": LLM, "instance_type": "ml.g5.12xlarge", "shadow": {"model_package": CANDIDATE}},
        lambda art: {
            "llm": _llm(["ml.g5.12xlarge"]),
            "instance_type": "ml.g5.12xlarge",
            "shadow": ShadowVariant(model_package=CANDIDATE, instance_type="ml.g5.12xlarge"),
        },
    ),
}


def _llm(types: list[str]) -> LlmModel:
    """LLM as a library user hosts it: their own image and weights, the timeouts and volume as numbers."""
    spec = EndpointSpec.model_validate({"llm": LLM}).llm
    assert spec is not None
    download, startup = timeouts(spec)
    return LlmModel(
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
        weights_uri="s3://weights/chat/",
        download_timeout=Duration.seconds(download),
        startup_timeout=Duration.seconds(startup),
        volume_size_gb=volume_size_gb(spec, types),
    )


def _resolved(entry: dict[str, Any]) -> ResolvedEndpoint:
    return ResolvedEndpoint(
        key=KEY,
        spec=EndpointSpec.model_validate(entry),
        endpoint_name="digits-prod-digits",
        target=None,
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312",
        supported_instance_types=(),
        compile_name_prefix="digits-prod-digits",
    )


def _config(stack: Stack, door: str) -> dict[str, Any]:
    """The door's EndpointConfig as deployed, its references to the door's own resources (models,
    topics) by their construct path below the endpoint."""
    (config,) = [
        c
        for c in stack.node.find_all()
        if c.node.path.endswith(f"/{door}/Config") and hasattr(c, "cfn_options")
    ]
    text = json.dumps(stack.resolve(config._render_properties(config._cfn_properties)), sort_keys=True)
    return json.loads(re.sub(rf'"{door}([A-Za-z0-9]+?)[0-9A-F]{{8}}"', r'"<\1>"', text))


@pytest.mark.parametrize("case", sorted(CASES))
def test_typed_props_and_the_spec_build_the_same_endpoint_config(case, tmp_path):
    entry, typed = CASES[case]
    stack = Stack(App(outdir=str(tmp_path)), "S")
    key = kms.Key(stack, "Key")
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    common = {"endpoint_name": "digits-prod-digits", "execution_role": role, "encryption_key": key}
    InferenceEndpoint(
        stack, "Spec", **common, resolved=_resolved(entry), region="us-east-1", artifacts=artifacts
    )
    InferenceEndpoint(stack, "Typed", **common, **typed(artifacts))
    spec, typed_config = _config(stack, "Spec"), _config(stack, "Typed")
    assert spec["ProductionVariants"], spec
    assert typed_config == spec


def test_both_doors_tag_what_bills_for_the_endpoint_with_it(tmp_path):
    """sagestack:endpoint on the endpoint, its config, models and components (what `sagestack cost`
    groups by): the spec's key on the spec door, the endpoint's name on the typed door; the alarms
    and topics keep only the stack's tags."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "S")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=kms.Key(stack, "Key"))
    InferenceEndpoint(
        stack,
        "Spec",
        endpoint_name="digits-prod-digits",
        execution_role=role,
        resolved=_resolved({"model_package": PIN, "instance_type": "ml.m5.large"}),
        region="us-east-1",
        artifacts=artifacts,
    )
    InferenceEndpoint(
        stack,
        "Typed",
        endpoint_name="digits-prod-other",
        execution_role=role,
        model_package=PIN,
        instance_type="ml.m5.large",
    )
    template = app.synth().get_stack_by_name("S").template
    tagged: dict[str, list[str]] = {}
    for lid, resource in template["Resources"].items():
        tags = {t["Key"]: t["Value"] for t in resource.get("Properties", {}).get("Tags", [])}
        if "sagestack:endpoint" in tags:
            tagged.setdefault(tags["sagestack:endpoint"], []).append(resource["Type"].split("::")[-1])
        else:
            assert not resource["Type"].startswith("AWS::SageMaker::"), (lid, resource["Type"])
    assert {k: sorted(v) for k, v in tagged.items()} == {
        KEY: ["Endpoint", "EndpointConfig", "Model"],
        "digits-prod-other": ["Endpoint", "EndpointConfig", "Model"],
    }


def test_the_typed_door_takes_tokens_where_the_deployment_gives_the_value(tmp_path):
    """A model package and a training plan from parameters: the config holds the references, and
    synth validates the request with stand-ins for them (as it does the role's and the key's)."""
    app = App(outdir=str(tmp_path))
    stack = Stack(app, "S")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    package = CfnParameter(stack, "Package").value_as_string
    plan = CfnParameter(stack, "Plan").value_as_string
    InferenceEndpoint(
        stack,
        "E",
        endpoint_name="e",
        model_package=package,
        execution_role=role,
        instance_type=["ml.g5.xlarge", "ml.g6.xlarge"],
        capacity_reservation=plan,
        shadow=ShadowVariant(model_package=package, instance_type="ml.g5.xlarge"),
    )
    template = app.synth().get_stack_by_name("S").template
    (config,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    (variant,) = config["Properties"]["ProductionVariants"]
    assert variant["CapacityReservationConfig"]["MlReservationArn"] == {"Ref": "Plan"}
    assert config["Properties"]["ShadowProductionVariants"][0]["VariantName"] == "Shadow"
