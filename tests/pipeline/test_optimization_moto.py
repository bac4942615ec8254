"""The example's staging optimization pipeline (chat/chat, AWQ on ml.g5.2xlarge) executed by moto's
Step Functions interpreter against a moto server started here. moto has no optimization jobs: the
server's SageMaker handler is given CreateOptimizationJob / DescribeOptimizationJob here, answering
as the API's model says (a job that runs, then completes or fails with a reason; a refusal the way
SageMaker words ResourceLimitExceeded); CreateModelPackage is moto's own."""

from __future__ import annotations

import json
import time

import pytest

from tests.pipeline.conftest import BUCKET, ROLE, definition, example_copy
from tests.support.cdk_app import BuiltApp
from tests.support.moto_server import ACCOUNT

pytestmark = pytest.mark.synth

MACHINE = "digits-staging-optimize-chat-chat"


@pytest.fixture(scope="module")
def staging_app(tmp_path_factory):
    project = example_copy(tmp_path_factory)
    staging = project.root / "config/envs/staging.yaml"
    staging.write_text(staging.read_text() + "pipeline: {poll_interval: 1s, backoff: 1s}\n")
    built = BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["staging"])
    built.root = project.root  # type: ignore[attr-defined]
    return built


class FakeJobs:
    """What the handler answers: each job's requests, its statuses in turn, refusals to make first."""

    def __init__(self, statuses: list[str], reason: str | None = None, refusals: int = 0) -> None:
        self.statuses, self.reason, self.refusals = statuses, reason, refusals
        self.created: list[dict] = []
        self.described = 0

    def install(self, monkeypatch) -> None:  # type: ignore[no-untyped-def]
        from moto.core.exceptions import JsonRESTError
        from moto.sagemaker.responses import SageMakerResponse

        jobs = self

        def create_optimization_job(self):  # type: ignore[no-untyped-def]
            request = json.loads(self.body)
            if jobs.refusals:
                jobs.refusals -= 1
                raise JsonRESTError(
                    "ResourceLimitExceeded",
                    "The account-level service limit 'ml.g5.2xlarge for endpoint usage' is 0 Instances, with "
                    "current utilization of 0 Instances and a request delta of 1 Instances.",
                )
            if any(j["OptimizationJobName"] == request["OptimizationJobName"] for j in jobs.created):
                raise JsonRESTError("ResourceInUse", f"Job {request['OptimizationJobName']} already exists")
            jobs.created.append(request)
            return json.dumps(
                {"OptimizationJobArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:optimization-job/x"}
            )

        def describe_optimization_job(self):  # type: ignore[no-untyped-def]
            (request,) = jobs.created
            status = jobs.statuses[min(jobs.described, len(jobs.statuses) - 1)]
            jobs.described += 1
            answer = {**request, "OptimizationJobStatus": status, "CreationTime": 0, "LastModifiedTime": 0}
            answer["OptimizationJobArn"] = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:optimization-job/x"
            if status == "FAILED" and jobs.reason:
                answer["FailureReason"] = jobs.reason
            answer.pop("Tags", None)
            return json.dumps(answer)

        monkeypatch.setattr(
            SageMakerResponse, "create_optimization_job", create_optimization_job, raising=False
        )
        monkeypatch.setattr(
            SageMakerResponse, "describe_optimization_job", describe_optimization_job, raising=False
        )


def _deploy(moto, app) -> str:
    moto.reset()
    moto.client("sagemaker").create_model_package_group(ModelPackageGroupName="digits-staging")
    topic = moto.client("sns").create_topic(Name="digits-staging-optimization")["TopicArn"]
    return moto.client("stepfunctions").create_state_machine(
        name=MACHINE,
        definition=definition(app, MACHINE, topic, env="staging", stack="optimization"),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]


def _run(moto, app) -> dict:
    machine = _deploy(moto, app)
    sfn = moto.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine, name=f"run-{time.monotonic_ns()}")[
        "executionArn"
    ]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    return {**described, "entered": entered}


def _packages(moto) -> list[dict]:
    sm = moto.client("sagemaker")
    summaries = sm.list_model_packages(ModelPackageGroupName="digits-staging")["ModelPackageSummaryList"]
    return [sm.describe_model_package(ModelPackageName=s["ModelPackageArn"]) for s in summaries]


def test_the_job_is_followed_to_completion_and_its_output_registered(moto, staging_app, monkeypatch):
    jobs = FakeJobs(["INPROGRESS", "INPROGRESS", "COMPLETED"])
    jobs.install(monkeypatch)
    result = _run(moto, staging_app)
    assert result["status"] == "SUCCEEDED", result
    (request,) = jobs.created
    assert request["OptimizationJobName"].startswith("digits-staging-chat-chat-")
    assert request["RoleArn"] == ROLE
    assert request["ModelSource"] == {"S3": {"S3Uri": f"s3://{BUCKET}/models/chat/"}}
    assert request["OptimizationConfigs"] == [
        {"ModelQuantizationConfig": {"OverrideEnvironment": {"OPTION_QUANTIZE": "awq"}}}
    ]
    output = f"s3://{BUCKET}/optimized/chat/{request['OptimizationJobName']}/"
    assert request["OutputConfig"]["S3OutputLocation"] == output
    assert jobs.described == 3  # polled until COMPLETED
    (package,) = _packages(moto)
    assert package["ModelApprovalStatus"] == "PendingManualApproval"
    (container,) = package["InferenceSpecification"]["Containers"]
    assert container["ModelDataSource"]["S3DataSource"]["S3Uri"] == output
    assert container["Environment"]["OPTION_QUANTIZE"] == "awq"
    assert json.loads(result["output"]) == {
        "OptimizationJobName": request["OptimizationJobName"],
        "ModelPackageArn": package["ModelPackageArn"],
        "Output": output,
    }


def test_a_failed_job_fails_the_execution_with_its_reason_and_registers_nothing(
    moto, staging_app, monkeypatch
):
    reason = "ClientError: AWQ quantization needs a calibration dataset the model could not load (test)"
    FakeJobs(["INPROGRESS", "FAILED"], reason=reason).install(monkeypatch)
    result = _run(moto, staging_app)
    assert result["status"] == "FAILED"
    assert result.get("error") == "OptimizationJobFailed"
    assert result.get("cause") == reason
    assert _packages(moto) == []


def test_no_room_backs_off_and_tries_again(moto, staging_app, monkeypatch):
    jobs = FakeJobs(["COMPLETED"], refusals=2)
    jobs.install(monkeypatch)
    result = _run(moto, staging_app)
    assert result["status"] == "SUCCEEDED", result
    assert result["entered"].count("Back off optimize chat-chat") == 2
    assert result["entered"].count("Optimize chat-chat") == 3
    assert len(jobs.created) == 1 and len(_packages(moto)) == 1


def test_a_job_of_the_same_spec_is_followed_not_repeated(moto, staging_app, monkeypatch):
    jobs = FakeJobs(["COMPLETED"])
    jobs.install(monkeypatch)
    assert _run(moto, staging_app)["status"] == "SUCCEEDED"
    jobs.described = 0
    result = _run(moto, staging_app)  # the job exists (jobs.created keeps it): ResourceInUse
    assert result["status"] == "SUCCEEDED", result
    assert "Optimize refused chat-chat?" in result["entered"] and len(jobs.created) == 1


def test_sagestack_run_endpoint_starts_its_optimization(moto, staging_app, monkeypatch):
    from tests.pipeline.test_training_pipeline_moto import _cli

    FakeJobs(["INPROGRESS", "COMPLETED"]).install(monkeypatch)
    _deploy(moto, staging_app)
    result = _cli(moto, staging_app.root, "run", "chat", "--env", "staging", "--poll", "0.2")
    assert result.returncode == 0, result.stderr
    assert "→ Optimize chat-chat" in result.stdout and "✓ succeeded" in result.stdout
    assert "model-package/digits-staging/1" in result.stdout
    result = _cli(moto, staging_app.root, "run", "chta", "--env", "staging")
    assert result.returncode == 2 and "did you mean 'chat'" in result.stderr.replace("\n", " ")
