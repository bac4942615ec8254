"""The training pipeline of a queued job (`queue:`), as Amazon States Language: quota check ->
already there? -> SubmitServiceJob to the queue's Batch job queue -> wait while Batch holds it
(SUBMITTED, PENDING, RUNNABLE: capacity, share and priority) -> follow the training job Batch
started, with the same polling, notifications and failure reasons as an unqueued job."""

from __future__ import annotations

from typing import Any

from sagestack.core import states as asl
from sagestack.core.states import PipelineSettings
from sagestack.queues.models import JobQueueRef
from sagestack.queues.request import service_job, service_job_payload
from sagestack.training.rendered import RenderedJob
from sagestack.training.states import NO_CANDIDATE, STATUS, CandidateStates, candidate_quota, follow, outcomes

PAYLOAD = "$.payload"
QUEUED = "$.queued"  # SubmitServiceJob's answer: JobId, JobArn, JobName
QUEUE_JOB = "$.queue_job"  # DescribeServiceJob's: Status and the whole answer
# Batch's states after which SageMaker's training job exists (RUNNING) or has ended.
STARTED = ("RUNNING", "SUCCEEDED")


def queued_pipeline(
    plan: RenderedJob, settings: PipelineSettings, *, ref: JobQueueRef, queue: str
) -> dict[str, Any]:
    """`queue`: the Batch job queue's name. The payload is the job's CreateTrainingJob body (every
    candidate as InstancePreferences where they can be one job, else the first candidate's)."""
    request = plan.preferred.request if plan.preferred is not None else plan.candidates[0].request
    first = plan.candidates[0]
    count = plan.job.instance_count
    s = CandidateStates(0, 1)
    states: dict[str, Any] = {}
    candidate_quota(states, first, s, settings, count, short=NO_CANDIDATE, enough="Exists?")
    name = request["TrainingJobName"]
    states["Exists?"] = asl.task(
        "sagemaker:describeTrainingJob",
        {"TrainingJobName": name},
        comment="a run of this spec that Batch already started is followed, not submitted again",
        result_path="$.existing",
        result_selector={"TrainingJobName.$": "$.TrainingJobName"},
        nxt=s.describe,
        catch_=asl.catch("Payload", "$.not_found"),
    )
    states["Payload"] = {
        "Type": "Pass",
        "Comment": "the job's CreateTrainingJob body, unchanged (its Tags go on the service job)",
        "Parameters": service_job_payload(request),
        "ResultPath": PAYLOAD,
        "Next": "Submit",
    }
    states["Submit"] = asl.task(
        "batch:submitServiceJob",
        _submit_parameters(request, ref, queue),
        comment=f"SubmitServiceJob to queue {queue}"
        + (f", share {ref.share}" if ref.share else "")
        + f": {count}x {first.instance_type}",
        result_path=QUEUED,
        nxt="Wait queued",
        catch_=asl.catch("Notify create failed"),
    )
    states["Wait queued"] = asl.wait(settings.poll_seconds, "Describe queued")
    states["Describe queued"] = asl.task(
        "batch:describeServiceJob",
        {"JobId.$": f"{QUEUED}.JobId"},
        result_selector={"Status.$": "$.Status", "Detail.$": "$"},
        result_path=QUEUE_JOB,
        retry_=asl.retry(),
        nxt="Queued?",
    )
    started = [asl.when(asl.string_equals(f"{QUEUE_JOB}.Status", st), s.describe) for st in STARTED]
    states["Queued?"] = asl.choice(
        *started,
        asl.when(asl.string_equals(f"{QUEUE_JOB}.Status", "FAILED"), "Started?"),
        default="Wait queued",
    )
    # A job that failed before the first poll saw it run: follow the training job where Batch
    # started one (its FailureReason is the reason), else Batch's own reason.
    states["Started?"] = asl.choice(
        asl.when(asl.is_present(f"{QUEUE_JOB}.Detail.LatestAttempt.ServiceResourceId.Value"), s.describe),
        default="Notify queue failed",
    )
    states["Notify queue failed"] = asl.notify(
        settings,
        "sagestack: queued training failed",
        {
            "Message.$": f"States.Format('Queued training job {{}} failed in Batch.', {PAYLOAD}.TrainingJobName)"
        },
        "Queue failed",
    )
    states["Queue failed"] = asl.fail("QueuedJobFailed", cause_path=f"{QUEUE_JOB}.Detail.StatusReason")
    states.update(follow(s, name, settings))
    states[NO_CANDIDATE] = asl.fail(
        "NoCandidateAvailable",
        cause=(
            f"Job '{plan.key}' needs {count}x {first.instance_type}, and its quota "
            f"'{first.quota_name}' is short: Batch could never start it. Ask for a quota increase."
        ),
    )
    instance_type = (
        "$.job.Detail.ResourceConfig.SelectedInstanceType"
        if plan.preferred is not None
        else "$.job.Detail.ResourceConfig.InstanceType"
    )
    outcomes(states, plan, settings, instance_type=instance_type)
    return {
        "Comment": f"sagestack training pipeline for job '{plan.key}' ({plan.digest}), queued in {queue}",
        "StartAt": s.quota,
        "States": states,
    }


def _submit_parameters(request: dict[str, Any], ref: JobQueueRef, queue: str) -> dict[str, Any]:
    """SubmitServiceJob as Step Functions' aws-sdk integration takes it: queues/request.service_job's
    call with its members in PascalCase (the tags' keys are data, kept), the job's name and payload
    read from the Payload state (so a retrain's fresh names reach them)."""
    api = service_job(queue, ref, request)
    tags = api.pop("tags", None)
    del api["jobName"], api["serviceRequestPayload"]
    parameters: dict[str, Any] = {
        "JobName.$": f"{PAYLOAD}.TrainingJobName",
        "ServiceRequestPayload.$": f"States.JsonToString({PAYLOAD})",
        **_pascal(api),
    }
    if tags:
        parameters["Tags"] = tags
    return parameters


def _pascal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k[0].upper() + k[1:]: _pascal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_pascal(v) for v in value]
    return value


__all__ = ["STATUS", "queued_pipeline"]
