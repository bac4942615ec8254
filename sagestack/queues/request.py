"""The requests of a training queue: the Batch resources a deploy creates (as the API's create
calls, which the constructs turn into CloudFormation), and the SubmitServiceJob a queued job's
pipeline sends — its payload the job's CreateTrainingJob body, unchanged."""

from __future__ import annotations

import json
from typing import Any

from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.queues.models import JobQueueRef, QueueSpec

SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"
# The SDK v3's retry strategy for queued training jobs (sagemaker.train.aws_batch.constants): retry
# only SageMaker's internal errors; every other ending is the job's.
RETRY_STRATEGY: dict[str, Any] = {
    "attempts": 1,
    "evaluateOnExit": [
        {
            "action": "RETRY",
            "onStatusReason": "Received status from SageMaker:InternalServerError: "
            "We encountered an internal error. Please try again.",
        },
        {"action": "EXIT", "onStatusReason": "*"},
    ],
}


def service_environment_request(names: Names, key: str, queue: QueueSpec) -> dict[str, Any]:
    return {
        "serviceEnvironmentName": names.queue(key),
        "serviceEnvironmentType": SAGEMAKER_TRAINING,
        "state": "ENABLED",
        "capacityLimits": [{"maxCapacity": queue.max_instances, "capacityUnit": "NUM_INSTANCES"}],
    }


def scheduling_policy_request(names: Names, key: str, queue: QueueSpec) -> dict[str, Any] | None:
    """The fair-share policy of a queue with shares; None for a first-in-first-out queue."""
    if not queue.shares:
        return None
    policy: dict[str, Any] = {
        "shareDistribution": [
            {"shareIdentifier": share, "weightFactor": weight} for share, weight in queue.shares.items()
        ]
    }
    if queue.share_decay_seconds is not None:
        policy["shareDecaySeconds"] = queue.share_decay_seconds
    if queue.compute_reservation is not None:
        policy["computeReservation"] = queue.compute_reservation
    return {"name": names.queue(key), "fairsharePolicy": policy}


def job_queue_request(
    names: Names, key: str, queue: QueueSpec, scheduling_policy_arn: str | None
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "jobQueueName": names.queue(key),
        "jobQueueType": SAGEMAKER_TRAINING,
        "state": "ENABLED",
        "priority": queue.priority,
        "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": names.queue(key)}],
    }
    if scheduling_policy_arn is not None:
        request["schedulingPolicyArn"] = scheduling_policy_arn
    return request


def queue_requests(names: Names, key: str, queue: QueueSpec, policy_arn: str) -> dict[str, dict[str, Any]]:
    """A queue's create requests by operation (`policy_arn` stands in for the policy's ARN)."""
    policy = scheduling_policy_request(names, key, queue)
    out = {"CreateServiceEnvironment": service_environment_request(names, key, queue)}
    if policy is not None:
        out["CreateSchedulingPolicy"] = policy
    out["CreateJobQueue"] = job_queue_request(names, key, queue, policy_arn if policy else None)
    return out


def validate_queue_requests(names: Names, key: str, queue: QueueSpec, policy_arn: str) -> None:
    for operation, request in queue_requests(names, key, queue, policy_arn).items():
        validate_request(operation, request, service="batch")


def service_job_payload(create_training_job: dict[str, Any]) -> dict[str, Any]:
    """The serviceRequestPayload: the CreateTrainingJob body without its Tags, which the service
    job carries instead (as the SDK v3's TrainingQueue.submit does)."""
    return {k: v for k, v in create_training_job.items() if k != "Tags"}


def submit_service_job_request(
    names: Names, ref: JobQueueRef, create_training_job: dict[str, Any]
) -> dict[str, Any]:
    """SubmitServiceJob for a queued training job: Batch creates the training job from the payload
    (its TrainingJobName is the job's, so the pipeline follows it by name)."""
    return service_job(names.queue(ref.name), ref, create_training_job)


def service_job(queue: str, ref: JobQueueRef, create_training_job: dict[str, Any]) -> dict[str, Any]:
    """SubmitServiceJob to the job queue named `queue` (what the pipeline's Submit state sends)."""
    request: dict[str, Any] = {
        "jobName": create_training_job["TrainingJobName"],
        "jobQueue": queue,
        "serviceJobType": SAGEMAKER_TRAINING,
        "serviceRequestPayload": json.dumps(service_job_payload(create_training_job)),
        "retryStrategy": RETRY_STRATEGY,
        "timeoutConfig": {
            # Batch's own limit on the attempt: the job's longest wall time (spot's wait included)
            # plus an hour for Batch to start it, so SageMaker's stopping condition ends it first.
            "attemptDurationSeconds": _longest(create_training_job) + 3600,
        },
    }
    if ref.share is not None:
        request["shareIdentifier"] = ref.share
    if ref.priority is not None:
        request["schedulingPriority"] = ref.priority
    tags = {t["Key"]: t["Value"] for t in create_training_job.get("Tags", [])}
    if tags:
        request["tags"] = tags
    return request


def _longest(create_training_job: dict[str, Any]) -> int:
    stopping = create_training_job["StoppingCondition"]
    return int(stopping.get("MaxWaitTimeInSeconds") or stopping["MaxRuntimeInSeconds"])
