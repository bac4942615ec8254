"""TrainingStack: template assertions on the example app's training pipelines."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from tests.conftest import MINIMAL

pytestmark = pytest.mark.synth


def _definition(example_app, env: str, job: str) -> dict:
    return example_app.stages[env].training.pipelines[job].definition


def test_one_state_machine_per_job_with_logging_and_tracing(example_app):
    t = example_app.training_template("prod")
    spec = example_app.stages["prod"].plan.spec
    t.resource_count_is("AWS::StepFunctions::StateMachine", len(spec.jobs) + len(spec.tuning))
    t.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": "digits-prod-classifier-spot",
            "LoggingConfiguration": {
                "Level": "ALL",
                "IncludeExecutionData": True,
                "Destinations": Match.any_value(),
            },
            "TracingConfiguration": {"Enabled": True},
        },
    )
    t.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 90, "KmsKeyId": Match.any_value()})


def test_the_pipeline_log_group_is_encrypted_with_the_project_key(example_app):
    """Execution data at level ALL (hyperparameters, artifacts) is encrypted like everything else;
    the key lets CloudWatch Logs use it for that one log group."""
    training = example_app.training_template("prod").to_json()
    (group,) = [r for r in training["Resources"].values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert "Fn::ImportValue" in json.dumps(group["Properties"]["KmsKeyId"])  # the foundation's key
    foundation = example_app.template("prod").to_json()
    (key,) = [r for r in foundation["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    logs = [s for s in statements if "logs." in json.dumps(s.get("Principal", {}))]
    assert len(logs) == 1 and "kms:GenerateDataKey*" in logs[0]["Action"]
    assert "/aws/vendedlogs/states/sagestack/digits-prod" in json.dumps(logs[0]["Condition"])


def test_pipeline_uses_sdk_integrations_with_polling_not_sync(example_app):
    states = _definition(example_app, "dev", "classifier")["States"]
    resources = {s.get("Resource") for s in states.values() if s["Type"] == "Task"}
    assert resources == {
        "arn:aws:states:::aws-sdk:sagemaker:createTrainingJob",
        "arn:aws:states:::aws-sdk:sagemaker:describeTrainingJob",
        "arn:aws:states:::aws-sdk:sns:publish",
        # the example's batch transform, after registration
        "arn:aws:states:::aws-sdk:sagemaker:createModel",
        "arn:aws:states:::aws-sdk:sagemaker:createTransformJob",
        "arn:aws:states:::aws-sdk:sagemaker:describeTransformJob",
        # no quota snapshot in dev: each candidate's quota is found by its name
        "arn:aws:states:::aws-sdk:servicequotas:listServiceQuotas",
        # the example's endpoint: compile the trained model, register it
        "arn:aws:states:::aws-sdk:sagemaker:createCompilationJob",
        "arn:aws:states:::aws-sdk:sagemaker:describeCompilationJob",
        "arn:aws:states:::aws-sdk:sagemaker:createModelPackage",
    }
    assert not any(".sync" in (r or "") for r in resources)
    assert states["Wait 1/2"] == {"Type": "Wait", "Seconds": 60, "Next": "Describe 1/2"}


def test_each_candidate_gets_its_own_request(example_app):
    states = _definition(example_app, "prod", "classifier-spot")["States"]
    first, second = states["Create 1/2"]["Parameters"], states["Create 2/2"]["Parameters"]
    assert first["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert second["ResourceConfig"]["InstanceType"] == "ml.g5.48xlarge"
    assert first["ResourceConfig"]["InstanceCount"] == 4  # prod overlay
    assert first["HyperParameters"]["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'
    assert first["EnableManagedSpotTraining"] is True
    assert first["StoppingCondition"] == {"MaxRuntimeInSeconds": 14400, "MaxWaitTimeInSeconds": 28800}


def test_pipeline_role_passes_only_the_execution_role_and_touches_only_its_jobs(example_app):
    t = example_app.training_template("prod")
    (policy,) = _pipeline_role_policies(t)
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (create,) = [s for s in statements if "sagemaker:CreateTrainingJob" in s["Action"]]
    assert ':training-job/digits-prod-*"' in json.dumps(create["Resource"])
    (passrole,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert passrole["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    assert "ExecutionRole" in json.dumps(passrole["Resource"])
    assert not [s for s in statements if s["Action"] in ("sagemaker:*", "*", "iam:*")]


def test_failures_alarm_and_notify_an_encrypted_topic(example_app):
    t = example_app.training_template("dev")
    spec = example_app.stages["dev"].plan.spec
    t.resource_count_is("AWS::CloudWatch::Alarm", len(spec.jobs) + len(spec.tuning))
    t.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "ExecutionsFailed",
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "AlarmActions": [{"Ref": Match.string_like_regexp("^Notifications")}],
        },
    )
    t.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def test_run_on_deploy_starts_an_execution_named_after_the_hash(project, tmp_path):
    from tests.support.cdk_app import BuiltApp

    project.spec(MINIMAL + "    run_on_deploy: true\n").env("dev", "retain_data: false\n")
    built = BuiltApp(project.root, tmp_path / "out", ["dev"])
    digest = built.stages["dev"].training.job_plans["classifier"].digest
    t = built.training_template("dev")
    (resource,) = t.find_resources("Custom::AWS").values()
    create = json.dumps(resource["Properties"]["Create"])
    assert f"deploy-{digest}" in create and "startExecution" in create and "ExecutionAlreadyExists" in create


def test_no_job_no_deploy_trigger(example_app):
    example_app.training_template("dev").resource_count_is("Custom::AWS", 0)


def test_hundred_jobs_stay_under_the_resource_limit(project, tmp_path):
    from tests.support.cdk_app import BuiltApp

    jobs = "".join(f"  job{i}:\n    image: train\n    instance_type: ml.m5.xlarge\n" for i in range(100))
    spec = MINIMAL.split("jobs:")[0] + "jobs:\n" + jobs
    project.spec(spec).env("dev", "retain_data: false\n")
    built = BuiltApp(project.root, tmp_path / "out", ["dev"])
    count = len(built.training_template("dev").to_json()["Resources"])
    assert count < 500, count


def test_tuning_pipeline_may_touch_only_the_projects_searches_and_its_parameters(example_app):
    t = example_app.training_template("prod")
    t.has_resource_properties(
        "AWS::StepFunctions::StateMachine", {"StateMachineName": "digits-prod-tune-lr-search"}
    )
    (policy,) = _pipeline_role_policies(t)
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (tuning,) = [s for s in statements if "sagemaker:CreateHyperParameterTuningJob" in s["Action"]]
    assert ":hyper-parameter-tuning-job/digits-*" in json.dumps(tuning["Resource"])
    (ssm,) = [s for s in statements if s["Action"] == "ssm:PutParameter"]
    assert ":parameter/sagestack/digits/prod/tuning/*" in json.dumps(ssm["Resource"])
    states = example_app.stages["prod"].training.tuning_pipelines["lr-search"].definition["States"]
    assert (
        states["Record best model"]["Parameters"]["Name"]
        == "/sagestack/digits/prod/tuning/lr-search/best-model"
    )


def _many_jobs(project, tmp_path, count: int, name: str):  # type: ignore[no-untyped-def]
    from tests.support.cdk_app import BuiltApp

    jobs = "".join(f"  job{i}:\n    image: train\n    instance_type: ml.m5.xlarge\n" for i in range(count))
    project.spec(MINIMAL.split("jobs:")[0] + "jobs:\n" + jobs).env("dev", "retain_data: false\n")
    return BuiltApp(project.root, tmp_path / name, ["dev"])


def test_beyond_a_hundred_jobs_pipelines_spread_over_stable_shard_stacks(project, tmp_path):
    from aws_cdk import Stack
    from aws_cdk.assertions import Template

    from sagestack.app.training import PIPELINES_IN_ONE_STACK, pipeline_shard

    count = PIPELINES_IN_ONE_STACK + 30
    built = _many_jobs(project, tmp_path, count, "a")
    training = built.stages["dev"].training
    where = {k: Stack.of(p).stack_name for k, p in training.pipelines.items()}
    assert len(where) == count
    assert all(name == f"digits-dev-training-{pipeline_shard(k):02d}" for k, name in where.items())
    for stack in [training, *training.shards.values()]:
        resources = Template.from_stack(stack).to_json()["Resources"]
        assert len(resources) < 500, (stack.stack_name, len(resources))
    # the shared role, topic and log group stay in the training stack; shards only hold pipelines
    shard = next(iter(training.shards.values()))
    assert set(Template.from_stack(shard).find_resources("AWS::IAM::Role")) == set()

    # adding a job moves no other job's pipeline
    grown = _many_jobs(project, tmp_path, count + 1, "b")
    after = {k: Stack.of(p).stack_name for k, p in grown.stages["dev"].training.pipelines.items()}
    assert {k: after[k] for k in where} == where


def _pipeline_role_policies(t) -> list:
    """The policies of the pipelines' shared role (prod also has a retraining schedule's role)."""
    return [
        p
        for p in t.find_resources("AWS::IAM::Policy").values()
        if any("PipelineRole" in r.get("Ref", "") for r in p["Properties"]["Roles"])
    ]
