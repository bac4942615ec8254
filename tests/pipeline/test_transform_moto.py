"""Batch transforms executed by moto's Step Functions interpreter against a moto server: after the
classifier pipeline registers the model (model: {from}), and as a pinned transform's own pipeline
— the model made once per package, the quota-short candidate skipped, the job's request as sent.
And the Model Monitor baseline pipeline of a monitored endpoint."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tests.pipeline.conftest import BUCKET, ROLE, definition
from tests.support.cdk_app import BuiltApp
from tests.support.moto_server import ACCOUNT

pytestmark = pytest.mark.synth

PIN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:model-package/digits-dev/1"


@pytest.fixture(scope="module")
def transform_app(tmp_path_factory):
    from tests.conftest import REPO, Project

    root = tmp_path_factory.mktemp("proj") / "p"
    Project(root)  # the folders a project has
    shutil.rmtree(root / "config")
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "containers", root / "containers")
    # The example's `score` transform (model: {from: classifier}, on ml.m5.xlarge or ml.c5.xlarge), and a
    # pinned one the project file declares (an overlay may not invent an entry).
    spec = root / "config/sagestack.yaml"
    spec.write_text(
        spec.read_text().replace(
            "transforms:\n",
            f'transforms:\n  nightly:\n    model_package: "{PIN}"\n    instance_type: [ml.c5.xlarge]\n',
            1,
        )
    )
    dev = root / "config/envs/dev.yaml"
    # The overlay's own endpoints: section (digits measured on registration) gives way to the pin:
    # a pinned package has no registration to measure on.
    overlay = dev.read_text().split("\nendpoints:\n", 1)[0] + "\n"
    dev.write_text(
        overlay
        + "pipeline: {poll_interval: 1s, backoff: 1s}\n"
        + f'endpoints:\n  digits:\n    model_package: "{PIN}"\n    monitor: {{dataset_format: json}}\n'
    )
    # The snapshot names the transform quotas' codes (their values are read at run time).
    (root / "config/envs/dev.quotas.json").write_text(
        json.dumps(
            {
                "quotas": [
                    {"QuotaName": "ml.g4dn.xlarge for training job usage", "QuotaCode": "L-G4", "Value": 4.0},
                    {"QuotaName": "ml.m5.xlarge for transform job usage", "QuotaCode": "L-M5", "Value": 0.0},
                    {"QuotaName": "ml.c5.xlarge for transform job usage", "QuotaCode": "L-C5", "Value": 2.0},
                ]
            }
        )
    )
    return BuiltApp(root, tmp_path_factory.mktemp("out"), ["dev"])


def _start(moto, machine_arn: str, payload: dict) -> dict:
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=machine_arn, name=f"run-{time.monotonic_ns()}", input=json.dumps(payload)
    )["executionArn"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    return {**described, "entered": entered}


def _machine(moto, app, name: str, stack: str) -> str:
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    return moto.client("stepfunctions").create_state_machine(
        name=name,
        definition=definition(app, name, topic, stack=stack),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]


def _quotas(monkeypatch, values: dict[str, float]) -> None:
    """moto's Service Quotas knows no SageMaker quotas (and its interpreter does not route the
    integration): answer GetServiceQuota with these values by code."""
    from moto.servicequotas.models import ServiceQuotasBackend
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
        StateTaskService,
    )

    def get_service_quota(self, service_code, quota_code):  # type: ignore[no-untyped-def]
        return {"QuotaName": quota_code, "QuotaCode": quota_code, "Value": values[quota_code]}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    monkeypatch.setitem(
        StateTaskService._SERVICE_NAME_SFN_TO_BOTO_OVERRIDES, "servicequotas", "service-quotas"
    )


def test_the_pipeline_registers_the_model_then_scores_with_it(moto, transform_app, monkeypatch):
    _quotas(monkeypatch, {"L-G4": 4.0, "L-M5": 0.0, "L-C5": 2.0})
    moto.reset()
    moto.client("sagemaker").create_model_package_group(ModelPackageGroupName="digits-dev")
    machine = _machine(moto, transform_app, "digits-dev-classifier", "training")
    result = _start(moto, machine, {})
    assert result["status"] == "SUCCEEDED", result
    output = json.loads(result["output"])
    sm = moto.client("sagemaker")
    package = output["ModelPackages"]["score"]
    described = sm.describe_model_package(ModelPackageName=package)
    assert described["InferenceSpecification"]["SupportedTransformInstanceTypes"] == [
        "ml.m5.xlarge",
        "ml.c5.xlarge",
    ]
    (job_summary,) = sm.list_transform_jobs()["TransformJobSummaries"]
    job = sm.describe_transform_job(TransformJobName=job_summary["TransformJobName"])
    # the m5 candidate's quota is 0: the job runs on the next candidate
    assert job["TransformResources"]["InstanceType"] == "ml.c5.xlarge"
    assert "Enough for transform score ml.m5.xlarge?" in result["entered"]
    assert (
        job["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"]
        == f"s3://{BUCKET}/transform/score/input/"
    )
    assert (
        job["TransformOutput"]["S3OutputPath"]
        == f"s3://{BUCKET}/transform/score/output/{job['TransformJobName']}/"
    )
    assert job["DataProcessing"]["JoinSource"] == "Input"
    model = sm.describe_model(ModelName=job["ModelName"])
    assert model["PrimaryContainer"]["ModelPackageName"] == package
    assert model["ExecutionRoleArn"] == ROLE
    assert result["entered"].index("Register score (transform)") < result["entered"].index(
        "Name transform score"
    )


def test_a_pinned_transform_reuses_its_model_and_takes_another_input(moto, transform_app, monkeypatch):
    _quotas(monkeypatch, {"L-C5": 2.0})
    from moto.core.exceptions import JsonRESTError
    from moto.sagemaker.models import SageMakerModelBackend

    original = SageMakerModelBackend.create_model

    def create_model_once(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        # As SageMaker does (moto replaces the model silently).
        name = kwargs["model_name"]
        if name in self._models:
            raise JsonRESTError(
                "ValidationException",
                f'Cannot create already existing model "arn:aws:sagemaker:::model/{name}".',
            )
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SageMakerModelBackend, "create_model", create_model_once)
    moto.reset()
    machine = _machine(moto, transform_app, "digits-dev-transform-nightly", "serving")
    first = _start(moto, machine, {})
    assert first["status"] == "SUCCEEDED", first
    second = _start(moto, machine, {"Input": "s3://other-bucket/tonight/"})
    assert second["status"] == "SUCCEEDED", second
    sm = moto.client("sagemaker")
    jobs = [
        sm.describe_transform_job(TransformJobName=j["TransformJobName"])
        for j in sm.list_transform_jobs()["TransformJobSummaries"]
    ]
    assert len(jobs) == 2 and len({j["TransformJobName"] for j in jobs}) == 2
    assert {j["ModelName"] for j in jobs} == {jobs[0]["ModelName"]}  # one model per package
    assert "Model refused nightly?" in second["entered"]  # the second CreateModel found it made
    inputs = sorted(j["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] for j in jobs)
    assert inputs == [f"s3://{BUCKET}/transform/nightly/input/", "s3://other-bucket/tonight/"]
    assert sm.describe_model(ModelName=jobs[0]["ModelName"])["PrimaryContainer"]["ModelPackageName"] == PIN


def test_the_monitor_baseline_pipeline_runs_the_analyzer_on_the_training_data(moto, transform_app):
    moto.reset()
    machine = _machine(moto, transform_app, "digits-dev-baseline-digits", "serving")
    result = _start(moto, machine, {})
    assert result["status"] == "SUCCEEDED", result
    assert result["entered"][-2:] == ["Notify baseline ready", "Baseline ready"]
    sm = moto.client("sagemaker")
    (summary,) = sm.list_processing_jobs()["ProcessingJobSummaries"]
    job = sm.describe_processing_job(ProcessingJobName=summary["ProcessingJobName"])
    assert job["ProcessingJobName"].startswith("digits-dev-digits-baseline-")
    assert job["AppSpecification"]["ImageUri"].endswith("/sagemaker-model-monitor-analyzer")
    # (moto keeps no Environment; the synth tests assert the analyzer's settings)
    (source,) = job["ProcessingInputs"]
    assert source["S3Input"]["S3Uri"] == f"s3://{BUCKET}/monitoring/digits/baseline-data/"
    (out,) = job["ProcessingOutputConfig"]["Outputs"]
    assert out["S3Output"]["S3Uri"] == f"s3://{BUCKET}/monitoring/digits/baseline"
    assert job["RoleArn"] == ROLE
