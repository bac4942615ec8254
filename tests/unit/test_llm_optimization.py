"""An LLM's optimization job: CreateOptimizationJob rendered per technique (and nothing not asked),
validated against botocore's model and sent through a botocore client held by its Stubber; the job's
name stable under unrelated edits and new with the llm spec; the registration of its output; the
rule in test_llm_optimize_rules.py; render / lock / run see it."""

from __future__ import annotations

import pytest

from sagestack.core.catalog.service_model import RequestValidationError, validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.llm.optimization_job import (
    ResolvedOptimization,
    optimization_request,
    package_request,
    resolve_optimizations,
    validate_optimization,
)

NAMES = Names("digits", "staging")
DEPLOYMENT = Deployment.stand_ins(region="us-east-1", tags=(("sagestack:project", "digits"),))
LLM = {"container": "djl-lmi", "weights": {"s3": "models/chat/"}, "parameters": 1.0e9, "dtype": "fp16"}


def _one(optimize: dict, **endpoint: object) -> ResolvedOptimization:
    spec = EndpointSpec.model_validate(
        {
            "llm": {**LLM, "optimize": optimize},
            "instance_type": ["ml.g5.2xlarge", "ml.g6.2xlarge"],
            **endpoint,
        }
    )
    (o,) = resolve_optimizations(NAMES, {"chat": spec})
    return o


def _configs(optimize: dict) -> list[dict]:
    request = optimization_request(_one(optimize), DEPLOYMENT)
    validate_request("CreateOptimizationJob", request)
    return request["OptimizationConfigs"]


def test_each_technique_asked_is_one_config_and_none_other():
    assert _configs({"quantization": "awq"}) == [
        {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "awq"}}}
    ]
    assert _configs({"compilation": True}) == [{"ModelCompilationConfig": {}}]
    assert _configs({"sharding": True}) == [
        {"ModelShardingConfig": {"OverrideEnvironment": {"OPTION_TENSOR_PARALLEL_DEGREE": "1"}}}
    ]
    assert _configs({"speculative_decoding": "EAGLE"}) == [
        {"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}
    ]
    every = _configs(
        {"quantization": "fp8", "compilation": True, "sharding": True, "speculative_decoding": "EAGLE"}
    )
    assert [next(iter(c)) for c in every] == [
        "ModelQuantizationConfig",
        "ModelCompilationConfig",
        "ModelShardingConfig",
        "ModelSpeculativeDecodingConfig",
    ]


def test_the_request_reads_the_weights_writes_optimized_and_stops_in_time():
    o = _one({"quantization": "awq", "max_runtime": 7200, "environment": {"HF_TOKEN_SECRET": "x"}})
    r = optimization_request(o, DEPLOYMENT)
    assert r["OptimizationJobName"] == o.job_name and o.job_name.startswith("digits-staging-chat-")
    assert r["ModelSource"] == {"S3": {"S3Uri": f"s3://{DEPLOYMENT.bucket}/models/chat/"}}
    assert r["DeploymentInstanceType"] == "ml.g5.2xlarge"  # the endpoint's first pool
    assert r["OutputConfig"] == {
        "S3OutputLocation": f"s3://{DEPLOYMENT.bucket}/optimized/chat/{o.job_name}/",
        "KmsKeyId": DEPLOYMENT.kms_key_id,
    }
    assert r["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200}
    assert r["RoleArn"] == DEPLOYMENT.role_arn
    assert r["Tags"] == [{"Key": "sagestack:project", "Value": "digits"}]
    assert r["OptimizationEnvironment"]["OPTION_ROLLING_BATCH"] == "vllm"  # the family's settings …
    assert r["OptimizationEnvironment"]["HF_TOKEN_SECRET"] == "x"  # … and optimize.environment
    assert "VpcConfig" not in r
    vpc = {"subnets": ["subnet-1"], "security_groups": ["sg-1"]}
    r = optimization_request(
        _one({"quantization": "awq", "instance_type": "ml.g6e.xlarge"}, vpc=vpc), DEPLOYMENT
    )
    assert r["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1"]}
    assert r["DeploymentInstanceType"] == "ml.g6e.xlarge"


def test_the_name_is_stable_and_new_with_the_llm_spec():
    name = _one({"quantization": "awq"}).job_name
    assert _one({"quantization": "awq"}).job_name == name
    assert _one({"quantization": "awq"}, autoscaling={"min": 0, "max": 2}).job_name == name
    assert _one({"quantization": "fp8"}).job_name != name
    assert _one({"quantization": "awq", "instance_type": "ml.g6.2xlarge"}).job_name != name
    assert len(name) <= 63
    long = Names("a-project-with-a-rather-long-name", "staging-environment")
    o = _one({"quantization": "awq"})
    o = ResolvedOptimization(
        o.endpoint, "component-with-a-long-name", o.llm, o.instance_types, None, None, long
    )
    assert len(o.job_name) == 63 and o.job_name.endswith(o.digest[:12])


def test_the_output_is_registered_for_review_as_the_job_quantized_it():
    o = _one({"quantization": "awq"})
    r = package_request(o, DEPLOYMENT, env="staging", group="digits-staging")
    validate_request("CreateModelPackage", r)
    assert r["ModelApprovalStatus"] == "PendingManualApproval"
    (container,) = r["InferenceSpecification"]["Containers"]
    assert container["ModelDataSource"] == {
        "S3DataSource": {
            "S3Uri": f"s3://{DEPLOYMENT.bucket}/optimized/chat/{o.job_name}/",
            "S3DataType": "S3Prefix",
            "CompressionType": "None",
        }
    }
    assert "djl-inference" in container["Image"]
    assert container["Environment"]["OPTION_QUANTIZE"] == "awq"
    assert r["InferenceSpecification"]["SupportedRealtimeInferenceInstanceTypes"] == [
        "ml.g5.2xlarge",
        "ml.g6.2xlarge",
    ]
    assert r["CustomerMetadataProperties"]["sagestack:optimization-job"] == o.job_name
    # one package per job: the same token for the same job, another for another job
    assert (
        r["ClientToken"]
        == package_request(o, DEPLOYMENT, env="staging", group="digits-staging")["ClientToken"]
    )
    other = package_request(_one({"quantization": "fp8"}), DEPLOYMENT, env="staging", group="digits-staging")
    assert other["ClientToken"] != r["ClientToken"]


def test_botocore_refuses_what_sagemaker_would():
    o = _one({"quantization": "awq", "environment": {f"V{i}": "x" for i in range(30)}})
    with pytest.raises(RequestValidationError, match="OptimizationEnvironment"):
        validate_optimization(o, DEPLOYMENT, env="staging", group="digits-staging")


def test_the_requests_go_through_a_botocore_client():
    """The rendered requests as a SageMaker client sends them: botocore's Stubber checks each
    against the operation's input shape, and the responses against its output shape."""
    import boto3
    from botocore.stub import Stubber

    o = _one({"quantization": "awq", "sharding": True})
    request = optimization_request(o, DEPLOYMENT)
    package = package_request(o, DEPLOYMENT, env="staging", group="digits-staging")
    sm = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    arn = f"arn:aws:sagemaker:us-east-1:123456789012:optimization-job/{o.job_name}"
    with Stubber(sm) as stub:
        stub.add_response("create_optimization_job", {"OptimizationJobArn": arn}, request)
        stub.add_response(
            "describe_optimization_job",
            {
                "OptimizationJobArn": arn,
                "OptimizationJobStatus": "COMPLETED",
                "CreationTime": "2026-01-01T00:00:00Z",
                "LastModifiedTime": "2026-01-01T01:00:00Z",
                "OptimizationJobName": o.job_name,
                "ModelSource": request["ModelSource"],
                "DeploymentInstanceType": request["DeploymentInstanceType"],
                "OptimizationConfigs": request["OptimizationConfigs"],
                "OutputConfig": request["OutputConfig"],
                "RoleArn": request["RoleArn"],
                "StoppingCondition": request["StoppingCondition"],
            },
            {"OptimizationJobName": o.job_name},
        )
        stub.add_response(
            "create_model_package",
            {"ModelPackageArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/digits-staging/1"},
            package,
        )
        assert sm.create_optimization_job(**request)["OptimizationJobArn"] == arn
        assert (
            sm.describe_optimization_job(OptimizationJobName=o.job_name)["OptimizationJobStatus"]
            == "COMPLETED"
        )
        sm.create_model_package(**package)
        stub.assert_no_pending_responses()


def test_render_lock_and_run_see_the_example_s_optimization():
    from sagestack.cli.deploy import pipeline_of
    from sagestack.ops.lock import lock_document
    from sagestack.project import load_project, resolve_environment
    from sagestack.project.requests import render_environment, requests_named
    from tests.conftest import REPO

    plan = resolve_environment(load_project(REPO, "staging"))
    out = render_environment(plan, REPO)
    assert list(out.optimizations) == ["chat/chat"]
    shown = requests_named(plan, out, "chat")
    assert [(s.operation, s.label) for s in shown] == [  # the endpoint's own, then its optimization
        ("CreateModel", "chat/chat"),
        ("CreateEndpointConfig", "chat"),
        ("CreateInferenceComponent", "chat/chat"),
        ("CreateOptimizationJob", "optimize chat/chat"),
        ("CreateModelPackage", "optimize chat/chat"),
    ]
    assert set(lock_document(plan, out)["optimizations"]["chat/chat"]) == {
        "CreateOptimizationJob",
        "CreateModelPackage",
    }
    assert pipeline_of(plan.spec, "staging", "chat") == ("digits-staging-optimize-chat-chat", "optimization")
    assert pipeline_of(plan.spec, "staging", "chat/chat") == (
        "digits-staging-optimize-chat-chat",
        "optimization",
    )
    dev = resolve_environment(load_project(REPO, "dev"))  # chat is not deployed in dev
    assert render_environment(dev, REPO).optimizations == {}


def test_plan_lists_the_optimization_job():
    import io

    from rich.console import Console

    from sagestack.capacity.ledger import QuotaBook
    from sagestack.ops.report import as_json, plan_report, render
    from sagestack.project import load_project, resolve_environment
    from tests.conftest import REPO

    result = plan_report(REPO, resolve_environment(load_project(REPO, "staging")), QuotaBook.none("off"))
    (row,) = as_json(result)["optimizations"]
    assert row["llm"] == "chat/chat" and row["job"].startswith("digits-staging-chat-chat-")
    assert (row["instance_type"], row["techniques"], row["max_runtime_seconds"]) == (
        "ml.g5.2xlarge",
        ["Quantization"],
        3600,
    )
    out = io.StringIO()
    render(result, Console(file=out, width=80))
    # at 80 columns too, the job name is whole on one line (it is copied into commands)
    assert "LLM optimization jobs" in out.getvalue() and row["job"] in out.getvalue()


def test_sagestack_render_shows_an_endpoint_s_optimization_requests():
    from typer.testing import CliRunner

    from sagestack.cli import app
    from tests.conftest import REPO

    runner = CliRunner()
    for name in ("chat", "chat/chat"):
        out = runner.invoke(app, ["render", name, "--env", "staging", "--root", str(REPO)])
        assert out.exit_code == 0, out.output
        assert "# CreateOptimizationJob (optimize chat/chat), environment staging" in out.stdout
        assert "# CreateModelPackage (optimize chat/chat), environment staging" in out.stdout
    out = runner.invoke(app, ["render", "chat/chta", "--env", "staging", "--root", str(REPO)])
    assert out.exit_code == 2 and "did you mean 'chat/chat'" in out.output
