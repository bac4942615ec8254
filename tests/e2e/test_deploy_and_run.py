"""End to end against a local AWS emulator: `cdk bootstrap`, `cdk deploy` of the e2e environment
(foundation, training pipelines, and an endpoint serving the pinned model package), `sagestack run`
of the training pipeline to success (train, compile, register), checks of what it created, `cdk destroy`.

What this tier cannot cover, and where it is covered instead:
- There is no Docker engine: the e2e environment replaces the Dockerfile image with the DLC
  (`dockerfile: null`), so no image asset is published. The Dockerfile asset is covered by
  tests/constructs/test_foundation.py::test_dockerfile_image_is_an_asset_not_a_build.
- moto has no MLflow (no AWS::SageMaker::MlflowTrackingServer, whose ARN a GetAtt would need):
  the e2e environment names an existing server (`tracking.mlflow.server`); the created server is
  covered by tests/constructs/test_foundation.py::test_mlflow_tracking_server_stores_artifacts_in_the_project_bucket.
- moto runs no Lambda: the pipeline is started with `sagestack run`, not `run_on_deploy`
  (covered by tests/constructs/test_training_stack.py::test_run_on_deploy_starts_an_execution_named_after_the_hash),
  and the example's `launcher: drivers` job runs the toolkit contract here, since its launch files are
  uploaded by CDK's BucketDeployment, a Lambda (covered by tests/constructs/test_drivers_synth.py).
- moto's CloudFormation has no AWS::S3::BucketPolicy, AWS::SNS::TopicPolicy, AWS::CloudWatch::Alarm,
  AWS::SageMaker::ModelPackageGroup, AWS::ApplicationAutoScaling::*, AWS::SageMaker::InferenceComponent,
  AWS::SageMaker::DataQualityJobDefinition or AWS::SageMaker::MonitoringSchedule: it skips them, and
  this test asserts that it did, so a future moto that creates them makes the test say so. They are
  covered by template assertions in tests/constructs/ (SSL-only bucket policies, the failure and
  rollback alarms, the model package group and its policy, autoscaling, backlog scaling, the
  components, the monitor), each validated against botocore's model at synth. The group (and the package the
  overlay pins) are made with boto3 before the deploy; moto also names an endpoint after its
  logical ID rather than its EndpointName.
- moto's endpoint configs must name a model on each variant; an inference-component endpoint's
  variant names none (its components do). That check is relaxed in the emulator, as are the two
  defects below.
- Two emulator defects are bridged in the emulator, not in sagestack: moto's CloudFormation passes
  a KMS key's tags in CloudFormation's Key/Value form to a backend that expects TagKey/TagValue,
  and it creates state machines in the Step Functions backend that the executing interpreter does
  not read. `cdk deploy` uses `--method direct`: moto computes no stack outputs (so no exports)
  for change sets.
- moto completes a compilation job at once and reports the placeholder "InferenceImage"; the
  registered package is checked to carry whatever the job reported. The tuning pipeline's SSM
  pointer is checked here too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.moto_server import ACCOUNT, REGION, MotoServer

pytestmark = pytest.mark.e2e

CDK = REPO / "node_modules" / ".bin" / "cdk"
E2E_OVERLAY = """\
# The emulator environment: DLC images only (no Docker engine), fast polling, nothing retained.
retain_data: false
images:
  train-efa: {dockerfile: null, dlc: {framework: pytorch, version: "2.5", py_version: py311}}
  train-ngc: {dockerfile: null, dlc: {framework: pytorch, version: "2.5", py_version: py311}}
# moto runs no Lambda, so no BucketDeployment: the drivers job runs the toolkit contract here
jobs: {classifier-ngc: {launcher: toolkit}}
pipeline: {poll_interval: 1s, backoff: 1s}
# moto has no MLflow: the environment names a tracking server instead of creating one.
tracking: {mlflow: {server: "MLFLOW"}}
# The promotion pin: a package registered before the deploy (see `deployed`), so the serving stack
# deploys an endpoint too.
endpoints: {digits: {model_package: "PINNED", monitor: {dataset_format: csv, alarm_features: [_c36]}}}
"""
PINNED = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/digits-e2e/1"
MLFLOW = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-tracking-server/shared"
# The other ways to serve it, added to the e2e copy of the project: asynchronous (scaling to zero on
# the backlog), two models as inference components on one fleet, and a pinned batch transform.
E2E_SERVING = """\

  queued:
    model_package: "PINNED"
    instance_type: ml.m5.xlarge
    async: {max_concurrent_invocations_per_instance: 2}
    autoscaling: {min: 0, max: 2}
  shared:
    instance_type: ml.g4dn.12xlarge  # moto's list of endpoint types predates G5
    autoscaling: {min: 1, max: 2}
    components:
      small: {model_package: "PINNED", memory_mb: 4096, accelerators: 1, copies: 2}
      large: {model_package: "PINNED", memory_mb: 16384, accelerators: 2}
"""
UNSUPPORTED_BY_MOTO = {
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::CloudWatch::Alarm",
    "AWS::SageMaker::ModelPackageGroup",
    "AWS::CDK::Metadata",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::ApplicationAutoScaling::ScalingPolicy",
    "AWS::SageMaker::InferenceComponent",
    "AWS::SageMaker::DataQualityJobDefinition",
    "AWS::SageMaker::MonitoringSchedule",
    "AWS::SageMaker::AIWorkloadConfig",
}
STACKS = ("digits-e2e-foundation", "digits-e2e-training", "digits-e2e-serving", "digits-e2e-recommendation")


def _bridge_emulator_defects(patch: pytest.MonkeyPatch) -> None:
    """Patch moto's models for the module that deploys: `patch` undoes every change at the module's
    end (they are the process's: left in place, a later module on the same worker met the
    interpreter's Step Functions backend where it had deployed into the static one)."""
    import moto.kms.models as kms_models
    import moto.stepfunctions.models as sfn_models
    import moto.stepfunctions.responses  # noqa: F401  (bound to the static backend before the patch)
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    original = kms_models.KmsBackend.create_key

    def create_key(self, *args, **kwargs):
        tags = kwargs.get("tags")
        if tags:
            kwargs["tags"] = [
                {"TagKey": t.get("TagKey", t.get("Key")), "TagValue": t.get("TagValue", t.get("Value"))}
                for t in tags
            ]
        return original(self, *args, **kwargs)

    patch.setattr(kms_models.KmsBackend, "create_key", create_key)

    # On the InstancePreferences path AWS reports the type it launched (SelectedInstanceType); moto
    # stores the request as sent and reports none.
    import moto.sagemaker.models as sm_models

    describe = sm_models.SageMakerModelBackend.describe_training_job

    def describe_training_job(self, training_job_name):  # type: ignore[no-untyped-def]
        response = dict(describe(self, training_job_name))
        resources = dict(response["ResourceConfig"])
        if resources.get("InstancePreferences") and "SelectedInstanceType" not in resources:
            first = resources["InstancePreferences"][0]
            resources.update(
                SelectedInstanceType=first["InstanceType"], SelectedInstanceCount=first["InstanceCount"]
            )
            response["ResourceConfig"] = resources
        return response

    patch.setattr(sm_models.SageMakerModelBackend, "describe_training_job", describe_training_job)

    # An endpoint config for inference components names no model on its variant (the components
    # name theirs); moto requires one.
    validate_variants = sm_models.SageMakerModelBackend.validate_production_variants

    def validate_production_variants(self, production_variants):  # type: ignore[no-untyped-def]
        return validate_variants(self, [v for v in production_variants if "ModelName" in v])

    patch.setattr(
        sm_models.SageMakerModelBackend, "validate_production_variants", validate_production_variants
    )
    patch.setattr(sfn_models, "stepfunctions_backends", stepfunctions_parser_backends)


@pytest.fixture(scope="module")
def emulator():
    with pytest.MonkeyPatch.context() as patch:
        _bridge_emulator_defects(patch)
        server = MotoServer()
        server.start()
        yield server
        server.stop()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("e2e") / "digits"
    root.mkdir()
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, root / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(
            REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.quotas.json")
        )
    (root / "config/envs/e2e.yaml").write_text(
        E2E_OVERLAY.replace("PINNED", PINNED).replace("MLFLOW", MLFLOW)
    )
    spec = (root / "config/sagestack.yaml").read_text()
    extra = E2E_SERVING.replace("PINNED", PINNED)
    spec = spec.replace("\ntransforms:\n", extra.rstrip("\n") + "\n\ntransforms:\n", 1)
    spec += f'  nightly: {{model_package: "{PINNED}", instance_type: [ml.m5.xlarge, ml.c5.xlarge]}}\n'
    (root / "config/sagestack.yaml").write_text(spec)
    return root


def _env(emulator: MotoServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=emulator.url,  # moto parses template URLs only when they say localhost
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        CDK_DISABLE_VERSION_CHECK="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    return env


def _cdk(emulator, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(CDK), *args, "--no-notices", "-c", "sagestack:environments=e2e"],
        cwd=project,
        env=_env(emulator),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"cdk {' '.join(args)} failed:\n{result.stderr[-4000:]}"
    return result


@pytest.fixture(scope="module")
def deployed(emulator, project):
    # moto's CloudFormation skips AWS::SageMaker::ModelPackageGroup (see UNSUPPORTED_BY_MOTO): make
    # the group the foundation stack declares, and the package the e2e overlay pins (version 1).
    sm = emulator.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="digits-e2e")
    pinned = sm.create_model_package(
        ModelPackageGroupName="digits-e2e",
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [
                {
                    "Image": "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-inference-pytorch:2.0-cpu-py3",
                    "ModelDataUrl": "s3://bucket/models/compiled/digits/model-ml_c5.tar.gz",
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )["ModelPackageArn"]
    assert pinned == PINNED
    _cdk(emulator, project, "bootstrap", f"aws://{ACCOUNT}/{REGION}")
    _cdk(emulator, project, "deploy", "e2e/*", "--method", "direct", "--require-approval", "never")
    yield project
    _cdk(emulator, project, "destroy", "e2e/*", "--force")
    stacks = emulator.client("cloudformation").list_stacks(
        StackStatusFilter=["CREATE_COMPLETE", "UPDATE_COMPLETE"]
    )
    assert [s["StackName"] for s in stacks["StackSummaries"] if s["StackName"].startswith("digits-e2e")] == []


def test_both_stacks_deploy_and_what_moto_skips_is_known(emulator, deployed):
    cf = emulator.client("cloudformation")
    for stack in STACKS:
        assert cf.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    template_types = set()
    for template in (deployed / "cdk.out" / "assembly-e2e").glob("*.template.json"):
        template_types |= {r["Type"] for r in json.loads(template.read_text())["Resources"].values()}
    created_types = {
        r["ResourceType"]
        for stack in STACKS
        for r in cf.list_stack_resources(StackName=stack)["StackResourceSummaries"]
        if r.get("PhysicalResourceId")
    }
    assert template_types - created_types == UNSUPPORTED_BY_MOTO & template_types
    exports = {e["Name"].split(":")[0] for e in cf.list_exports()["Exports"]}
    assert exports == {"digits-e2e-foundation"}


def _run_pipeline(emulator, project: Path, name: str) -> dict:
    """`sagestack run NAME --env e2e` to success; the execution's output."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagestack.cli",
            "run",
            name,
            "--env",
            "e2e",
            "--poll",
            "0.5",
            "--root",
            str(project),
        ],
        env=_env(emulator),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "✓ succeeded" in result.stdout
    output: dict = json.loads(result.stdout.split("✓ succeeded: ", 1)[1])
    return output


def test_pipeline_runs_to_success_and_the_job_is_the_synthesized_request(emulator, deployed):
    output = _run_pipeline(emulator, deployed, "classifier")

    sfn = emulator.client("stepfunctions")
    machine = next(
        m for m in sfn.list_state_machines()["stateMachines"] if m["name"] == "digits-e2e-classifier"
    )
    definition = json.loads(
        sfn.describe_state_machine(stateMachineArn=machine["stateMachineArn"])["definition"]
    )
    # The example's classifier candidates differ only in the type: one job with InstancePreferences.
    request = definition["States"]["Create"]["Parameters"]
    preferences = request["ResourceConfig"].pop("InstancePreferences.$")
    assert preferences == "$.preferences.List"

    sm = emulator.client("sagemaker")
    job = sm.describe_training_job(TrainingJobName=output["TrainingJobName"])
    assert job["TrainingJobName"] == request["TrainingJobName"] and job["TrainingJobName"].endswith("-p")
    sent = dict(job["ResourceConfig"])
    assert [p["InstanceType"] for p in sent.pop("InstancePreferences")] == [
        "ml.g5.2xlarge",
        "ml.g4dn.2xlarge",
    ]
    assert output["InstanceType"] == sent.pop("SelectedInstanceType") == "ml.g5.2xlarge"
    sent.pop("SelectedInstanceCount")
    assert sent == request["ResourceConfig"]
    for key in (
        "RoleArn",
        "HyperParameters",
        "StoppingCondition",
        "OutputDataConfig",
        "EnableNetworkIsolation",
        "EnableInterContainerTrafficEncryption",
    ):
        assert job[key] == request[key], key
    # (moto answers MetricDefinitions with a fixed sample of its own, so they are not compared here;
    # the golden request tests pin them.)
    for key in ("TrainingImage", "TrainingInputMode"):
        assert job["AlgorithmSpecification"][key] == request["AlgorithmSpecification"][key], key

    # the deployed values replaced the tokens: the real role and bucket of the foundation stack
    cf = emulator.client("cloudformation")
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cf.describe_stacks(StackName="digits-e2e-foundation")["Stacks"][0]["Outputs"]
    }
    assert job["RoleArn"] == outputs["ExecutionRoleArn"]
    assert (
        job["OutputDataConfig"]["S3OutputPath"] == f"s3://{outputs['ArtifactsBucketName']}/output/classifier/"
    )
    # the source archive the job points at was published by cdk deploy and is the deterministic one
    source = json.loads(job["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = source[len("s3://") :].split("/", 1)
    body = emulator.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    from sagestack.core.sourcedir import pack_source_dir

    assert body == pack_source_dir(deployed / "training_src").data

    # the endpoint's model: compiled by Neo from this job's artifact, registered for review
    compile_state = definition["States"]["Compile digits"]["Parameters"]
    (compilation,) = sm.list_compilation_jobs()["CompilationJobSummaries"]
    compiled = sm.describe_compilation_job(CompilationJobName=compilation["CompilationJobName"])
    assert (
        compiled["InputConfig"]["S3Uri"]
        == output["ModelArtifacts"]
        == job["ModelArtifacts"]["S3ModelArtifacts"]
    )
    assert compiled["InputConfig"]["DataInputConfig"] == compile_state["InputConfig"]["DataInputConfig"]
    assert compiled["OutputConfig"]["TargetDevice"] == "ml_c5"
    assert compiled["RoleArn"] == outputs["ExecutionRoleArn"]
    package = sm.describe_model_package(ModelPackageName=output["ModelPackages"]["digits"])
    assert package["ModelPackageGroupName"] == "digits-e2e" and package["ModelPackageArn"] != PINNED
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    (container,) = package["InferenceSpecification"]["Containers"]
    assert container["ModelDataUrl"] == compiled["ModelArtifacts"]["S3ModelArtifacts"]
    assert container["Image"] == compiled["InferenceImage"]
    assert package["CustomerMetadataProperties"]["sagestack:training-job"] == output["TrainingJobName"]


def test_tuning_pipeline_records_the_best_model_in_ssm(emulator, deployed):
    output = _run_pipeline(emulator, deployed, "lr-search")
    stored = emulator.client("ssm").get_parameter(Name="/sagestack/digits/e2e/tuning/lr-search/best-model")
    assert json.loads(stored["Parameter"]["Value"]) == output
    recorded = emulator.client("sagemaker").describe_hyper_parameter_tuning_job(
        HyperParameterTuningJobName=output["TuningJobName"]
    )
    definition = recorded["TrainingJobDefinition"]
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in emulator.client("cloudformation").describe_stacks(StackName="digits-e2e-foundation")[
            "Stacks"
        ][0]["Outputs"]
    }
    assert definition["RoleArn"] == outputs["ExecutionRoleArn"]
    assert (
        "lr" not in definition["StaticHyperParameters"]
        and definition["StaticHyperParameters"]["epochs"] == "10"
    )


def test_the_serving_stack_serves_the_pinned_package(emulator, deployed):
    sm = emulator.client("sagemaker")
    # moto names endpoints after their logical IDs: 'digits' is the one that captures its data
    endpoints = [
        sm.describe_endpoint(EndpointName=e["EndpointName"]) for e in sm.list_endpoints()["Endpoints"]
    ]
    assert len(endpoints) == 3 and {e["EndpointStatus"] for e in endpoints} == {"InService"}
    configs = [sm.describe_endpoint_config(EndpointConfigName=e["EndpointConfigName"]) for e in endpoints]
    (config,) = [c for c in configs if (c.get("DataCaptureConfig") or {}).get("EnableCapture")]
    (variant,) = config["ProductionVariants"]
    assert variant["VariantName"] == "AllTraffic"
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.c5.xlarge", 1)
    assert config["DataCaptureConfig"]["InitialSamplingPercentage"] == 20
    assert config["DataCaptureConfig"]["DestinationS3Uri"].endswith("/capture/digits")
    model = sm.describe_model(ModelName=variant["ModelName"])
    assert model["PrimaryContainer"]["ModelPackageName"] == PINNED
    stack = emulator.client("cloudformation").describe_stacks(StackName="digits-e2e-foundation")["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    assert model["ExecutionRoleArn"] == outputs["ExecutionRoleArn"]


def test_the_async_and_shared_endpoints_deploy_as_synthesized(emulator, deployed):
    """moto names endpoints after logical IDs: find the configs by what they hold."""
    sm = emulator.client("sagemaker")
    configs = [
        sm.describe_endpoint_config(EndpointConfigName=c["EndpointConfigName"])
        for c in sm.list_endpoint_configs()["EndpointConfigs"]
    ]
    (queued,) = [c for c in configs if c.get("AsyncInferenceConfig")]
    out = queued["AsyncInferenceConfig"]["OutputConfig"]
    assert out["S3OutputPath"].endswith("/async/queued/output/") and out["S3FailurePath"].endswith(
        "/async/queued/failures/"
    )
    assert {"SuccessTopic", "ErrorTopic"} <= set(out["NotificationConfig"])
    assert queued["AsyncInferenceConfig"]["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 2}
    (shared,) = [c for c in configs if c["ProductionVariants"][0].get("InstanceType") == "ml.g4dn.12xlarge"]
    (variant,) = shared["ProductionVariants"]
    assert "ModelName" not in variant
    topics = emulator.client("sns").list_topics()["Topics"]
    assert any(t["TopicArn"] == out["NotificationConfig"]["SuccessTopic"] for t in topics)


def test_the_pinned_transform_runs_with_sagestack_run(emulator, deployed):
    output = _run_pipeline(emulator, deployed, "nightly")
    sm = emulator.client("sagemaker")
    job = sm.describe_transform_job(TransformJobName=output["TransformJobName"])
    assert job["TransformJobStatus"] == "Completed"
    assert job["TransformResources"]["InstanceType"] == output["InstanceType"] == "ml.m5.xlarge"
    assert job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"].endswith("/transform/nightly/input/")
    assert sm.describe_model(ModelName=job["ModelName"])["PrimaryContainer"]["ModelPackageName"] == PINNED
