"""The example's performance targets measured in the cloud, synthesized in an environment without an
account (dev: digits) and one with (staging: digits and the chat LLM): one AIWorkloadConfig per
endpoint with an slo, and a pipeline whose create call is the request botocore's model accepts —
Inference Recommender for digits, an AI recommendation job for chat (logging to the environment's
MLflow tracking server). digits is measured on registration in both (the overlays' slo:
{on_registration: true}): an EventBridge rule on its group's approvals starts its pipeline, as a role
that may start that machine and nothing else. cdk-nag clean (the build fails on any finding),
cfn-lint clean."""

from __future__ import annotations

import json
import re

import pytest

from sagestack.core.catalog.service_model import validate_request
from tests.support.cfn import resolve

pytestmark = pytest.mark.synth

ACCOUNTS = {"dev": "123456789012", "staging": "222222222222"}


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    from tests.pipeline.conftest import example_copy
    from tests.support.cdk_app import BuiltApp

    project = example_copy(tmp_path_factory)
    return BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev", "staging"])


def _resources(example, env):  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    return Template.from_stack(example.stages[env].recommendation).to_json()["Resources"]


def _create_request(example, env: str, endpoint: str) -> tuple[str, dict]:  # type: ignore[no-untyped-def]
    """The create task's action and parameters, the template's tokens given sample values."""
    definition = _definition(example, env, endpoint)
    state = definition["States"][f"Recommend {endpoint}"]
    return state["Resource"].rsplit(":", 1)[1], state["Parameters"]


def _definition(example, env: str, endpoint: str) -> dict:  # type: ignore[no-untyped-def]
    resources = _resources(example, env)
    account = ACCOUNTS[env]
    (machine,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
        and r["Properties"]["StateMachineName"] == f"digits-{env}-recommend-{endpoint}"
    ]

    def ref(name: str) -> str:
        return {"AWS::AccountId": account, "AWS::Region": "us-east-1", "AWS::Partition": "aws"}.get(
            name, f"arn:aws:sns:us-east-1:{account}:topic"
        )

    def get_att(name: str, attribute: str) -> str:
        workload = resources[name]["Properties"]["AIWorkloadConfigName"]
        return f"arn:aws:sagemaker:us-east-1:{account}:ai-workload-config/{workload}"

    def import_value(export: str) -> str:
        for fragment, value in (
            ("ExecutionRole", f"arn:aws:iam::{account}:role/execution"),
            ("Artifacts", "bucket"),
            ("Key", f"arn:aws:kms:us-east-1:{account}:key/k"),
            (
                "TrackingServer",
                f"arn:aws:sagemaker:us-east-1:{account}:mlflow-tracking-server/digits-{env}-mlflow",
            ),
        ):
            if fragment in export:
                return value
        raise KeyError(export)

    return json.loads(resolve(machine["Properties"]["DefinitionString"], ref, get_att, import_value))


@pytest.mark.parametrize("env", ["dev", "staging"])
def test_a_workload_config_per_target_and_a_valid_classic_request(example, env):
    workloads = {
        r["Properties"]["AIWorkloadConfigName"]: r["Properties"]
        for r in _resources(example, env).values()
        if r["Type"] == "AWS::SageMaker::AIWorkloadConfig"
    }
    expected = {"dev": ["digits"], "staging": ["chat", "digits"]}[env]  # chat deploys in staging only
    assert sorted(n.removeprefix(f"digits{env}")[:-12] for n in workloads) == expected
    for name, props in workloads.items():
        assert name.isalnum() and name.islower() and len(name) <= 63  # DeleteAIWorkloadConfig lowercases
        spec = json.loads(props["AIWorkloadConfigs"]["WorkloadSpec"]["Inline"])
        assert spec["benchmark"]["type"] == "aiperf"
        validate_request("CreateAIWorkloadConfig", props)
    action, request = _create_request(example, env, "digits")
    assert action == "createInferenceRecommendationsJob"
    # unpinned: the package the environment serves is found at run time
    assert request["InputConfig"].pop("ModelPackageVersionArn.$") == "$.package.Arn"
    request["InputConfig"]["ModelPackageVersionArn"] = (
        f"arn:aws:sagemaker:us-east-1:{ACCOUNTS[env]}:model-package/g/1"
    )
    # ... and so is the job's name: the target's hash and the version found, rendered by the run
    assert request.pop("JobName.$") == "$.package.JobName"
    found = _definition(example, env, "digits")["States"]["Package found digits? keep"]["Parameters"]
    version = "States.ArrayGetItem(States.StringSplit($.ModelPackageArn, '/'), 2)"
    assert found["Version.$"] == version
    template = re.fullmatch(
        rf"States\.Format\('([a-z0-9-]+-v\{{\}})', {re.escape(version)}\)", found["JobName.$"]
    )
    assert template is not None, found["JobName.$"]
    assert re.fullmatch(rf"digits-{env}-digits-[0-9a-f]{{12}}-v\{{\}}", template[1])
    request["JobName"] = template[1].replace("{}", str(2**31 - 1))  # the longest version there is
    validate_request("CreateInferenceRecommendationsJob", request)
    assert request["StoppingConditions"]["ModelLatencyThresholds"] == [
        {"Percentile": "P95", "ValueInMilliseconds": 20}
    ]


@pytest.mark.parametrize("env", ["dev", "staging"])
def test_an_approval_in_the_group_starts_the_pipeline_as_a_role_that_may_start_only_it(example, env):
    resources = _resources(example, env)
    machines = {
        lid: r["Properties"]["StateMachineName"]
        for lid, r in resources.items()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
    }
    (machine,) = [lid for lid, name in machines.items() if name == f"digits-{env}-recommend-digits"]
    (rule_id,) = [lid for lid, r in resources.items() if r["Type"] == "AWS::Events::Rule"]  # chat: none
    props = resources[rule_id]["Properties"]
    assert props["Name"] == f"digits-{env}-recommend-digits-on-approval" and props["State"] == "ENABLED"
    assert props["EventPattern"] == {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Model Package State Change"],
        "detail": {
            "ModelPackageGroupName": [f"digits-{env}"],
            "ModelApprovalStatus": ["Approved"],
            "ModelPackageStatus": ["Completed"],
        },
    }
    (target,) = props["Targets"]
    assert target["Arn"] == {"Ref": machine} and "Input" not in target  # the event itself is the input
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
    role = target["RoleArn"]["Fn::GetAtt"][0]
    (trust,) = resources[role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}  # this account's rules only
    assert "aws:SourceAccount" in trust["Condition"]["StringEquals"]
    statements = [
        st
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for st in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert statements == [
        {"Action": "states:StartExecution", "Effect": "Allow", "Resource": {"Ref": machine}}
    ]
    assert not any(
        r["Type"] == "AWS::IAM::ManagedPolicy" or ({"Ref": role} in r["Properties"].get("Roles", []))
        for r in resources.values()
        if r["Type"] != "AWS::IAM::Policy"
    )
    # an approval that could not start the pipeline (no execution: the pipeline's alarm cannot see
    # it) goes off on the environment's topic
    (alarm,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"]["Namespace"] == "AWS/Events"
    ]
    assert alarm["MetricName"] == "FailedInvocations" and alarm["Statistic"] == "Sum"
    assert alarm["Dimensions"] == [{"Name": "RuleName", "Value": {"Ref": rule_id}}]
    assert alarm["Threshold"] == 1 and alarm["TreatMissingData"] == "notBreaching"
    (action,) = alarm["AlarmActions"]
    assert resources[action["Ref"]]["Type"] == "AWS::SNS::Topic"
    # the pipeline takes the package the event names (else finds the newest approved)
    states = _definition(example, env, "digits")["States"]

    def into(name: str) -> set[str]:
        return {
            k
            for k, st in states.items()
            if name in (st.get("Next"), st.get("Default"), *(c.get("Next") for c in st.get("Choices", [])))
        }

    assert into("Find package digits") == {"Approved package given digits?"}  # every path asks first
    given = states["Approved package given digits?"]
    assert (
        given["Choices"][0]["Next"] == "Package approved digits" and given["Default"] == "Find package digits"
    )
    assert states["Package approved digits"]["InputPath"] == "$.detail"


def test_the_llm_request_names_the_workload_the_target_and_the_mlflow_server(example):
    action, request = _create_request(example, "staging", "chat")
    assert action == "createAIRecommendationJob"
    validate_request("CreateAIRecommendationJob", request)
    assert request["ComputeSpec"] == {"InstanceTypes": ["ml.g5.2xlarge", "ml.g6.2xlarge"]}
    assert request["PerformanceTarget"]["Constraints"] == [
        {"Metric": "ttft-ms"},
        {"Metric": "throughput"},
        {"Metric": "cost"},
    ]
    assert request["AIWorkloadConfigIdentifier"].startswith(
        "arn:aws:sagemaker:us-east-1:222222222222:ai-workload"
    )
    assert request["OutputConfig"]["MlflowConfig"]["MlflowResourceArn"].endswith("digits-staging-mlflow")
    assert request["ModelSource"] == {"S3": {"S3Uri": "s3://bucket/models/chat/"}}


def test_the_recommendation_stacks_lint_clean(example):
    from tests.support.cfn import cfn_lint

    paths = [
        example.assembly.get_stack_artifact(example.stages[env].recommendation.artifact_id).template_full_path
        for env in ("dev", "staging")
    ]
    code, output = cfn_lint(paths)
    assert code == 0, output
