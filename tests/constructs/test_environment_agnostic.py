"""The constructs in an environment-agnostic stack (no env=: account and region are tokens the
template resolves at deploy), as aws-cdk-lib's are; where synth truly needs a concrete region, the
error names the prop, why, and the fix."""

from __future__ import annotations

import json

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


def test_debugger_rules_run_in_the_deploy_region_s_evaluator_image():
    """The rule evaluator's registry account differs per region: an agnostic stack reads it at deploy
    from a mapping; the request is validated with the stand-in region's image."""
    from sagestack.core.catalog.images import debugger_rules_image_uri

    app, stack, base = _agnostic()
    _training(stack, base, options={"debugger": {"rules": ["loss_not_decreasing"]}})
    template = app.synth().get_stack_by_name("Agnostic").template
    images = template["Mappings"]["DebuggerRuleEvaluatorImages"]
    assert images["eu-west-1"] == {"uri": debugger_rules_image_uri("eu-west-1")}
    (machine,) = template_resources(template, "AWS::StepFunctions::StateMachine")
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    find = {"Fn::FindInMap": ["DebuggerRuleEvaluatorImages", {"Ref": "AWS::Region"}, "uri"]}
    assert json.dumps(find) in definition


PACKAGE = "arn:aws:sagemaker:us-east-1:111122223333:model-package/digits-dev/1"


def test_the_serving_and_pipeline_constructs_synthesize_anywhere(tmp_path):
    """Tuning, registration, endpoints, transform, Model Monitor, MLflow and a retraining schedule in
    a stack with no env=, cdk-nag on: no finding. The monitor's analyzer image (its registry account
    differs per region) is read at deploy from a mapping of the regions sagemaker-core knows."""
    from aws_cdk import App, Size, Stack, Validations
    from aws_cdk import aws_kms as kms
    from cdk_nag import AwsSolutionsChecks

    from sagestack.constructs import (
        ArtifactBucket,
        AutoScaling,
        DataCapture,
        ExecutionRole,
        InferenceEndpoint,
        MlflowTrackingServer,
        ModelMonitor,
        ModelPackageGroup,
        ModelRegistration,
        Names,
        RetrainingSchedule,
        ServerlessConfig,
        TransformPipeline,
        TuningPipeline,
    )
    from sagestack.constructs.nag import unacknowledged_findings
    from sagestack.monitoring.states import analyzer_image

    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Anywhere")
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    role = ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)
    names = Names("digits", "dev")
    base = {"names": names, "execution_role": role, "artifacts": artifacts, "encryption_key": key}
    registry = ModelPackageGroup(stack, "Registry", group_name=names.model_package_group)
    compile_ = {"target_device": "ml_c5", "framework": "PYTORCH", "framework_version": "2.0"}
    compile_["input_shapes"] = {"input0": [1, 1, 8, 8]}
    training = _training(
        stack,
        base,
        metric_definitions={"val_accuracy": "val_accuracy=([0-9.]+)"},
        registry=registry,
        registrations=[ModelRegistration("digits", compile=compile_, instance_type="ml.c5.xlarge")],
    )
    TuningPipeline(
        stack,
        "Search",
        training=training,
        objective_metric="val_accuracy",
        objective_type="Maximize",
        ranges={"lr": {"continuous": [1e-4, 1e-1]}},
        max_jobs=4,
    )
    endpoint = InferenceEndpoint(
        stack,
        "Endpoint",
        endpoint_name=names.endpoint("digits"),
        model_package=PACKAGE,
        execution_role=role,
        encryption_key=key,
        instance_type="ml.c5.xlarge",
        data_capture=DataCapture(artifacts=artifacts),
        autoscaling=AutoScaling(max_capacity=2),
    )
    InferenceEndpoint(
        stack,
        "Serverless",
        endpoint_name=names.endpoint("serverless"),
        model_package=PACKAGE,
        execution_role=role,
        serverless=ServerlessConfig(memory_size=Size.gibibytes(2)),
    )
    TransformPipeline(stack, "Score", model_package=PACKAGE, instance_types=["ml.m5.xlarge"], **base)
    MlflowTrackingServer(stack, "Tracking", name="digits-dev", artifacts=artifacts, encryption_key=key)
    RetrainingSchedule(stack, "Weekly", pipeline=training, expression="rate(7 days)")
    ModelMonitor(stack, "Monitor", endpoint=endpoint, endpoint_key="digits", **base)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    template = app.synth().get_stack_by_name("Anywhere").template
    assert unacknowledged_findings(tmp_path / "cdk.out") == []
    images = template["Mappings"]["ModelMonitorAnalyzerImages"]
    assert images["us-east-1"] == {"uri": analyzer_image("us-east-1")}
    assert images["cn-north-1"]["uri"].endswith(".amazonaws.com.cn/sagemaker-model-monitor-analyzer")
    (definition,) = template_resources(template, "AWS::SageMaker::DataQualityJobDefinition")
    image_uri = definition["Properties"]["DataQualityAppSpecification"]["ImageUri"]
    assert image_uri == {"Fn::FindInMap": ["ModelMonitorAnalyzerImages", {"Ref": "AWS::Region"}, "uri"]}


def template_resources(template: dict, type_: str) -> list[dict]:
    return [r for r in template["Resources"].values() if r["Type"] == type_]
