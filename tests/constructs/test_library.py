"""The constructs as a library: each in a bare cdk.Stack (no spec, no sagestack stacks) with CDK-typed
props, grants that return iam.Grant, metrics their alarms use, and from_* imports; and the example
app in examples/cdk_app, synthesized by the real CDK CLI, cfn-linted and checked by cdk-nag."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.synth

EXAMPLE = REPO / "examples" / "cdk_app"
REGION = "us-east-1"
CANDIDATES = ["ml.g5.2xlarge", "ml.g4dn.2xlarge"]


def _stack():  # type: ignore[no-untyped-def]
    from aws_cdk import App, Environment, Stack

    from sagestack.app.builder import cdk_json_context

    app = App(context=cdk_json_context(REPO))
    return Stack(app, "Bare", env=Environment(region=REGION))


def _base(stack):  # type: ignore[no-untyped-def]
    from aws_cdk import aws_kms as kms

    from sagestack.constructs import ArtifactBucket, ExecutionRole

    key = kms.Key(stack, "Key", enable_key_rotation=True)
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    return key, artifacts, ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)


def _statements(template, type_: str = "AWS::IAM::Policy") -> list[dict]:  # type: ignore[no-untyped-def]
    return [
        s
        for p in template.find_resources(type_).values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> set[str]:
    a = statement["Action"]
    return {a} if isinstance(a, str) else set(a)


def test_artifact_bucket_prefix_grants_return_grants_and_stay_in_their_prefixes():
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    stack = _stack()
    _, artifacts, _ = _base(stack)
    reader = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    grant = artifacts.grant_prefix_read(reader, ["models"])
    assert isinstance(grant, iam.Grant) and grant.success
    with pytest.raises(ValueError, match="unknown prefix"):
        artifacts.grant_prefix_read(reader, ["modles"])
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 2)  # the bucket and its access-log bucket
    (policy,) = [
        p
        for lid, p in template.find_resources("AWS::IAM::Policy").items()
        if lid.startswith("ReaderDefaultPolicy")
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    objects = next(s for s in statements if "s3:GetObject" in _actions(s))
    assert _actions(objects) == {"s3:GetObject", "s3:GetObjectVersion"}  # read only
    assert json.dumps(objects["Resource"]).count("/models/*") == 1
    listing = next(s for s in statements if "s3:ListBucket" in _actions(s))
    assert listing["Condition"]["StringLike"]["s3:prefix"] == ["models/*", "models/"]


def test_an_imported_artifact_bucket_grants_the_same_way():
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from sagestack.constructs import ArtifactBucket

    stack = _stack()
    imported = ArtifactBucket.from_bucket_attributes(stack, "Old", bucket_name="kept-artifacts")
    role = iam.Role(stack, "R", assumed_by=iam.AccountRootPrincipal())
    imported.grant_prefix_read_write(role, ["checkpoints"])
    assert imported.s3_uri("checkpoints", "job") == "s3://kept-artifacts/checkpoints/job"
    statements = _statements(Template.from_stack(stack))
    assert any("arn:aws:s3:::kept-artifacts/checkpoints/*" in json.dumps(s["Resource"]) for s in statements)


def test_execution_role_is_grantable_and_imports_with_its_grants():
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from sagestack.constructs import ExecutionRole

    stack = _stack()
    _, _, role = _base(stack)
    data = s3.Bucket(stack, "Data", enforce_ssl=True)
    assert isinstance(data.grant_read(role), iam.Grant)  # IGrantable, as a Role is
    pipeline_role = iam.Role(stack, "Pipeline", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    role.grant_pass_role(pipeline_role)
    imported = ExecutionRole.from_role_arn(stack, "Existing", "arn:aws:iam::111111111111:role/ml-exec")
    imported.grant_pass_role(pipeline_role)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Principal": {"Service": "sagemaker.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                    }
                ],
                "Version": "2012-10-17",
            }
        },
    )
    passes = [s for s in _statements(template) if "iam:PassRole" in _actions(s)]
    assert passes and all(
        s["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}} for s in passes
    )
    assert "arn:aws:iam::111111111111:role/ml-exec" in json.dumps(passes)


def test_training_image_resolves_per_instance_type_and_grants_pull():
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from sagestack.constructs import TrainingImage

    image = TrainingImage.from_dlc(
        "pytorch", "2.5", "py311", region=REGION, instance_types=[*CANDIDATES, "ml.m5.xlarge"]
    )
    assert "-gpu-" in image.uri_for("ml.g5.2xlarge") and "-cpu-" in image.uri_for("ml.m5.xlarge")
    with pytest.raises(ValueError, match=r"not ml\.p5\.48xlarge"):
        image.uri_for("ml.p5.48xlarge")
    with pytest.raises(ValueError):
        TrainingImage.from_dlc("pytorch", "0.1", "py311", region=REGION, instance_types=CANDIDATES)
    stack = _stack()
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    assert isinstance(image.grant_pull(role), iam.Grant)
    pulls = [s for s in _statements(Template.from_stack(stack)) if "ecr:BatchGetImage" in _actions(s)]
    assert pulls and all("repository/pytorch-training" in json.dumps(s["Resource"]) for s in pulls)


def test_model_package_group_grants_and_imports():
    from aws_cdk import RemovalPolicy
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from sagestack.constructs import ModelPackageGroup

    stack = _stack()
    group = ModelPackageGroup(
        stack, "Registry", group_name="digits-dev", removal_policy=RemovalPolicy.DESTROY
    )
    other = ModelPackageGroup.from_model_package_group_name(stack, "Staging", "digits-staging")
    role = iam.Role(stack, "R", assumed_by=iam.AccountRootPrincipal())
    assert isinstance(group.grant_register(role), iam.Grant)
    assert isinstance(other.grant_read(role), iam.Grant)
    template = Template.from_stack(stack)
    template.has_resource("AWS::SageMaker::ModelPackageGroup", {"DeletionPolicy": "Delete"})
    text = json.dumps(_statements(template))
    assert "model-package-group/digits-staging" in text and "model-package/digits-dev/*" in text


def _pipeline(stack, **extra):  # type: ignore[no-untyped-def]
    from aws_cdk import Duration

    from sagestack.constructs import ModelPackageGroup, Names, TrainingImage, TrainingPipeline

    key, artifacts, role = _base(stack)
    image = TrainingImage.from_dlc("pytorch", "2.5", "py311", region=REGION, instance_types=CANDIDATES)
    registry = ModelPackageGroup(stack, "Registry", group_name="digits-lib")
    return TrainingPipeline(
        stack,
        "Classifier",
        names=Names("digits", "lib"),
        image=image,
        code=str(REPO / "training_src"),
        instance_types=CANDIDATES,
        execution_role=role,
        artifacts=artifacts,
        encryption_key=key,
        max_runtime=Duration.hours(1),
        metric_definitions={"val_accuracy": "val_accuracy=([0-9.]+)"},
        registry=registry,
        **extra,
    )


def test_training_pipeline_in_a_bare_stack():
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Match, Template

    from sagestack.constructs import ModelRegistration

    stack = _stack()
    pipeline = _pipeline(
        stack,
        registrations=[
            ModelRegistration(
                "digits",
                compile={
                    "target_device": "ml_c5",
                    "framework": "PYTORCH",
                    "framework_version": "2.0",
                    "input_shapes": {"input0": [1, 1, 8, 8]},
                },
                instance_type="ml.c5.xlarge",
            )
        ],
    )
    starter = iam.Role(stack, "Starter", assumed_by=iam.AccountRootPrincipal())
    assert isinstance(pipeline.grant_start_execution(starter), iam.Grant)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine", {"StateMachineName": "digits-lib-Classifier"}
    )
    # a model package group given no removal policy keeps its registered models when the stack goes
    template.has_resource(
        "AWS::SageMaker::ModelPackageGroup", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    )
    # its own role, log group (encrypted with the key, which lets CloudWatch Logs use it) and alarm
    template.has_resource_properties(
        "AWS::Logs::LogGroup",
        {
            "LogGroupName": "/aws/vendedlogs/states/sagestack/digits-lib/Classifier",
            "KmsKeyId": Match.any_value(),
        },
    )
    alarm = next(iter(template.find_resources("AWS::CloudWatch::Alarm").values()))["Properties"]
    failed = pipeline.metric_failed_executions()
    assert (
        (alarm["MetricName"], alarm["Namespace"])
        == (failed.metric_name, failed.namespace)
        == (
            "ExecutionsFailed",
            "AWS/States",
        )
    )
    states = pipeline.definition["States"]
    # two GPU candidates whose requests differ only in the type: one job with InstancePreferences
    assert {"Create", "Prefer 1/2", "Prefer 2/2", "Compile digits", "Register digits (catalog image)"} <= set(
        states
    )
    assert pipeline.job_plan.preferred is not None
    assert pipeline.job_plan.preferred.name.startswith("digits-lib-Classifier-")
    text = json.dumps(_statements(template))
    for action in (
        "sagemaker:CreateTrainingJob",
        "sagemaker:CreateCompilationJob",
        "sagemaker:CreateModelPackage",
        "iam:PassRole",
        "states:StartExecution",
    ):
        assert action in text, action


def test_training_pipeline_refuses_a_bad_job_with_the_schemas_words():
    from pydantic import ValidationError

    stack = _stack()
    with pytest.raises(ValidationError, match="instance_count"):
        _pipeline(stack, instance_count=0)


def test_typed_props_build_the_job_through_the_spec_s_model():
    from aws_cdk import Duration

    from sagestack.training.models import JobSpec

    pipeline = _pipeline(
        _stack(), spot=True, max_pending_time=Duration.hours(2), options={"checkpoint": {"every_steps": 50}}
    )
    assert pipeline.job_spec == JobSpec.model_validate(
        {
            "image": "image",
            "source_dir": "training_src",
            "instance_type": CANDIDATES,
            "max_run": "1h",
            "use_spot_instances": True,
            "max_pending_time": "2h",
            "metric_definitions": {"val_accuracy": "val_accuracy=([0-9.]+)"},
            "checkpoint": {"every_steps": 50},
        }
    )
    stopping = pipeline.job_plan.candidates[0].request["StoppingCondition"]
    assert stopping["MaxPendingTimeInSeconds"] == 7200
    # spot without max_wait: max_runtime doubled, and a warning that says so (and how to choose)
    assert stopping["MaxWaitTimeInSeconds"] == 7200 == 2 * stopping["MaxRuntimeInSeconds"]
    from aws_cdk import Stack
    from aws_cdk.assertions import Annotations, Match

    warnings = Annotations.from_stack(Stack.of(pipeline)).find_warning(
        "*", Match.string_like_regexp("spot-default-max-wait")
    )
    assert [w.entry.data for w in warnings] == [
        "spot without max_wait: MaxWaitTimeInSeconds is 7200 (max_runtime doubled, at most 28 days), so the "
        "job may wait 3600 s for spot capacity; pass max_wait=Duration.seconds(7200) (or the time you "
        "choose, >= max_runtime) to say so. [ack: sagestack:spot-default-max-wait]"
    ]
    with pytest.raises(TypeError, match=r"'max_runtime' is given as a prop and as options\['max_run'\]"):
        _pipeline(_stack(), options={"max_run": 60})


def test_typed_props_refuse_what_keyword_arguments_would_let_through():
    """A misspelt prop must not leave the job at its default without a word."""
    with pytest.raises(TypeError, match="unknown prop 'max_run'; did you mean 'max_runtime'"):
        _pipeline(_stack(), max_run=3600)
    with pytest.raises(TypeError, match="unknown prop 'spot_instances'"):
        _pipeline(_stack(), spot_instances=True)
    from sagestack.constructs.training_job_props import check_job_props

    with pytest.raises(TypeError, match="instance_types is required"):
        check_job_props("classifier", {"entry_point": "train.py"})
    with pytest.raises(TypeError, match=r"options\['image'\]: the construct's image= prop decides it"):
        _pipeline(_stack(), options={"image": "other"})


def test_the_library_door_validates_its_own_requests_against_botocore():
    from sagestack.core.catalog import RequestValidationError

    # The spec's model takes an environment value of any length; SageMaker's takes 512 characters.
    with pytest.raises(RequestValidationError, match="Environment"):
        _pipeline(_stack(), options={"environment": {"NOTE": "x" * 513}})


def test_the_spec_door_takes_the_whole_job_and_a_plan_validated_for_it():
    first = _pipeline(_stack())
    with pytest.raises(ValueError, match="job_spec is the whole job; drop instance_types, max_runtime"):
        _pipeline(_stack(), job_spec=first.job_spec)
    # A plan validated for another job (here: another instance count) is not this job's.
    with pytest.raises(ValueError, match=r"the validated job .* is not this one"):
        _pipeline(_stack(), instance_count=2, validated=first.validation_plan)


def test_tuning_pipeline_searches_the_training_pipelines_job():
    from aws_cdk.assertions import Template

    from sagestack.constructs import TuningPipeline

    stack = _stack()
    training = _pipeline(stack)
    tuning = TuningPipeline(
        stack,
        "Search",
        training=training,
        objective_metric="val_accuracy",
        objective_type="Maximize",
        ranges={"lr": {"continuous": [1e-4, 1e-1], "scaling": "Logarithmic"}},
        max_jobs=8,
        max_parallel_jobs=2,
    )
    definition = tuning.request["TrainingJobDefinition"]
    assert definition["AlgorithmSpecification"]["MetricDefinitions"][0]["Name"] == "val_accuracy"
    assert tuning.request["HyperParameterTuningJobName"].startswith("digits-Search-")
    Template.from_stack(stack).has_resource_properties(
        "AWS::StepFunctions::StateMachine", {"StateMachineName": "digits-lib-tune-Search"}
    )


def test_inference_endpoint_grants_invoke_and_its_alarms_use_its_metrics():
    from aws_cdk import Duration, Size
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from sagestack.constructs import InferenceEndpoint, Rollout, ServerlessConfig

    stack = _stack()
    _, _, role = _base(stack)
    endpoint = InferenceEndpoint(
        stack,
        "Endpoint",
        endpoint_name="digits-lib-digits",
        model_package="arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-lib/1",
        execution_role=role,
        serverless=ServerlessConfig(memory_size=Size.gibibytes(3), max_concurrency=8),
        rollout=Rollout(max_latency=Duration.millis(50)),
    )
    imported = InferenceEndpoint.from_endpoint_name(stack, "Other", "someone-elses")
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    assert isinstance(endpoint.grant_invoke(caller), iam.Grant)
    imported.grant_invoke(caller)
    template = Template.from_stack(stack)
    config = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    assert config["ProductionVariants"][0]["ServerlessConfig"] == {
        "MemorySizeInMB": 3072,
        "MaxConcurrency": 8,
    }
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    assert alarms["ModelLatency"]["Threshold"] == 50_000  # microseconds
    assert endpoint.metric_model_latency().metric_name == "ModelLatency"
    assert endpoint.metric_invocation_5xx_errors().metric_name in alarms
    invoke = [s for s in _statements(template) if "sagemaker:InvokeEndpoint" in _actions(s)]
    text = json.dumps(invoke)
    assert "endpoint/digits-lib-digits" in text and "endpoint/someone-elses" in text
    with pytest.raises(ValueError, match="either instance_type or serverless"):
        InferenceEndpoint(stack, "Both", endpoint_name="x", model_package="arn", execution_role=role)


@pytest.fixture(scope="module")
def example_assembly(tmp_path_factory) -> Path:
    from tests.synth.test_cdk_cli import cdk_synth

    out = tmp_path_factory.mktemp("example-cdk-app")
    result = cdk_synth(EXAMPLE, out)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_example_app_synthesizes_with_no_unacknowledged_finding(example_assembly):
    from sagestack.constructs.nag import unacknowledged_findings

    template = json.loads((example_assembly / "DigitsExample.template.json").read_text())
    types = {r["Type"] for r in template["Resources"].values()}
    assert {
        "AWS::StepFunctions::StateMachine",
        "AWS::SageMaker::Endpoint",
        "AWS::SageMaker::ModelPackageGroup",
    } <= types
    assert unacknowledged_findings(example_assembly) == []


def test_example_app_passes_cfn_lint(example_assembly):
    lint = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--format",
            "parseable",
            str(example_assembly / "DigitsExample.template.json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_pipelines_sharing_a_role_grant_each_statement_once_and_other_roles_get_their_own():
    """constructs/grants.py skips a statement a principal already holds (synth stays linear in the
    jobs); a second role must still get every statement."""
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from sagestack.constructs import ModelPackageGroup, Names, TrainingImage, TrainingPipeline

    stack = _stack()
    key, artifacts, exec_role = _base(stack)
    image = TrainingImage.from_dlc("pytorch", "2.5", "py311", region=REGION, instance_types=CANDIDATES)
    registry = ModelPackageGroup(stack, "Registry", group_name="digits-lib")
    shared = iam.Role(stack, "Shared", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    other = iam.Role(stack, "Other", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    for job, role in (("a", shared), ("b", shared), ("c", other)):
        TrainingPipeline(
            stack,
            f"Job-{job}",
            names=Names("digits", "lib"),
            job=job,
            image=image,
            code=str(REPO / "training_src"),
            instance_types=CANDIDATES,
            execution_role=exec_role,
            artifacts=artifacts,
            encryption_key=key,
            registry=registry,
            role=role,
        )
    template = Template.from_stack(stack)

    def statements(role_id: str) -> list[dict]:
        logical = stack.get_logical_id(stack.node.find_child(role_id).node.default_child)
        return [
            s
            for p in template.find_resources("AWS::IAM::Policy").values()
            if {"Ref": logical} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]

    def granting(role_id: str, action: str) -> list[dict]:
        return [
            s
            for s in statements(role_id)
            if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        ]

    for role_id in ("Shared", "Other"):
        assert len(granting(role_id, "sagemaker:CreateTrainingJob")) == 1, role_id
        assert len(granting(role_id, "iam:PassRole")) == 1, role_id
        assert granting(role_id, "servicequotas:GetServiceQuota"), role_id
    # each pipeline still starts its own state machine with its own role
    machines = template.find_resources("AWS::StepFunctions::StateMachine")
    assert len(machines) == 3


def test_a_definition_is_written_with_its_string_tokens_and_refuses_other_tokens():
    """JobPipeline writes the definition's JSON itself (constructs/job_pipeline.definition_string);
    string tokens (ARNs, names) become Fn::Join at synth, a number or list token cannot be written so."""
    import json

    from aws_cdk import Aws, Token

    from sagestack.constructs.job_pipeline import definition_string

    stack = _stack()
    text = definition_string({"Comment": "x", "Role": f"arn:aws:iam::{Aws.ACCOUNT_ID}:role/r"})
    resolved = stack.resolve(text)
    sep, parts = resolved["Fn::Join"]
    written = sep.join(p if isinstance(p, str) else "ACCOUNT" for p in parts)
    assert json.loads(written)["Role"] == "arn:aws:iam::ACCOUNT:role/r"
    assert {"Ref": "AWS::AccountId"} in parts
    with pytest.raises(ValueError, match="number or list token"):
        definition_string({"TimeoutSeconds": Token.as_number(Aws.ACCOUNT_ID)})
    with pytest.raises(ValueError, match="number or list token"):
        definition_string({"Topics": Aws.NOTIFICATION_ARNS})


def test_the_pipeline_sends_the_infra_check_the_spec_sets():
    """A job field reaches the state machine's CreateTrainingJob with no construct change: the
    pipeline renders the spec's request (here through `options`, the library's door to any key)."""
    pipeline = _pipeline(_stack(), options={"enable_infra_check": True})
    create = pipeline.definition["States"]["Create"]["Parameters"]
    assert create["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert "InfraCheckConfig" not in json.dumps(_pipeline(_stack()).definition)


def test_a_package_approval_trigger_starts_an_imported_pipeline_and_nothing_else():
    """The trigger on its own, in any CDK app: an imported state machine, a dead-letter queue of the
    app's own, disabled; the role may start that machine only and trusts this account's rules only."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_sqs as sqs
    from aws_cdk.assertions import Match, Template

    from sagestack.constructs import JobPipeline, PackageApprovalTrigger

    stack = Stack(App(), "Trigger", env={"account": "123456789012", "region": "us-east-1"})
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:digits-dev-recommend-digits"
    dlq = sqs.Queue(stack, "Dlq", enforce_ssl=True, encryption=sqs.QueueEncryption.SQS_MANAGED)
    trigger = PackageApprovalTrigger(
        stack,
        "OnApproval",
        pipeline=JobPipeline.from_state_machine_arn(stack, "Machine", machine),
        model_package_group_name="digits-dev",
        enabled=False,
        retry_attempts=5,
        dead_letter_queue=dlq,
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "State": "DISABLED",
            "EventPattern": {
                "source": ["aws.sagemaker"],
                "detail-type": ["SageMaker Model Package State Change"],
                "detail": {
                    "ModelPackageGroupName": ["digits-dev"],
                    "ModelApprovalStatus": ["Approved"],
                    "ModelPackageStatus": ["Completed"],
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": machine,
                        "RetryPolicy": {"MaximumRetryAttempts": 5, "MaximumEventAgeInSeconds": 3600},
                        "DeadLetterConfig": {"Arn": {"Fn::GetAtt": [Match.any_value(), "Arn"]}},
                    }
                )
            ],
        },
    )
    policies = template.find_resources("AWS::IAM::Policy")
    (policy,) = policies.values()
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "states:StartExecution", "Effect": "Allow", "Resource": machine}
    ]
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Principal": {"Service": "events.amazonaws.com"},
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": "123456789012"},
                                "ArnLike": {
                                    "aws:SourceArn": {
                                        "Fn::Join": [
                                            "",
                                            [
                                                "arn:",
                                                {"Ref": "AWS::Partition"},
                                                ":events:us-east-1:123456789012:rule/*",
                                            ],
                                        ]
                                    }
                                },
                            },
                        }
                    )
                ]
            }
        },
    )
    # the queue lets this rule, and only it, send what it could not deliver
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "sqs:SendMessage",
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": Match.any_value()}},
                            }
                        )
                    ]
                )
            }
        },
    )
    assert trigger.rule_arn
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"Namespace": "AWS/Events", "MetricName": "FailedInvocations", "Threshold": 1},
    )


def _recommendation_pipeline(package: str | None):  # type: ignore[no-untyped-def]
    from sagestack.constructs import ModelPackageGroup, Names
    from sagestack.constructs.recommendation import RecommendationPipeline
    from sagestack.endpoints.models import SloSpec
    from sagestack.endpoints.recommend import ResolvedRecommendation

    stack = _stack()
    key, artifacts, role = _base(stack)
    slo = SloSpec(p95_ms=20, on_registration=True)
    r = ResolvedRecommendation("digits", slo, ("ml.c5.xlarge",), None, package, Names("digits", "prod"))
    return RecommendationPipeline(
        stack,
        "Recommend",
        recommendation=r,
        execution_role=role,
        artifacts=artifacts,
        encryption_key=key,
        registry=ModelPackageGroup.from_model_package_group_name(stack, "Group", "digits-prod"),
    )


def test_a_recommendation_pipeline_refuses_on_registration_where_no_approval_changes_the_model():
    """The spec's rule says it at the file and line; the construct, used on its own, still refuses a
    pinned package (no approval changes it) in words, and builds the trigger where it fits."""
    assert _recommendation_pipeline(None).on_registration is not None
    pinned = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
    with pytest.raises(ValueError) as raised:
        _recommendation_pipeline(pinned)
    assert str(raised.value) == (
        "endpoint 'digits': slo.on_registration measures each version approved in the group, but "
        f"this endpoint serves the pinned package {pinned}, which no approval changes"
    )
