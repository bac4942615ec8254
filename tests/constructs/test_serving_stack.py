"""ServingStack and the registry: template assertions on the example app (prod pins a package)
and on small projects for serverless, Inferentia and cross-account promotion."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import MINIMAL
from tests.support.cdk_app import BuiltApp

pytestmark = pytest.mark.synth

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"  # prod's own copy


def _serving(app: BuiltApp, env: str) -> Template:
    return Template.from_stack(app.stages[env].serving)


def test_only_environments_with_a_pin_get_endpoints(example_app):
    assert example_app.stages["dev"].serving is None
    assert example_app.stages["prod"].serving is not None
    # staging pins no digits package; it serves only the LLM endpoint its overlay deploys
    staging = example_app.stages["staging"].serving
    assert staging is not None and set(staging.endpoints) == {"chat"}
    assert set(example_app.stages["prod"].serving.endpoints) == {"digits"}


def test_endpoint_serves_the_pinned_package_with_kms_and_capture(example_app):
    t = _serving(example_app, "prod")
    t.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {"ModelPackageName": PIN},
            "EnableNetworkIsolation": True,
            "ExecutionRoleArn": Match.any_value(),
        },
    )
    t.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": Match.any_value(),
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "InstanceType": "ml.c5.xlarge",
                    "InitialInstanceCount": 2,
                    "InitialVariantWeight": 1,
                    "ModelName": {"Fn::GetAtt": [Match.any_value(), "ModelName"]},
                }
            ],
            "DataCaptureConfig": {
                "EnableCapture": True,
                "InitialSamplingPercentage": 20,
                "DestinationS3Uri": {"Fn::Join": ["", ["s3://", Match.any_value(), "/capture/digits"]]},
                "KmsKeyId": Match.any_value(),
                "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
                "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
            },
        },
    )


def test_rollout_is_blue_green_canary_rolled_back_by_the_error_alarm(example_app):
    t = _serving(example_app, "prod")
    alarms = t.find_resources("AWS::CloudWatch::Alarm")
    (alarm_id,) = [k for k, v in alarms.items() if v["Properties"]["MetricName"] == "Invocation5XXErrors"]
    assert alarms[alarm_id]["Properties"]["Dimensions"] == [
        {"Name": "EndpointName", "Value": "digits-prod-digits"},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    t.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "digits-prod-digits",
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {
                        "Type": "CANARY",
                        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 10},
                        "WaitIntervalInSeconds": 300,
                    },
                    "TerminationWaitInSeconds": 600,
                    "MaximumExecutionTimeoutInSeconds": Match.any_value(),
                },
                "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": {"Ref": alarm_id}}]},
            },
        },
    )


def test_autoscaling_tracks_invocations_per_instance(example_app):
    t = _serving(example_app, "prod")
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "endpoint/digits-prod-digits/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "ServiceNamespace": "sagemaker",
            "MinCapacity": 2,
            "MaxCapacity": 10,
        },
    )
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": 1000,
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
                "ScaleInCooldown": 300,
                "ScaleOutCooldown": 60,
            },
        },
    )


def test_no_account_reads_another_s_registry_bucket_or_key(example_app):
    """Promotion copies (issue 38): no group, bucket or key policy names another account, and prod's
    execution role reads nothing of staging's (its pin is its own copy)."""
    accounts = {"dev": None, "staging": "222222222222", "prod": "111111111111"}
    for env, own in accounts.items():
        t = example_app.template(env)
        (group,) = t.find_resources("AWS::SageMaker::ModelPackageGroup").values()
        assert "ModelPackageGroupPolicy" not in group["Properties"]
        others = [a for a in accounts.values() if a and a != own]
        for kind in ("AWS::S3::BucketPolicy", "AWS::KMS::Key"):
            for res in t.find_resources(kind).values():
                text = json.dumps(res["Properties"])
                assert not [a for a in others if a in text], (env, kind)
    roles = example_app.template("prod").find_resources("AWS::IAM::Policy")
    assert not [p for p in roles.values() if "222222222222" in json.dumps(p)]


def test_the_reader_role_trusts_the_next_environment_and_the_promoter_assumes_it(example_app):
    staging = example_app.template("staging")
    staging.has_resource_properties(
        "AWS::IAM::Role",
        {
            "RoleName": "digits-staging-promotion-reader",
            "MaxSessionDuration": 3600,
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                    }
                ],
                "Version": "2012-10-17",
            },
        },
    )
    prod = example_app.template("prod")
    assert not prod.find_resources(
        "AWS::IAM::Role", {"Properties": {"RoleName": Match.string_like_regexp("reader")}}
    )
    (policy,) = prod.find_resources("AWS::IAM::ManagedPolicy").values()
    assert policy["Properties"]["ManagedPolicyName"] == "digits-prod-promoter"
    (assume,) = [
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Action"] == "sts:AssumeRole"
    ]
    assert "".join(str(p) for p in assume["Resource"]["Fn::Join"][1]).endswith(
        ":iam::222222222222:role/digits-staging-promotion-reader"
    )
    assert "PromoterPolicyArn" in prod.to_json()["Outputs"]
    # what `promote` calls beside the copy: the stack's ArtifactsBucketName output (this stack only),
    # and a large copy's parts aborted when an upload fails
    statements = {s.get("Sid"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["FindBucket"]["Action"] == "cloudformation:DescribeStacks"
    assert statements["FindBucket"]["Resource"] == {"Ref": "AWS::StackId"}
    assert "s3:AbortMultipartUpload" in statements["WriteCopies"]["Action"]


def _project_app(project, tmp_path, body: str, env: str = "prod") -> BuiltApp:
    project.spec(MINIMAL + "endpoints:\n  digits:\n" + body)
    project.env(env, 'account: "111111111111"\n')
    return BuiltApp(project.root, tmp_path / "out", [env])


def test_serverless_endpoint_has_no_kms_and_shifts_all_at_once(project, tmp_path):
    app = _project_app(
        project,
        tmp_path,
        f'    model_package: "{PIN}"\n    serverless: {{memory_mb: 3072, max_concurrency: 8}}\n',
    )
    t = _serving(app, "prod")
    config = next(iter(t.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    assert "KmsKeyId" not in config and "DataCaptureConfig" not in config
    assert config["ProductionVariants"][0]["ServerlessConfig"] == {
        "MemorySizeInMB": 3072,
        "MaxConcurrency": 8,
    }
    assert "InstanceType" not in config["ProductionVariants"][0]
    t.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": Match.object_like(
                    {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}}
                ),
                "AutoRollbackConfiguration": Match.any_value(),
            }
        },
    )
    t.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)


def test_inferentia_endpoint_compiles_in_the_pipeline_and_shifts_all_at_once(project, tmp_path):
    app = _project_app(
        project,
        tmp_path,
        "    model: {from: classifier}\n"
        "    compile: {target_device: ml_inf1, framework_version: '1.9', input_shapes: {input0: [1, 1, 8, 8]}}\n"
        "    instance_type: ml.inf1.xlarge\n"
        f'    model_package: "{PIN}"\n'
        "    rollout: {traffic: linear, canary_percent: 25, max_latency_ms: 50}\n",
    )
    t = _serving(app, "prod")
    t.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": Match.object_like(
                    {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}}
                ),
                "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": Match.any_value()}] * 2},
            }
        },
    )
    t.has_resource_properties("AWS::CloudWatch::Alarm", {"MetricName": "ModelLatency", "Threshold": 50000})
    states = app.stages["prod"].training.pipelines["classifier"].definition["States"]
    compile_request = states["Compile digits"]["Parameters"]
    assert compile_request["OutputConfig"]["TargetDevice"] == "ml_inf1"
    register = states["Register digits (catalog image)"]["Parameters"]["InferenceSpecification"]
    assert register["Containers"][0]["Image"].endswith("/sagemaker-neo-pytorch:1.9-inf-py3")
    assert register["SupportedRealtimeInferenceInstanceTypes"] == [
        "ml.inf1.xlarge",
        "ml.inf1.2xlarge",
        "ml.inf1.6xlarge",
        "ml.inf1.24xlarge",
    ]


def test_linear_rollout_steps_by_the_given_percent(project, tmp_path):
    app = _project_app(
        project,
        tmp_path,
        f'    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
        "    rollout: {traffic: linear, canary_percent: 25, wait: 2m}\n",
    )
    _serving(app, "prod").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "DeploymentConfig": Match.object_like(
                {
                    "BlueGreenUpdatePolicy": Match.object_like(
                        {
                            "TrafficRoutingConfiguration": {
                                "Type": "LINEAR",
                                "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 25},
                                "WaitIntervalInSeconds": 120,
                            }
                        }
                    )
                }
            )
        },
    )


def test_batching_renders_the_serving_containers_environment(example_app):
    """The example's `batching: {max_batch_size: 16, max_delay_ms: 5}` on an ml.c5.xlarge: the
    PyTorch inference container's variables, a worker per vCPU (any SAGEMAKER_TS_ variable would
    otherwise leave it one), and inference.py's batched handler."""
    models = _serving(example_app, "prod").find_resources("AWS::SageMaker::Model")
    (model,) = models.values()
    assert model["Properties"]["PrimaryContainer"]["Environment"] == {
        "SAGEMAKER_TS_BATCH_SIZE": "16",
        "SAGEMAKER_TS_MAX_BATCH_DELAY": "5",
        "SAGEMAKER_TS_MIN_WORKERS": "4",
        "SAGEMAKER_TS_MAX_WORKERS": "4",
        "SAGEMAKER_TS_RESPONSE_TIMEOUT": "60",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "4",
        "OMP_NUM_THREADS": "1",
        "SAGESTACK_SERVE_THREADS": "1",
        "TS_DEFAULT_SERVICE_HANDLER": "inference:handle",
    }


def test_batching_workers_follow_the_hardware_and_the_toolkit_handler_can_be_kept():
    from aws_cdk import Duration

    from sagestack.constructs import Batching
    from sagestack.constructs.endpoint_model import default_workers

    assert default_workers("ml.g5.12xlarge") == 4  # one per GPU
    assert default_workers("ml.inf2.xlarge") == 2  # one per NeuronCore
    assert default_workers("ml.m5.large") == 2  # one per vCPU
    assert default_workers(None) == 1  # serverless
    env = Batching(max_batch_size=4, max_delay=Duration.millis(20), workers=3, handler=None).environment(8)
    assert env["SAGEMAKER_TS_MIN_WORKERS"] == env["SAGEMAKER_TS_MAX_WORKERS"] == "3"
    assert env["SAGEMAKER_TS_MAX_BATCH_DELAY"] == "20" and "TS_DEFAULT_SERVICE_HANDLER" not in env
