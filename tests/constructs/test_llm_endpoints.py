"""LLM serving as CloudFormation: an LLM model loading uncompressed weights from S3, instance pools in
priority order, a capacity reservation, a shadow variant, LLM inference components and components
that scale to zero — each asserted on the synthesized resource, synthesized with and without an
account, cdk-nag clean (BuiltApp's checked synth) and cfn-lint clean."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import MINIMAL
from tests.support.cdk_app import BuiltApp
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
CANDIDATE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/4"
PLAN = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/chat-plan"
LLM = "{container: djl-lmi, weights: {s3: models/chat/}, parameters: 1.0e9, dtype: fp16}"


def _serving(project, tmp_path, endpoints: str, *, account: bool = True) -> Template:
    project.spec(MINIMAL + "endpoints:\n" + endpoints)
    project.env("prod", 'account: "111111111111"\n' if account else "{}\n")
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    code, output = cfn_lint(sorted(str(p) for p in (tmp_path / "out").glob("assembly-prod/*.template.json")))
    assert code == 0, output
    return Template.from_stack(app.stages["prod"].serving)


def _one(t: Template, kind: str) -> dict:
    (resource,) = t.find_resources(kind).values()
    return resource["Properties"]


def _variant(t: Template) -> dict:
    (variant,) = _one(t, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    return variant


@pytest.mark.parametrize("account", [True, False])
def test_an_llm_loads_uncompressed_weights_from_the_bucket_on_instance_pools(project, tmp_path, account):
    t = _serving(
        project,
        tmp_path,
        f"  chat:\n    llm: {LLM}\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n"
        "    provision_timeout: 900\n",
        account=account,
    )
    container = _one(t, "AWS::SageMaker::Model")["PrimaryContainer"]
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix" and source["CompressionType"] == "None"
    uri = json.dumps(source["S3Uri"])
    assert "models/chat/" in uri and "ImportValue" in uri  # the foundation's artifact bucket
    assert "ModelPackageName" not in container and "djl-inference" in container["Image"]
    assert container["Environment"]["OPTION_TENSOR_PARALLEL_DEGREE"] == "1"  # one GPU per g5/g6.2xlarge
    variant = _variant(t)
    # InstancePools replace InstanceType (SageMaker's realtime-endpoints-heterogeneous)
    assert "InstanceType" not in variant
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g5.2xlarge", "Priority": 1},
        {"InstanceType": "ml.g6.2xlarge", "Priority": 2},
    ]
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 60
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 60
    assert "VolumeSizeInGB" not in variant  # g5 and g6 carry NVMe instance storage
    # the endpoint keeps its blue/green update and rollback alarm
    assert _one(t, "AWS::SageMaker::Endpoint")["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]


def test_one_instance_type_stays_instance_type(project, tmp_path):
    t = _serving(
        project, tmp_path, f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
    )
    variant = _variant(t)
    assert variant["InstanceType"] == "ml.m5.large" and "InstancePools" not in variant
    assert "ModelDataDownloadTimeoutInSeconds" not in variant


def test_an_llm_on_ebs_only_types_gets_a_volume_for_its_weights(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        "  chat:\n    llm: {container: djl-lmi, weights: {s3: 's3://weights-bucket/llama/', size_gb: 8}, "
        "parameters: 4.0e9, dtype: fp16}\n    instance_type: ml.p3.2xlarge\n",
    )
    assert _variant(t)["VolumeSizeInGB"] == 2 * 8 + 30  # the weights twice (download, load) + 30 GB
    assert (
        _one(t, "AWS::SageMaker::Model")["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
        == "s3://weights-bucket/llama/"
    )


def test_a_pinned_optimized_package_serves_the_llm_with_its_environment(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        f'  chat:\n    llm: {LLM}\n    model_package: "{PIN}"\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n',
    )
    container = _one(t, "AWS::SageMaker::Model")["PrimaryContainer"]
    assert container["ModelPackageName"] == PIN
    assert "Image" not in container and "ModelDataSource" not in container
    assert container["Environment"]["OPTION_DTYPE"] == "fp16"


def test_a_capacity_reservation_holds_the_instances(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        f"  chat:\n    llm: {LLM}\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n"
        f'    capacity_reservation: "{PLAN}"\n',
    )
    assert _variant(t)["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": PLAN,
    }


def test_a_shadow_variant_gets_a_copy_of_the_traffic_and_production_keeps_its_alarms(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
        f'    shadow: {{model_package: "{CANDIDATE}", sampling_percent: 25, instance_type: ml.m5.xlarge}}\n',
    )
    config = _one(t, "AWS::SageMaker::EndpointConfig")
    (shadow,) = config["ShadowProductionVariants"]
    assert shadow["VariantName"] == "Shadow" and shadow["InstanceType"] == "ml.m5.xlarge"
    assert shadow["InitialInstanceCount"] == 1
    # the shadow's weight against production's 1.0 is the share of requests copied to it
    assert (
        shadow["InitialVariantWeight"] == 0.25
        and config["ProductionVariants"][0]["InitialVariantWeight"] == 1
    )
    models = {
        json.dumps(r["Properties"]["PrimaryContainer"]["ModelPackageName"])
        for r in t.find_resources("AWS::SageMaker::Model").values()
    }
    assert models == {json.dumps(PIN), json.dumps(CANDIDATE)}
    assert shadow["ModelName"] != config["ProductionVariants"][0]["ModelName"]
    # rollback alarms watch production only
    for alarm in t.find_resources("AWS::CloudWatch::Alarm").values():
        dims = {d["Name"]: d["Value"] for d in alarm["Properties"].get("Dimensions", [])}
        assert dims.get("VariantName", "AllTraffic") == "AllTraffic"
    assert "BlueGreenUpdatePolicy" in _one(t, "AWS::SageMaker::Endpoint")["DeploymentConfig"]


def test_an_llm_component_spans_its_tensor_parallel_degree_and_starts_in_time(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        "  shared:\n    instance_type: [ml.g5.12xlarge, ml.g6.12xlarge]\n    autoscaling: {min: 1, max: 2}\n"
        f"    components:\n      chat: {{llm: {LLM}, memory_mb: 16384, cpu_cores: 4}}\n",
    )
    spec = _one(t, "AWS::SageMaker::InferenceComponent")["Specification"]
    # every GPU of a g5.12xlarge (4): the tensor-parallel degree the container is told
    assert spec["ComputeResourceRequirements"] == {
        "NumberOfCpuCoresRequired": 4,
        "MinMemoryRequiredInMb": 16384,
        "NumberOfAcceleratorDevicesRequired": 4,
    }
    startup = spec["StartupParameters"]
    assert startup["ModelDataDownloadTimeoutInSeconds"] >= 60
    assert startup["ContainerStartupHealthCheckTimeoutInSeconds"] >= 60
    container = _one(t, "AWS::SageMaker::Model")["PrimaryContainer"]
    assert container["Environment"]["OPTION_TENSOR_PARALLEL_DEGREE"] == "4"
    assert container["ModelDataSource"]["S3DataSource"]["S3DataType"] == "S3Prefix"
    variant = _variant(t)
    assert [p["InstanceType"] for p in variant["InstancePools"]] == ["ml.g5.12xlarge", "ml.g6.12xlarge"]
    assert "ModelDataDownloadTimeoutInSeconds" not in variant  # the component starts itself


def test_components_scale_to_zero_and_a_request_wakes_one_copy(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        "  shared:\n    instance_type: ml.g5.2xlarge\n    autoscaling: {min: 0, max: 2}\n"
        f"    components:\n      chat: {{llm: {LLM}, memory_mb: 8192, min_copies: 0, max_copies: 2}}\n",
    )
    assert _variant(t)["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 0,
        "MaxInstanceCount": 2,
    }
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ResourceId": "inference-component/digits-prod-shared-chat", "MinCapacity": 0, "MaxCapacity": 2},
    )
    policies = [
        p["Properties"] for p in t.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    ]
    (wake,) = [p for p in policies if p["PolicyType"] == "StepScaling"]
    assert wake["StepScalingPolicyConfiguration"]["AdjustmentType"] == "ChangeInCapacity"
    assert wake["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}
    ]
    alarms = t.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "NoCapacityInvocationFailures"}}
    )
    (alarm,) = [a["Properties"] for a in alarms.values()]
    assert alarm["Dimensions"] == [{"Name": "InferenceComponentName", "Value": "digits-prod-shared-chat"}]
    assert alarm["Threshold"] == 1 and alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    actions = json.dumps(alarm["AlarmActions"])
    assert "Wake" in actions and "Notifications" in actions  # the policy, and the environment's topic


def test_a_plain_cdk_app_serves_an_llm_and_reads_only_its_weights_prefix(tmp_path):
    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_iam as iam

    from sagestack.constructs import InferenceEndpoint, LlmModel

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    endpoint = InferenceEndpoint(
        stack,
        "E",
        endpoint_name="chat",
        llm=LlmModel(
            image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128",
            weights_uri="s3://weights-bucket/chat",
            environment={"OPTION_TENSOR_PARALLEL_DEGREE": "1"},
            download_timeout=Duration.minutes(20),
            startup_timeout=Duration.minutes(15),
        ),
        execution_role=role,
        instance_type=["ml.g5.2xlarge", "ml.g6.2xlarge"],
    )
    t = Template.from_stack(stack)
    t.has_resource_properties(
        "AWS::SageMaker::Model",
        {"PrimaryContainer": {"ModelDataSource": {"S3DataSource": {"S3Uri": "s3://weights-bucket/chat/"}}}},
    )
    statements = json.dumps(_one(t, "AWS::IAM::Policy")["PolicyDocument"]["Statement"])
    assert ":s3:::weights-bucket/chat/*" in statements and '"s3:prefix": ["chat/", "chat/*"]' in statements
    assert ":s3:::weights-bucket/*" not in statements
    t.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [Match.object_like({"ModelDataDownloadTimeoutInSeconds": 1200})]},
    )
    shadow = endpoint.metric("Invocations", variant_name="Shadow")
    assert shadow.dimensions == {"EndpointName": "chat", "VariantName": "Shadow"}
    assert endpoint.metric("Invocations").dimensions["VariantName"] == "AllTraffic"


def test_the_constructs_refuse_what_sagemaker_would(tmp_path):
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam

    from sagestack.constructs import InferenceEndpoint, LlmModel, Rollout, ShadowVariant

    stack = Stack(App(outdir=str(tmp_path)), "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    with pytest.raises(ValueError, match="image_uri and weights_uri, or model_package"):
        LlmModel(image_uri="x")
    with pytest.raises(ValueError, match="rolling updates exclude multi-variant endpoints"):
        InferenceEndpoint(
            stack,
            "Rolling",
            endpoint_name="x",
            model_package=PIN,
            execution_role=role,
            instance_type="ml.m5.large",
            rollout=Rollout(traffic="rolling"),
            shadow=ShadowVariant(model_package=CANDIDATE, instance_type="ml.m5.large"),
        )
    with pytest.raises(ValueError, match="one to five instance types"):
        InferenceEndpoint(
            stack,
            "Six",
            endpoint_name="x",
            model_package=PIN,
            execution_role=role,
            instance_type=["ml.m5.large"] * 6,
        )


def test_an_llm_endpoint_deploys_only_where_its_environment_says_so(project, tmp_path):
    project.spec(
        MINIMAL
        + f"endpoints:\n  chat:\n    deploy: false\n    llm: {LLM}\n    instance_type: ml.g5.2xlarge\n"
    )
    project.env("dev")
    project.env("staging", 'account: "222222222222"\nendpoints:\n  chat: {deploy: true}\n')
    app = BuiltApp(project.root, tmp_path / "out", ["dev", "staging"])
    assert app.stages["dev"].serving is None
    staging = Template.from_stack(app.stages["staging"].serving)
    assert _one(staging, "AWS::SageMaker::Endpoint")["EndpointName"] == "digits-staging-chat"


def test_a_shadow_of_an_llm_serves_the_candidate_package_with_the_llm_s_settings(project, tmp_path):
    t = _serving(
        project,
        tmp_path,
        f"  chat:\n    llm: {LLM}\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n"
        f'    shadow: {{model_package: "{CANDIDATE}", sampling_percent: 50}}\n',
    )
    config = _one(t, "AWS::SageMaker::EndpointConfig")
    (shadow,) = config["ShadowProductionVariants"]
    assert shadow["InstanceType"] == "ml.g5.2xlarge"  # the first pool's type
    assert shadow["InitialVariantWeight"] == 0.5
    production = config["ProductionVariants"][0]
    assert shadow["ModelDataDownloadTimeoutInSeconds"] == production["ModelDataDownloadTimeoutInSeconds"]
    containers = [
        r["Properties"]["PrimaryContainer"] for r in t.find_resources("AWS::SageMaker::Model").values()
    ]
    (candidate,) = [c for c in containers if c.get("ModelPackageName") == CANDIDATE]
    (weights,) = [c for c in containers if "ModelDataSource" in c]
    assert candidate["Environment"] == weights["Environment"]


def test_render_shows_what_the_template_creates_for_every_llm_shape(project, tmp_path):
    """`sagestack render` renders an LLM endpoint's requests without CDK; for each shape (pools, a
    capacity reservation, a shadow, data capture, an EBS volume, a pinned optimized package, LLM and
    package components, a package's batching) every Model, EndpointConfig and InferenceComponent the template creates is
    one `render` shows, property by property."""
    from typer.testing import CliRunner

    from sagestack.cli import app as cli
    from tests.support.rendered_meaning import TEMPLATE_TYPES, resource_differences

    endpoints = {
        "chat": f"    llm: {LLM}\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n    provision_timeout: 900\n"
        f'    capacity_reservation: "{PLAN}"\n    data_capture: {{sampling_percent: 20}}\n'
        f'    shadow: {{model_package: "{CANDIDATE}", sampling_percent: 50}}\n',
        "big": "    llm: {container: djl-lmi, weights: {s3: 's3://weights-bucket/llama/', size_gb: 8}, "
        f'parameters: 4.0e9, dtype: fp16}}\n    model_package: "{PIN}"\n    instance_type: ml.p3.2xlarge\n',
        "shared": "    instance_type: [ml.g5.12xlarge, ml.g6.12xlarge]\n    autoscaling: {min: 1, max: 2}\n"
        f"    components:\n      chat: {{llm: {LLM}, memory_mb: 16384, cpu_cores: 4}}\n"
        f'      scorer: {{model_package: "{PIN}", memory_mb: 2048, copies: 2}}\n',
        "batched": "    instance_type: ml.c5.4xlarge\n    batching: {max_batch_size: 8, max_delay_ms: 10}\n"
        f'    components:\n      scorer: {{model_package: "{PIN}", memory_mb: 2048, cpu_cores: 2}}\n',
    }
    t = _serving(project, tmp_path, "".join(f"  {k}:\n{body}" for k, body in endpoints.items()))
    runner = CliRunner()
    shown = []
    for key in endpoints:
        result = runner.invoke(cli, ["render", key, "--env", "prod", "--json", "--root", str(project.root)])
        assert result.exit_code == 0, result.output
        shown += json.loads(result.output)["requests"]
    names = tuple(f"digits-prod-{k}" for k in endpoints)
    for operation, kind in TEMPLATE_TYPES.items():
        resources = [r["Properties"] for r in t.find_resources(kind).values()]
        rendered = [s for s in shown if s["operation"] == operation]
        assert len(resources) == len(rendered), operation
        for properties in resources:
            found = [resource_differences(properties, s, names) for s in rendered]
            assert [] in found, (properties, found)
