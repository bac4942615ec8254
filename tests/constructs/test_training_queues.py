"""queues: AWS Batch queues for SageMaker training jobs. A queue deploys as a service environment
(its capacity limit), a fair-share scheduling policy (its shares' weight factors) and a job queue of
type SAGEMAKER_TRAINING; a queued job's pipeline submits the job's unchanged CreateTrainingJob body
as a service job. Synthesized with an account (prod) and without (dev), cdk-nag clean, cfn-lint clean."""

from __future__ import annotations

import json

import pytest

from tests.conftest import MINIMAL

pytestmark = pytest.mark.synth

SPEC = (
    MINIMAL.replace("    instance_type: ml.m5.xlarge\n", "    instance_type: ml.g5.2xlarge\n")
    + "    instance_count: 2\n"
    + "    queue: {name: shared, share: research, priority: 10}\n"
    + "  baseline:\n    image: train\n    instance_type: ml.m5.xlarge\n    queue: {name: fifo}\n"
    + "queues:\n"
    + "  shared:\n    max_instances: 8\n    shares: {research: 1.0, production: 0.5}\n"
    + "    share_decay_seconds: 3600\n"
    + "  fifo:\n    max_instances: 2\n"
)


@pytest.fixture(scope="module")
def queued_app(tmp_path_factory):
    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("queues") / "p")
    project.spec(SPEC).env("dev").env("prod", 'account: "111111111111"\n')
    out = tmp_path_factory.mktemp("out")
    built = BuiltApp(project.root, out, ["dev", "prod"])  # fails on any unacknowledged cdk-nag finding
    built.outdir = out  # type: ignore[attr-defined]
    return built


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_a_queue_is_a_service_environment_a_policy_and_a_job_queue(queued_app, env):
    t = queued_app.training_template(env)
    environments = {
        r["Properties"]["ServiceEnvironmentName"]: r["Properties"]
        for r in t.find_resources("AWS::Batch::ServiceEnvironment").values()
    }
    assert environments[f"digits-{env}-shared"]["ServiceEnvironmentType"] == "SAGEMAKER_TRAINING"
    assert environments[f"digits-{env}-shared"]["CapacityLimits"] == [
        {"MaxCapacity": 8, "CapacityUnit": "NUM_INSTANCES"}
    ]
    (policy,) = t.find_resources("AWS::Batch::SchedulingPolicy").values()  # the fifo queue has none
    fair = policy["Properties"]["FairsharePolicy"]
    assert fair["ShareDecaySeconds"] == 3600
    assert fair["ShareDistribution"] == [
        {"ShareIdentifier": "research", "WeightFactor": 1},
        {"ShareIdentifier": "production", "WeightFactor": 0.5},
    ]
    queues = {
        r["Properties"]["JobQueueName"]: r["Properties"]
        for r in t.find_resources("AWS::Batch::JobQueue").values()
    }
    assert queues[f"digits-{env}-shared"]["JobQueueType"] == "SAGEMAKER_TRAINING"
    assert "SchedulingPolicyArn" in queues[f"digits-{env}-shared"]
    assert "SchedulingPolicyArn" not in queues[f"digits-{env}-fifo"]


def _states(app, env: str, job: str) -> dict:
    t = app.training_template(env)
    for r in t.find_resources("AWS::StepFunctions::StateMachine").values():
        if r["Properties"]["StateMachineName"] == f"digits-{env}-{job}":
            return r["Properties"]["DefinitionString"]
    raise AssertionError(job)


def test_the_queued_pipeline_submits_to_its_queue_and_may_only_do_that(queued_app):
    """The state machine submits to Batch (no CreateTrainingJob of its own); its role may submit to
    its queue, and tag what it submits, only with the environment's tags in the request."""
    from aws_cdk.assertions import Template

    stack = queued_app.stages["prod"].training
    definition = json.dumps(_states(queued_app, "prod", "classifier"))
    assert "aws-sdk:batch:submitServiceJob" in definition and "createTrainingJob" not in definition
    assert "digits-prod-shared" in definition and '\\"ShareIdentifier\\":\\"research\\"' in definition
    statements = [
        st
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (submit,) = [st for st in statements if st["Action"] == "batch:SubmitServiceJob"]
    queues = submit["Resource"] if isinstance(submit["Resource"], list) else [submit["Resource"]]
    assert sorted(q.rsplit(":", 1)[1] for q in queues) == [
        "job-queue/digits-prod-fifo",
        "job-queue/digits-prod-shared",
    ]
    assert submit["Condition"]["StringEquals"]["aws:RequestTag/sagestack:environment"] == "prod"
    (tag,) = [st for st in statements if st["Action"] == "batch:TagResource"]
    assert tag["Condition"] == submit["Condition"]


def _states(app, env: str, job: str):  # type: ignore[no-untyped-def]
    t = app.training_template(env)
    for r in t.find_resources("AWS::StepFunctions::StateMachine").values():
        if r["Properties"]["StateMachineName"] == f"digits-{env}-{job}":
            return r["Properties"]["DefinitionString"]
    raise AssertionError(job)


def test_the_queue_templates_pass_cfn_lint(queued_app):
    from tests.support.cfn import cfn_lint

    templates = sorted(str(p) for p in queued_app.outdir.glob("assembly-*/*.template.json"))
    code, output = cfn_lint(templates)
    assert code == 0, output
