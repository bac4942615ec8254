"""An LLM's optimization pipeline as CloudFormation: the OptimizationStack an environment gains for
each deployed LLM with `optimize:`, its state machine's CreateOptimizationJob / register steps, the
role's grants scoped to the environment's optimization jobs and registry — cdk-nag clean (BuiltApp's
checked synth) and cfn-lint clean; environments without `optimize:` get no such stack."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

from tests.conftest import MINIMAL
from tests.support.cdk_app import BuiltApp
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

LLM = "{container: djl-lmi, weights: {s3: models/chat/}, parameters: 1.0e9, dtype: fp16"


def _built(project, tmp_path, optimize: str, *, deploy: bool = True) -> BuiltApp:
    project.spec(
        MINIMAL
        + "endpoints:\n  chat:\n"
        + f"    llm: {LLM}, optimize: {optimize}}}\n"
        + "    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n"
        + ("" if deploy else "    deploy: false\n")
    )
    project.env("prod", 'account: "111111111111"\n')
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    code, output = cfn_lint(sorted(str(p) for p in (tmp_path / "out").glob("assembly-prod/*.template.json")))
    assert code == 0, output
    return app


def _definition(t: Template) -> dict:
    (machine,) = t.find_resources("AWS::StepFunctions::StateMachine").values()
    text = machine["Properties"]["DefinitionString"]
    parts = text["Fn::Join"][1] if isinstance(text, dict) else [text]
    # tokens (role, bucket, key ARNs) become a marker; the rest is the definition's JSON
    return json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))


def test_an_optimized_llm_gets_a_pipeline_that_optimizes_then_registers(project, tmp_path):
    app = _built(project, tmp_path, "{quantization: awq, sharding: true}")
    stack = app.stages["prod"].optimization
    assert stack is not None and stack.stack_name == "digits-prod-optimization"
    t = Template.from_stack(stack)
    (machine,) = t.find_resources("AWS::StepFunctions::StateMachine").values()
    assert machine["Properties"]["StateMachineName"] == "digits-prod-optimize-chat"
    states = _definition(t)["States"]
    create = states["Optimize chat"]
    assert create["Resource"] == "arn:aws:states:::aws-sdk:sagemaker:createOptimizationJob"
    request = create["Parameters"]
    assert request["OptimizationJobName"].startswith("digits-prod-chat-")
    assert request["DeploymentInstanceType"] == "ml.g5.2xlarge"  # the endpoint's first pool
    assert request["OptimizationConfigs"] == [
        {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "awq"}}},
        {"ModelShardingConfig": {"OverrideEnvironment": {"OPTION_TENSOR_PARALLEL_DEGREE": "1"}}},
    ]
    assert "optimized/chat/" in request["OutputConfig"]["S3OutputLocation"]
    register = states["Register optimized chat"]["Parameters"]
    (container,) = register["InferenceSpecification"]["Containers"]
    assert container["ModelDataSource"]["S3DataSource"]["CompressionType"] == "None"
    assert container["Environment"]["OPTION_QUANTIZE"] == "awq"  # served as the job quantized it
    assert register["InferenceSpecification"]["SupportedRealtimeInferenceInstanceTypes"] == [
        "ml.g5.2xlarge",
        "ml.g6.2xlarge",
    ]
    # the quota the job's instance type is served under (optimization jobs have none of their own)
    assert "ml.g5.2xlarge for endpoint usage" in json.dumps(states)
    # every transition reaches a state that exists
    for name, state in states.items():
        for target in [state.get("Next"), state.get("Default")] + [
            c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])
        ]:
            assert target is None or target in states, (name, target)


def test_the_pipeline_role_runs_only_this_environment_s_optimization_jobs(project, tmp_path):
    app = _built(project, tmp_path, "{quantization: fp8}")
    t = Template.from_stack(app.stages["prod"].optimization)
    statements = [
        s
        for policy in t.find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    jobs = [s for s in statements if ":optimization-job/digits-prod-*" in json.dumps(s["Resource"])]
    granted = {a for s in jobs for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert granted == {
        "sagemaker:CreateOptimizationJob",
        "sagemaker:DescribeOptimizationJob",
        "sagemaker:StopOptimizationJob",
        "sagemaker:AddTags",
    }
    # each held to prod's tags too: 'digits-prod-*' also names an environment 'prod-eu''s jobs
    for s in jobs:
        equals = s["Condition"]["StringEquals"]
        assert {equals.get(f"aws:{kind}Tag/sagestack:environment") for kind in ("Request", "Resource")} & {
            "prod"
        }, s
    (passing,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert "sagemaker.amazonaws.com" in json.dumps(passing.get("Condition", {}))
    (register,) = [s for s in statements if "sagemaker:CreateModelPackage" in s["Action"]]
    assert "model-package/digits-prod/*" in json.dumps(register["Resource"])


def test_no_optimize_or_no_deploy_means_no_optimization_stack(project, tmp_path):
    project.spec(MINIMAL)
    project.env("prod", 'account: "111111111111"\n')
    assert BuiltApp(project.root, tmp_path / "a", ["prod"]).stages["prod"].optimization is None
    app = _built(project, tmp_path, "{quantization: awq}", deploy=False)
    assert app.stages["prod"].optimization is None


def test_weights_in_another_bucket_are_readable_by_the_execution_role(project, tmp_path):
    project.spec(
        MINIMAL
        + "endpoints:\n  chat:\n"
        + "    llm: {container: djl-lmi, weights: {s3: 's3://vendor-weights/llama/'}, parameters: 1.0e9,"
        + " dtype: fp16, optimize: {quantization: awq}}\n"
        + "    instance_type: [ml.g5.2xlarge]\n"
    )
    project.env("prod", 'account: "111111111111"\n')
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])  # cdk-nag clean, with reasons
    stage = app.stages["prod"]
    statements = [
        s
        for stack in (stage.foundation, stage.optimization)
        for policy in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]

    def in_partition(value, partition="aws"):  # the ARNs name the stack's partition, not 'aws'
        if isinstance(value, dict) and "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            parts = [partition if p == {"Ref": "AWS::Partition"} else p for p in parts]
            return sep.join(parts) if all(isinstance(p, str) for p in parts) else None
        return value

    resources = [in_partition(s["Resource"]) for s in statements]
    assert "arn:aws:s3:::vendor-weights/llama/*" in resources
    assert "arn:aws-cn:s3:::vendor-weights/llama/*" in [
        in_partition(s["Resource"], "aws-cn") for s in statements
    ]
    found = [s for s, r in zip(statements, resources, strict=True) if r == "arn:aws:s3:::vendor-weights"]
    (listing,) = found
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["llama/", "llama/*"]}}
