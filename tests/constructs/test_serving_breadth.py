"""Serving beyond one real-time model: updates that keep an autoscaled fleet, rolling updates, VPC,
asynchronous inference with backlog scaling, inference components — template assertions, and every
SageMaker resource validated as its API request at synth (a bad value fails the synth)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import MINIMAL
from tests.support.cdk_app import BuiltApp
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
OTHER = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/7"


def _serving(project, tmp_path, endpoints: str) -> tuple[BuiltApp, Template]:
    project.spec(MINIMAL + "endpoints:\n" + endpoints)
    project.env("prod", 'account: "111111111111"\n')
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    return app, Template.from_stack(app.stages["prod"].serving)


def _lint(tmp_path) -> None:
    code, output = cfn_lint(sorted(str(p) for p in (tmp_path / "out").glob("assembly-prod/*.template.json")))
    assert code == 0, output


def _endpoint(t: Template) -> dict:
    (endpoint,) = t.find_resources("AWS::SageMaker::Endpoint").values()
    return endpoint["Properties"]


def test_an_autoscaled_fleet_keeps_its_instance_count_across_a_model_change(project, tmp_path):
    _, t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
        "    initial_instance_count: 2\n    autoscaling: {min: 2, max: 8}\n    data_capture: {}\n",
    )
    props = _endpoint(t)
    assert props["RetainAllVariantProperties"] is True
    # a capture change in the new config still takes effect
    assert props["ExcludeRetainedVariantProperties"] == [{"VariantPropertyType": "DataCaptureConfig"}]


def test_a_fixed_fleet_takes_the_new_configs_count(project, tmp_path):
    _, t = _serving(
        project, tmp_path, f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
    )
    props = _endpoint(t)
    assert "RetainAllVariantProperties" not in props and "ExcludeRetainedVariantProperties" not in props


def test_rolling_update_replaces_the_fleet_in_batches_and_rolls_back_at_once(project, tmp_path):
    _app, t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.g5.xlarge\n'
        "    initial_instance_count: 4\n    rollout: {traffic: rolling, batch_percent: 25, wait: 2m}\n",
    )
    deployment = _endpoint(t)["DeploymentConfig"]
    assert "BlueGreenUpdatePolicy" not in deployment
    rolling = deployment["RollingUpdatePolicy"]
    assert rolling["MaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 25}
    assert rolling["WaitIntervalInSeconds"] == 120
    assert rolling["RollbackMaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 100}
    assert deployment["AutoRollbackConfiguration"]["Alarms"]
    _lint(tmp_path)


def test_the_model_runs_in_the_given_vpc_and_the_role_may_attach_to_it(project, tmp_path):
    app, t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n'
        "    vpc: {subnets: [subnet-0a1b2c3d4e5f60718], security_groups: [sg-0a1b2c3d4e5f60718]}\n",
    )
    t.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "VpcConfig": {
                "Subnets": ["subnet-0a1b2c3d4e5f60718"],
                "SecurityGroupIds": ["sg-0a1b2c3d4e5f60718"],
            }
        },
    )
    foundation = app.template("prod")
    actions = [
        a
        for p in foundation.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert "ec2:CreateNetworkInterface" in actions


def test_async_endpoint_writes_results_and_failures_to_the_bucket_and_notifies(project, tmp_path):
    _app, t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.g5.xlarge\n'
        "    async: {max_concurrent_invocations_per_instance: 4, include_response_in_notification: true}\n"
        "    autoscaling: {min: 0, max: 3, backlog_per_instance: 2}\n",
    )
    config = next(iter(t.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    a = config["AsyncInferenceConfig"]
    assert a["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 4}
    out = a["OutputConfig"]
    assert out["S3OutputPath"]["Fn::Join"][1][-1] == "/async/digits/output/"
    assert out["S3FailurePath"]["Fn::Join"][1][-1] == "/async/digits/failures/"
    assert out["KmsKeyId"]
    # the async results' two topics, beside the environment's (which the endpoint's alarms notify)
    topics = {
        k: v for k, v in t.find_resources("AWS::SNS::Topic").items() if not k.startswith("Notifications")
    }
    assert len(topics) == 2 and all("KmsMasterKeyId" in v["Properties"] for v in topics.values())
    assert {
        out["NotificationConfig"]["SuccessTopic"]["Ref"],
        out["NotificationConfig"]["ErrorTopic"]["Ref"],
    } == set(topics)
    assert out["NotificationConfig"]["IncludeInferenceResponseIn"] == ["SUCCESS_NOTIFICATION_TOPIC"]
    # the execution role publishes to both topics
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"] for p in t.find_resources("AWS::IAM::Policy").values()
    ]
    published = [
        r["Ref"] for ss in policies for s in ss if s["Action"] == "sns:Publish" for r in s["Resource"]
    ]
    assert set(published) == set(topics)
    # scale on the queue, from zero
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 0, "MaxCapacity": 3}
    )
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "TargetValue": 2,
                    "CustomizedMetricSpecification": Match.object_like(
                        {"MetricName": "ApproximateBacklogSizePerInstance", "Namespace": "AWS/SageMaker"}
                    ),
                }
            ),
        },
    )
    wake = t.find_resources(
        "AWS::ApplicationAutoScaling::ScalingPolicy", {"Properties": {"PolicyType": "StepScaling"}}
    )
    (wake_id,) = wake
    (notifications,) = [k for k in t.find_resources("AWS::SNS::Topic") if k.startswith("Notifications")]
    t.has_resource_properties(  # waking from zero starts an instance and tells the environment's topic
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "HasBacklogWithoutCapacity",
            "AlarmActions": [{"Ref": wake_id}, {"Ref": notifications}],
        },
    )
    _lint(tmp_path)


def test_inference_components_share_a_managed_fleet(project, tmp_path):
    _app, t = _serving(
        project,
        tmp_path,
        "  shared:\n    instance_type: ml.g5.12xlarge\n    autoscaling: {min: 1, max: 4}\n"
        "    components:\n"
        f'      small: {{model_package: "{PIN}", memory_mb: 4096, cpu_cores: 2, accelerators: 1, copies: 2,'
        " max_copies: 6}\n"
        f'      large: {{model_package: "{OTHER}", memory_mb: 16384, accelerators: 2}}\n',
    )
    config = next(iter(t.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    (variant,) = config["ProductionVariants"]
    assert "ModelName" not in variant
    assert variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 1,
        "MaxInstanceCount": 4,
    }
    assert config["ExecutionRoleArn"]
    components = t.find_resources("AWS::SageMaker::InferenceComponent")
    by_name = {c["Properties"]["InferenceComponentName"]: c["Properties"] for c in components.values()}
    assert set(by_name) == {"digits-prod-shared-small", "digits-prod-shared-large"}
    small = by_name["digits-prod-shared-small"]
    assert small["RuntimeConfig"] == {"CopyCount": 2}
    assert small["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfCpuCoresRequired": 2,
        "MinMemoryRequiredInMb": 4096,
        "NumberOfAcceleratorDevicesRequired": 1,
    }
    assert t.find_resources("AWS::SageMaker::Model").__len__() == 2
    t.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "inference-component/digits-prod-shared-small",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
            "MinCapacity": 2,
            "MaxCapacity": 6,
        },
    )
    # the endpoint itself does not blue/green: the components roll
    assert "DeploymentConfig" not in _endpoint(t)
    _lint(tmp_path)


def test_a_construct_value_the_api_refuses_fails_the_synth(tmp_path):
    """The botocore check is real: a client config over the API's maximum fails `synth`."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_kms as kms

    from sagestack.constructs import ArtifactBucket, AsyncInference, InferenceEndpoint

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "S")
    artifacts = ArtifactBucket(stack, "A", encryption_key=kms.Key(stack, "K"))
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    InferenceEndpoint(
        stack,
        "E",
        endpoint_name="e",
        model_package=PIN,
        execution_role=role,
        instance_type="ml.m5.large",
        async_inference=AsyncInference(artifacts=artifacts, max_concurrent_invocations_per_instance=5000),
    )
    with pytest.raises(Exception, match="MaxConcurrentInvocationsPerInstance"):
        app.synth()


def test_a_pinned_transform_is_a_pipeline_of_its_own(project, tmp_path):
    project.spec(
        MINIMAL
        + "transforms:\n  score:\n"
        + f'    model_package: "{PIN}"\n    instance_type: [ml.m5.xlarge, ml.c5.xlarge]\n'
        + "    split_type: Line\n    join_source: Input\n    input_filter: $.instances\n"
    )
    project.env("prod", 'account: "111111111111"\n')
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    serving = app.stages["prod"].serving
    pipeline = serving.transforms["score"]
    states = pipeline.definition["States"]
    job = states["Transform score on ml.m5.xlarge"]["Parameters"]
    assert job["DataProcessing"] == {"JoinSource": "Input", "InputFilter": "$.instances"}
    assert job["TransformResources"]["InstanceType"] == "ml.m5.xlarge"
    # the next candidate follows a short quota or a capacity error
    assert (
        states["Enough for transform score ml.m5.xlarge?"]["Choices"][0]["Next"]
        == "Quota transform score ml.c5.xlarge"
    )
    assert (
        states["Transform refused score ml.m5.xlarge?"]["Choices"][0]["Next"]
        == "Quota transform score ml.c5.xlarge"
    )
    assert states["Pinned package"]["Result"] == PIN
    template = Template.from_stack(serving)
    template.has_resource_properties(
        "AWS::StepFunctions::StateMachine", {"StateMachineName": "digits-prod-transform-score"}
    )
    policies = json.dumps(template.find_resources("AWS::IAM::Policy"))
    assert "sagemaker:CreateTransformJob" in policies and ":transform-job/digits-prod-*" in policies
    assert ":model/digits-prod-*" in policies
    _lint(tmp_path)


def test_a_transform_of_a_jobs_model_runs_after_the_pipeline_registers_it(project, tmp_path):
    project.spec(
        MINIMAL
        + "transforms:\n  score:\n    model: {from: classifier}\n    instance_type: ml.m5.xlarge\n"
        + "    input: s3://my-data-bucket/digits/test/\n"
    )
    project.env("dev")
    app = BuiltApp(project.root, tmp_path / "out", ["dev"])
    assert app.stages["dev"].serving is None  # nothing pinned
    pipeline = app.stages["dev"].training.pipelines["classifier"]
    states = pipeline.definition["States"]
    register = states["Register score (transform)"]
    spec = register["Parameters"]["InferenceSpecification"]
    assert spec["SupportedTransformInstanceTypes"] == ["ml.m5.xlarge"]
    assert "SupportedRealtimeInferenceInstanceTypes" not in spec
    assert spec["Containers"][0]["Image"].endswith("pytorch-inference:2.5-cpu-py311")
    assert register["Next"] == "Name transform score"
    assert states["Name transform score"]["Parameters"]["model.$"].endswith(
        "States.Hash($.package_1.ModelPackageArn, 'MD5'))"
    )
    job = states["Transform score on ml.m5.xlarge"]["Parameters"]
    assert job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://my-data-bucket/digits/test/"
    assert states["Notify transformed score"]["Next"] == "Notify registered"
    policies = json.dumps(app.training_template("dev").find_resources("AWS::IAM::Policy"))
    assert "sagemaker:CreateTransformJob" in policies


def test_an_autoscaled_endpoints_type_change_is_refused_with_the_two_deploys(project, tmp_path):
    """SageMaker refuses changing the instance type of an autoscaled variant in one update; the
    lock records what was deployed, and lock, plan and synth all say how to make the change."""
    from sagestack.ops.lock import ServingUpdateError
    from tests.unit.test_schema_and_cli import run_cli

    body = f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n    autoscaling: {{min: 1, max: 4}}\n'
    project.spec(MINIMAL + "endpoints:\n" + body)
    project.env("prod", 'account: "111111111111"\n')
    assert run_cli("lock", "--env", "prod", "--root", str(project.root)).returncode == 0
    project.spec(MINIMAL + "endpoints:\n" + body.replace("ml.m5.large", "ml.m5.2xlarge"))
    locked = run_cli("lock", "--env", "prod", "--root", str(project.root))
    assert locked.returncode == 4
    assert (
        "from ml.m5.large to ml.m5.2xlarge while autoscaling is registered" in locked.stderr + locked.stdout
    )
    plan = run_cli("plan", "--env", "prod", "--root", str(project.root))
    assert plan.returncode == 4 and "two deploys" in " ".join(plan.stdout.split())  # wrapped to the screen
    with pytest.raises(ServingUpdateError, match=r"remove autoscaling: from endpoints\.digits"):
        BuiltApp(project.root, tmp_path / "out", ["prod"])
    # step 1: autoscaling off at the old type — accepted, and then the new type is too
    project.spec(MINIMAL + "endpoints:\n" + body.replace("    autoscaling: {min: 1, max: 4}\n", ""))
    assert run_cli("lock", "--env", "prod", "--root", str(project.root)).returncode == 0
    project.spec(MINIMAL + "endpoints:\n" + body.replace("ml.m5.large", "ml.m5.2xlarge"))
    assert run_cli("lock", "--env", "prod", "--root", str(project.root)).returncode == 0


def test_model_monitor_baselines_schedules_and_alarms_on_drift(project, tmp_path):
    app, t = _serving(
        project,
        tmp_path,
        f'  digits:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n    data_capture: {{}}\n'
        "    monitor: {dataset_format: csv, csv_header: false, alarm_features: [_c36, _c43], drift_threshold: 0.2}\n",
    )
    serving = app.stages["prod"].serving
    monitor = serving.monitors["digits"]
    states = monitor.baseline.definition["States"]
    job = states["Compute baseline"]["Parameters"]
    # its role may create, follow and stop only jobs carrying the environment's tags
    assert {"Key": "sagestack:environment", "Value": "prod"} in job["Tags"]
    assert {"Key": "sagestack:project", "Value": "digits"} in job["Tags"]
    # the baseline job, the job definition and the schedule bill for the endpoint: tagged with it
    assert {"Key": "sagestack:endpoint", "Value": "digits"} in job["Tags"]
    for kind in ("DataQualityJobDefinition", "MonitoringSchedule"):
        (resource,) = t.find_resources(f"AWS::SageMaker::{kind}").values()
        assert {"Key": "sagestack:endpoint", "Value": "digits"} in resource["Properties"]["Tags"], kind
    assert (
        job["AppSpecification"]["ImageUri"]
        == "156813124566.dkr.ecr.us-east-1.amazonaws.com/sagemaker-model-monitor-analyzer"
    )
    assert json.loads(job["Environment"]["dataset_format"]) == {
        "csv": {"header": False, "output_columns_position": "START"}
    }
    assert job["Environment"]["dataset_source"] == job["ProcessingInputs"][0]["S3Input"]["LocalPath"]
    definition = next(iter(t.find_resources("AWS::SageMaker::DataQualityJobDefinition").values()))[
        "Properties"
    ]
    assert definition["JobDefinitionName"] == "digits-prod-digits-data-quality"
    baseline = definition["DataQualityBaselineConfig"]
    assert (
        baseline["ConstraintsResource"]["S3Uri"]["Fn::Join"][1][-1]
        == "/monitoring/digits/baseline/constraints.json"
    )
    assert definition["DataQualityAppSpecification"]["Environment"] == {
        "publish_cloudwatch_metrics": "Enabled"
    }
    t.has_resource_properties(
        "AWS::SageMaker::MonitoringSchedule",
        {
            "MonitoringScheduleName": "digits-prod-digits-data-quality",
            "MonitoringScheduleConfig": {
                "MonitoringJobDefinitionName": "digits-prod-digits-data-quality",
                "MonitoringType": "DataQuality",
                "ScheduleConfig": {"ScheduleExpression": "cron(0 * ? * * *)"},
            },
        },
    )
    alarm = next(
        a["Properties"]
        for a in t.find_resources("AWS::CloudWatch::Alarm").values()
        if "Metrics" in a["Properties"]
    )
    assert alarm["Threshold"] == 0.2
    watched = {m["MetricStat"]["Metric"]["MetricName"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert watched == {"feature_baseline_drift__c36", "feature_baseline_drift__c43"}
    assert {m.get("Expression") for m in alarm["Metrics"]} >= {"MAX([f0, f1])"}
    _lint(tmp_path)
