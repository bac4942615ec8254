"""Training queues (queues:, jobs.<key>.queue): the requests a queue and a queued job send, judged by
botocore's Batch model; the queued pipeline's payload is the unqueued CreateTrainingJob body; the
rules that keep a queued job from waiting forever or being refused by Batch."""

from __future__ import annotations

import json

import pytest

from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings
from sagestack.queues.models import JobQueueRef, QueueSpec
from sagestack.queues.request import queue_requests, submit_service_job_request
from sagestack.training.models import JobSpec
from sagestack.training.rendered import RenderedJob, resolve_training_job
from sagestack.training.retrain import retrainable
from sagestack.training.states_queue import queued_pipeline
from tests.conftest import MINIMAL
from tests.unit.test_rules import findings
from tests.unit.test_training_requests import GPU, context

NAMES = Names("digits", "dev")


def _plan(body: dict) -> RenderedJob:
    return resolve_training_job(
        names=NAMES,
        key="c",
        job=JobSpec.model_validate({"image": "t", **body}),
        source_sha256="0" * 64,
        image_uris={},
        context=context(GPU),
    )


def test_a_queues_requests_are_valid_batch_requests():
    queue = QueueSpec(
        max_instances=8, priority=5, shares={"research": 1.0, "prod": 0.25}, share_decay_seconds=60
    )
    policy = "arn:aws:batch:us-east-1:111111111111:scheduling-policy/digits-dev-shared"
    requests = queue_requests(NAMES, "shared", queue, policy)
    assert list(requests) == ["CreateServiceEnvironment", "CreateSchedulingPolicy", "CreateJobQueue"]
    for operation, request in requests.items():
        validate_request(operation, request, service="batch")
    assert requests["CreateServiceEnvironment"]["capacityLimits"] == [
        {"maxCapacity": 8, "capacityUnit": "NUM_INSTANCES"}
    ]
    assert requests["CreateJobQueue"]["schedulingPolicyArn"] == policy
    fifo = queue_requests(NAMES, "fifo", QueueSpec(max_instances=1), policy)
    assert "CreateSchedulingPolicy" not in fifo and "schedulingPolicyArn" not in fifo["CreateJobQueue"]


def test_the_service_job_carries_the_unqueued_create_training_job_body():
    """SubmitServiceJob's payload is exactly the CreateTrainingJob the job sends without a queue
    (its Tags move to the service job, as the SDK v3's TrainingQueue.submit moves them)."""
    plan = _plan({"instance_type": "ml.g5.xlarge", "instance_count": 2, "use_spot_instances": True})
    request = plan.candidates[0].request
    ref = JobQueueRef(name="shared", share="research", priority=10)
    submit = submit_service_job_request(NAMES, ref, request)
    validate_request("SubmitServiceJob", submit, service="batch")
    payload = json.loads(submit["serviceRequestPayload"])
    assert payload == {k: v for k, v in request.items() if k != "Tags"}
    assert submit["tags"] == {t["Key"]: t["Value"] for t in request["Tags"]}
    assert submit["jobName"] == request["TrainingJobName"] and submit["jobQueue"] == "digits-dev-shared"
    assert (submit["shareIdentifier"], submit["schedulingPriority"]) == ("research", 10)
    # Batch's attempt outlives SageMaker's own limit (spot's wait included), so SageMaker ends it
    assert (
        submit["timeoutConfig"]["attemptDurationSeconds"]
        > request["StoppingCondition"]["MaxWaitTimeInSeconds"]
    )


def test_the_queued_pipeline_submits_that_body_and_follows_the_training_job():
    plan = _plan({"instance_type": "ml.g5.xlarge"})
    request = plan.candidates[0].request
    ref = JobQueueRef(name="fifo")
    definition = queued_pipeline(plan, PipelineSettings(), ref=ref, queue=NAMES.queue("fifo"))
    states = definition["States"]
    assert states["Payload"]["Parameters"] == {k: v for k, v in request.items() if k != "Tags"}
    submit = states["Submit"]
    assert submit["Resource"] == "arn:aws:states:::aws-sdk:batch:submitServiceJob"
    params = submit["Parameters"]
    assert params["ServiceRequestPayload.$"] == "States.JsonToString($.payload)"
    assert params["JobQueue"] == "digits-dev-fifo" and "ShareIdentifier" not in params
    # the same call as the API's, in Step Functions' PascalCase
    api = submit_service_job_request(NAMES, ref, request)
    assert (
        params["RetryStrategy"]["EvaluateOnExit"][0]["Action"]
        == api["retryStrategy"]["evaluateOnExit"][0]["action"]
    )
    assert params["TimeoutConfig"]["AttemptDurationSeconds"] == api["timeoutConfig"]["attemptDurationSeconds"]
    assert params["Tags"] == api["tags"]
    # no CreateTrainingJob of its own: Batch creates it; the pipeline follows it by name
    assert not [s for s in states.values() if s.get("Resource", "").endswith("createTrainingJob")]
    assert states["Describe 1/1"]["Parameters"] == {"TrainingJobName": request["TrainingJobName"]}


def test_a_retrain_of_a_queued_job_submits_fresh_names():
    plan = _plan({"instance_type": "ml.g5.xlarge"})
    definition = retrainable(queued_pipeline(plan, PipelineSettings(), ref=JobQueueRef(name="q"), queue="q"))
    payload = definition["States"]["Payload"]["Parameters"]
    assert "TrainingJobName" not in payload and payload["TrainingJobName.$"].startswith("$.run.")
    assert "TrainingJobName.$" in definition["States"]["Describe 1/1"]["Parameters"]


QUEUED = (
    MINIMAL
    + "    queue: {name: shared, share: research}\n"
    + "queues:\n  shared: {max_instances: 4, shares: {research: 1, production: 0.5}}\n"
    + "  fifo: {max_instances: 1}\n"
)


def test_queue_reference(project):
    assert findings(project, "queue-reference", QUEUED) == []
    assert findings(
        project, "queue-reference", QUEUED.replace("name: shared, share", "name: shard, share")
    ) == [
        "jobs.classifier.queue.name: 'shard' is not a key of queues:; did you mean 'shared'? (defined: shared, fifo)"
    ]
    assert findings(project, "queue-reference", QUEUED.replace(", share: research", "")) == [
        "jobs.classifier.queue: queue 'shared' shares its capacity fairly (research, production): say which "
        "share the job counts against with share:"
    ]
    (unknown,) = findings(project, "queue-reference", QUEUED.replace("share: research", "share: reserch"))
    assert unknown.startswith("jobs.classifier.queue.share: 'reserch' is not a share of queue 'shared'")
    fifo = QUEUED.replace("name: shared, share: research", "name: fifo, share: research, priority: 3")
    assert findings(project, "queue-reference", fifo) == [
        f"jobs.classifier.queue.{key}: queue 'fifo' runs jobs first in, first out: it has no shares, so "
        f"{key}: means nothing there; remove it, or give the queue shares:"
        for key in ("share", "priority")
    ]


def test_queue_capacity(project):
    assert findings(project, "queue-capacity", QUEUED) == []
    assert findings(
        project,
        "queue-capacity",
        QUEUED.replace("max_instances: 4", "max_instances: 1").replace(
            "    queue:", "    instance_count: 2\n    queue:"
        ),
    ) == [
        "jobs.classifier.instance_count: the job needs 2 instances at once, but queue 'shared' holds at most "
        "1 (max_instances): it would wait in the queue forever"
    ]


def test_queue_candidates(project):
    several = QUEUED.replace("instance_type: ml.m5.xlarge", "instance_type: [ml.m5.xlarge, ml.c5.xlarge]")
    assert findings(project, "queue-candidates", several) == []  # one job with InstancePreferences
    spot = several.replace("    queue:", "    use_spot_instances: true\n    queue:")
    assert findings(project, "queue-candidates", spot) == [
        "jobs.classifier.instance_type: queued job with managed spot: only ml.m5.xlarge is submitted; "
        "ml.c5.xlarge would never be tried"
    ]


@pytest.mark.parametrize(
    ("queue", "said"),
    [
        ("{max_instances: 0}", "queues.shared.max_instances: Input should be greater than or equal to 1"),
        (
            "{max_instances: 2, shares: {team: 0}}",
            "queues.shared.shares.team: Input should be greater than or equal to 0.0001",
        ),
        ("{max_instances: 2, color: red}", "queues.shared.color"),
    ],
)
def test_a_bad_queue_is_a_located_error(project, queue, said):
    project.spec(MINIMAL + f"queues:\n  shared: {queue}\n").env("dev")
    (error,) = project.errors()
    assert error.startswith("config/sagestack.yaml:10:") and said in error, error


def test_joining_a_queue_renames_no_job():
    """The queue is where a job waits, not what it computes: its name (and so whether it retrains)
    stays the same."""
    alone = _plan({"instance_type": "ml.g5.xlarge"})
    queued = _plan({"instance_type": "ml.g5.xlarge", "queue": {"name": "shared", "share": "research"}})
    assert queued.candidates[0].name == alone.candidates[0].name
    assert queued.candidates[0].request == alone.candidates[0].request
