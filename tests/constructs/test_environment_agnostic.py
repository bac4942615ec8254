"""The constructs in an environment-agnostic stack (no env=: account and region are tokens the
template resolves at deploy), as aws-cdk-lib's are; where synth truly needs a concrete region, the
error names the prop, why, and the fix."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311-ubuntu22.04-sagemaker"


def _agnostic():  # type: ignore[no-untyped-def]
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from sagestack.app.builder import cdk_json_context
    from sagestack.constructs import ArtifactBucket, ExecutionRole, Names

    app = App(context=cdk_json_context(REPO))
    stack = Stack(app, "Agnostic")
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    role = ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)
    base = {
        "names": Names("digits", "dev"),
        "execution_role": role,
        "artifacts": artifacts,
        "encryption_key": key,
    }
    return app, stack, base


def _training(stack, base, **props):  # type: ignore[no-untyped-def]
    from aws_cdk import Duration

    from sagestack.constructs import TrainingImage, TrainingPipeline

    return TrainingPipeline(
        stack,
        "Classifier",
        image=TrainingImage.from_registry(IMAGE),
        code=str(REPO / "training_src"),
        instance_types=["ml.m5.xlarge"],
        max_runtime=Duration.hours(1),
        **base,
        **props,
    )


def test_a_training_pipeline_synthesizes_in_an_environment_agnostic_stack():
    """The job's request names the deployment's region (AWS::Region), and is still validated against
    botocore's model at synth (with stand-ins)."""
    app, stack, base = _agnostic()
    _training(stack, base)
    template = app.synth().get_stack_by_name("Agnostic").template
    machine = next(
        r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"
    )
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert '{"Ref": "AWS::Region"}' in definition
    # the one concrete region in it is the image the app chose
    assert definition.replace(IMAGE, "").count("us-east-1") == 0


def test_debugger_rules_need_a_concrete_region_and_say_which_prop_and_why():
    _, stack, base = _agnostic()
    with pytest.raises(ValueError) as raised:
        _training(stack, base, options={"debugger": {"rules": ["loss_not_decreasing"]}})
    assert str(raised.value) == (
        "TrainingPipeline 'Classifier': region: the job's Debugger/Profiler rules run in the region's "
        "rule evaluator image, looked up at synth, and this stack's region is not known until deploy; "
        'give region="us-east-1" (or the stack env=Environment(region=...))'
    )
    _training(
        stack,
        base,
        region="us-east-1",
        job="with-rules",
        options={"debugger": {"rules": ["loss_not_decreasing"]}},
    )
