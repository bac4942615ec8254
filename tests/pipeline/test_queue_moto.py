"""A queued job's synthesized pipeline, executed by moto's Step Functions interpreter: it submits the
job's CreateTrainingJob body to its Batch queue, waits while Batch holds it for capacity, then follows
the training job Batch started — with the unqueued pipeline's endings and failure reasons.
(Batch's service jobs are answered by tests/support/batch_service_jobs.py: moto lacks them.)"""

from __future__ import annotations

import json
import time

import pytest

from tests.pipeline.conftest import ROLE, definition
from tests.support.batch_service_jobs import ServiceJobs
from tests.support.moto_server import ACCOUNT, REGION

pytestmark = pytest.mark.synth

SPEC_TAIL = (
    "    queue: {name: shared, share: research, priority: 10}\n"
    "queues:\n  shared: {max_instances: 4, shares: {research: 1, production: 0.5}}\n"
    "pipeline: {poll_interval: 1s, backoff: 1s}\n"
)


@pytest.fixture(scope="module")
def moto():
    from tests.support.moto_server import running_moto

    with running_moto() as server:
        yield server


@pytest.fixture(scope="module")
def queued_app(tmp_path_factory):
    from tests.conftest import MINIMAL, Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("queued") / "p")
    project.spec(MINIMAL + SPEC_TAIL).env("dev")
    return BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev"])


def _run(
    moto, app, monkeypatch, *, waits: int = 2, timeout: float = 60, until: str | None = None
) -> tuple[dict, ServiceJobs]:
    moto.reset()
    batch = ServiceJobs(moto.client("sagemaker"), REGION, ACCOUNT, waits=waits)
    batch.install(monkeypatch)
    topic = moto.client("sns").create_topic(Name="digits-dev-training")["TopicArn"]
    sfn = moto.client("stepfunctions")
    machine = sfn.create_state_machine(
        name="digits-dev-classifier",
        definition=definition(app, "digits-dev-classifier", topic),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/pipeline",
    )["stateMachineArn"]
    # named as `sagestack run` names its runs (moto names an unnamed one 'None'; AWS, a UUID)
    run = f"run-{time.strftime('%Y%m%dT%H%M%S')}{time.monotonic_ns() % 10**6:06d}Z"
    execution = sfn.start_execution(stateMachineArn=machine, name=run, input="{}")["executionArn"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution)
        history = sfn.get_execution_history(executionArn=execution)["events"]
        if described["status"] != "RUNNING" or (
            until and any(e.get("stateEnteredEventDetails", {}).get("name") == until for e in history)
        ):
            break
        time.sleep(0.2)
    history = sfn.get_execution_history(executionArn=execution)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e]
    return {**described, "entered": entered}, batch


def test_the_queued_job_waits_for_capacity_then_trains_with_the_unqueued_request(
    moto, queued_app, monkeypatch
):
    result, batch = _run(moto, queued_app, monkeypatch, waits=2)
    assert result["status"] == "SUCCEEDED", result
    (submitted,) = batch.submitted
    plan = queued_app.stages["dev"].training.pipelines["classifier"].job_plan
    request = plan.candidates[0].request
    assert submitted["jobQueue"] == "digits-dev-shared" and submitted["shareIdentifier"] == "research"
    assert submitted["schedulingPriority"] == 10 and submitted["serviceJobType"] == "SAGEMAKER_TRAINING"
    payload = json.loads(submitted["serviceRequestPayload"])
    assert payload["TrainingJobName"] == request["TrainingJobName"] == submitted["jobName"]
    assert payload["RoleArn"] == ROLE and "Tags" not in payload
    assert set(payload) == set(request) - {"Tags"}
    assert submitted["tags"]["sagestack:environment"] == "dev"
    # two capacity waits (RUNNABLE), then the training job Batch started is followed to its end
    assert result["entered"].count("Describe queued") == 3
    assert "Describe 1/1" in result["entered"] and "Notify succeeded" in result["entered"]
    assert json.loads(result["output"])["TrainingJobName"] == request["TrainingJobName"]
    tags = moto.client("sagemaker").list_tags(ResourceArn=batch.jobs[next(iter(batch.jobs))]["training_job"])
    assert {"Key": "sagestack:environment", "Value": "dev"} in tags["Tags"]


def test_a_run_whose_job_batch_already_started_follows_it_instead_of_submitting_again(
    moto, queued_app, monkeypatch
):
    first, batch = _run(moto, queued_app, monkeypatch, waits=0)
    assert first["status"] == "SUCCEEDED"
    sfn = moto.client("stepfunctions")
    (machine,) = sfn.list_state_machines()["stateMachines"]
    execution = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name="again", input="{}")[
        "executionArn"
    ]
    deadline = time.monotonic() + 60
    while (
        sfn.describe_execution(executionArn=execution)["status"] == "RUNNING" and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert sfn.describe_execution(executionArn=execution)["status"] == "SUCCEEDED"
    assert len(batch.submitted) == 1  # the second run found the job and followed it


def test_a_training_failure_reaches_the_execution_with_sagemakers_reason(moto, queued_app, monkeypatch):
    from moto.sagemaker.models import FakeTrainingJob

    original = FakeTrainingJob.__init__

    def failing(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        self.training_job_status = "Failed"
        self.failure_reason = "AlgorithmError: loss is NaN"

    monkeypatch.setattr(FakeTrainingJob, "__init__", failing)
    result, _ = _run(moto, queued_app, monkeypatch, waits=0)
    assert result["status"] == "FAILED", result
    history = moto.client("stepfunctions").get_execution_history(executionArn=result["executionArn"])[
        "events"
    ]
    (failed,) = [e["executionFailedEventDetails"] for e in history if "executionFailedEventDetails" in e]
    assert failed["error"] == "TrainingJobFailed" and "loss is NaN" in failed["cause"]


def test_stop_terminates_a_job_still_waiting_in_its_queue(moto, queued_app, monkeypatch):
    """A run stopped while Batch holds its job: the service job is terminated (else Batch would
    start a training job after the run was stopped), then the run."""
    from types import SimpleNamespace

    from sagestack.ops.status import scope_of
    from sagestack.ops.stop import plan, stop

    result, batch = _run(moto, queued_app, monkeypatch, waits=10_000, until="Wait queued")
    assert result["status"] == "RUNNING", result
    spec = queued_app.stages["dev"].plan.spec
    scope = scope_of(SimpleNamespace(spec=spec, env="dev"))
    sfn, sm = moto.client("stepfunctions"), moto.client("sagemaker")
    client = batch.hook(moto.client("batch"))
    run = result["executionArn"].rsplit(":", 1)[-1]
    planned = plan(scope, sfn, sm, run, client)
    (job_id,) = batch.jobs
    assert planned.jobs == (("service job", job_id, "classifier"),)
    done = stop(planned, sfn, sm, scope, client)
    assert [(s.kind, s.entry) for s in done] == [("queued job", "classifier"), ("execution", "classifier")]
    assert batch.jobs[job_id]["terminated"] == "stopped by `sagestack stop`"
    assert sfn.describe_execution(executionArn=result["executionArn"])["status"] == "ABORTED"
    assert batch.jobs[job_id]["training_job"] is None  # Batch never started it
