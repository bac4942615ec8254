"""Scheduled retraining: the schedule and its role in the template, and the retrainable pipeline run
by moto's Step Functions interpreter — a spec run follows the job its hash names, a retrain trains
again under fresh names (job, job-name hyperparameter, checkpoint prefix)."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from tests.pipeline.conftest import definition, example_copy
from tests.support.moto_server import ACCOUNT

pytestmark = pytest.mark.synth

MACHINE = "digits-dev-classifier-spot"
JOB = "classifier-spot"


@pytest.fixture(scope="module")
def scheduled_app(tmp_path_factory):
    from tests.support.cdk_app import BuiltApp

    project = example_copy(tmp_path_factory)
    root = project.root
    dev = root / "config/envs/dev.yaml"
    # classifier-spot: a checkpointing job whose pipeline ends at training (nothing to register).
    text = dev.read_text().replace(
        "    instance_count: 1\n",
        "    instance_count: 1\n    schedule: {expression: cron(0 3 ? * MON *), timezone: Europe/Berlin, window: 30m}\n",
    )
    assert "schedule:" in text
    dev.write_text(text + "pipeline: {poll_interval: 1s, backoff: 1s}\n")
    # A snapshot naming the quota's code: one GetServiceQuota (which moto cannot answer; the pipeline
    # proceeds at once) instead of ListServiceQuotas retried with back-off.
    quota = {
        "QuotaName": "ml.g5.12xlarge for spot training job usage",
        "QuotaCode": "L-0123ABCD",
        "Value": 4.0,
    }
    (root / "config/envs/dev.quotas.json").write_text(json.dumps({"quotas": [quota]}))
    built = BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev"])
    built.root = project.root  # type: ignore[attr-defined]
    return built


def test_the_schedule_starts_only_its_pipeline(scheduled_app):
    from aws_cdk.assertions import Template

    training = scheduled_app.stages["dev"].training
    template = Template.from_stack(training).to_json()["Resources"]
    (schedule,) = [r["Properties"] for r in template.values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert schedule["ScheduleExpression"] == "cron(0 3 ? * MON *)"
    assert schedule["ScheduleExpressionTimezone"] == "Europe/Berlin"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": 30}
    assert schedule["State"] == "ENABLED" and schedule["Name"] == "digits-dev-classifier-spot-retrain"
    machine_id = next(
        k
        for k, r in template.items()
        if r["Type"] == "AWS::StepFunctions::StateMachine" and r["Properties"]["StateMachineName"] == MACHINE
    )
    assert schedule["Target"]["Arn"] == {"Ref": machine_id}
    assert (
        json.loads(schedule["Target"]["Input"])["retrain"]["scheduled_time"]
        == "<aws.scheduler.scheduled-time>"
    )
    role_id = schedule["Target"]["RoleArn"]["Fn::GetAtt"][0]
    trust = template[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    (policy,) = [
        r["Properties"]
        for r in template.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]
    ]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "states:StartExecution" and statement["Resource"] == {"Ref": machine_id}


def _execute(moto, machine: str, payload: dict) -> dict:
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=machine, name=uuid.uuid4().hex, input=json.dumps(payload)
    )["executionArn"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            history = sfn.get_execution_history(executionArn=execution)["events"]
            described["inputs"] = {
                e["stateEnteredEventDetails"]["name"]: json.loads(e["stateEnteredEventDetails"]["input"])
                for e in history
                if "stateEnteredEventDetails" in e
            }
            return described
        time.sleep(0.2)
    raise AssertionError("the execution did not end")


def test_a_retrain_trains_again_under_fresh_names(moto, scheduled_app):
    moto.reset()
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    moto.client("sagemaker").create_model_package_group(ModelPackageGroupName="digits-dev")
    machine = moto.client("stepfunctions").create_state_machine(
        name=MACHINE,
        definition=definition(scheduled_app, MACHINE, topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]
    sm = moto.client("sagemaker")
    digest = scheduled_app.stages["dev"].training.job_plans[JOB].digest
    spec_name = scheduled_app.stages["dev"].training.job_plans[JOB].candidates[0].name

    def jobs() -> list[str]:
        return sorted(j["TrainingJobName"] for j in sm.list_training_jobs()["TrainingJobSummaries"])

    # A run of the spec, twice: one job, the one the content hash names.
    for _ in range(2):
        result = _execute(moto, machine, {})
        assert result["status"] == "SUCCEEDED", result
        assert json.loads(result["output"])["TrainingJobName"] == spec_name
    assert sm.describe_training_job(TrainingJobName=spec_name)["CheckpointConfig"]["S3Uri"].endswith(
        f"/checkpoints/{JOB}/{digest}/"
    )
    assert jobs() == [spec_name]

    # Two retrains: two new jobs, each with its own checkpoint prefix and name hyperparameter.
    fresh = []
    for _ in range(2):
        result = _execute(moto, machine, {"retrain": {"by": "test"}})
        assert result["status"] == "SUCCEEDED", result
        name = json.loads(result["output"])["TrainingJobName"]
        m = re.fullmatch(re.escape(spec_name[:54].rstrip("-")) + r"-([0-9a-f]{8})", name)
        assert m, name
        assert len(name) <= 63
        job = sm.describe_training_job(TrainingJobName=name)
        assert job["HyperParameters"]["sagemaker_job_name"] == json.dumps(name)
        assert job["CheckpointConfig"]["S3Uri"].endswith(f"/checkpoints/{JOB}/{digest}/{m[1]}/")
        fresh.append(name)
    assert len(set(fresh)) == 2
    assert jobs() == sorted([spec_name, *fresh])


def test_sagestack_run_retrain(moto, scheduled_app):
    from tests.pipeline.test_training_pipeline_moto import _cli

    moto.reset()
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    moto.client("stepfunctions").create_state_machine(
        name=MACHINE,
        definition=definition(scheduled_app, MACHINE, topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )
    result = _cli(moto, scheduled_app.root, "run", JOB, "--env", "dev", "--retrain", "--poll", "0.2")
    assert result.returncode == 0, result.stderr
    assert "→ Names of the retrain" in result.stdout and "✓ succeeded" in result.stdout
    spec_name = scheduled_app.stages["dev"].training.job_plans[JOB].candidates[0].name
    (job,) = [
        j["TrainingJobName"] for j in moto.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]
    ]
    assert job != spec_name and job.startswith(spec_name[:54].rstrip("-") + "-")
    # A job without a schedule has no retrain path: said before anything starts.
    refused = _cli(moto, scheduled_app.root, "run", "classifier", "--env", "dev", "--retrain")
    assert refused.returncode == 1 and "--retrain needs a job with schedule:" in refused.stderr
    assert "Traceback" not in refused.stderr
