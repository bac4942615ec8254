"""The training pipeline as Amazon States Language: quota check -> create -> poll, per candidate.

aws-sdk service integrations with explicit Describe / Wait / Choice polling (not `.sync`), so each
step handles ResourceLimitExceeded and capacity failures itself (back off, then the next candidate),
and the whole machine runs under a local Step Functions interpreter in tests. Pure data: the CDK
construct serializes it with tokens for the role, bucket, topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.plan.training import TrainingJobPlan

SDK = "arn:aws:states:::aws-sdk:"
# Error names differ: Step Functions on AWS says SageMaker.ResourceLimitExceededException, a local
# interpreter may say sagemaker.ResourceLimitExceededException; the Cause carries the service's own
# code and text. Match both, case-sensitively, as ErrorEquals would.
CAPACITY_PATTERNS = ("*ResourceLimitExceeded*", "*CapacityError*", "*InsufficientCapacity*")
IN_USE_PATTERNS = ("*ResourceInUse*",)


def fail_with_caught_error() -> dict[str, Any]:
    """A Fail state with the error a Catch stored at $.error (the service's own name and message)."""
    return {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"}


@dataclass(frozen=True)
class PipelineSettings:
    poll_seconds: int = 60
    backoff_seconds: int = 120
    topic_arn: str | None = None
    quota_codes: dict[str, str] | None = None  # quota name -> code (from a quota snapshot)


def quota_state(
    name: str, code: str | None, *, needed: int, result_path: str, next_checked: str, next_unchecked: str
) -> dict[str, Any]:
    """GetServiceQuota for a quota the snapshot names; a Pass that records "not checked" otherwise.
    An unreachable quota service also proceeds: the create call is the final judge."""
    if code is None:
        return {
            "Type": "Pass",
            "Comment": f"Quota '{name}': code unknown at synth (no quota snapshot names it)",
            "Result": {
                "checked": False,
                "quota": name,
                "needed": needed,
                "note": "quota code unknown at synth; run `sagestack quota snapshot` to check it",
            },
            "ResultPath": result_path,
            "Next": next_unchecked,
        }
    return {
        "Type": "Task",
        "Comment": f"GetServiceQuota '{name}' ({code}): {needed} needed at once",
        "Resource": f"{SDK}servicequotas:getServiceQuota",
        "Parameters": {"ServiceCode": "sagemaker", "QuotaCode": code},
        "ResultSelector": {"Value.$": "$.Quota.Value", "Name.$": "$.Quota.QuotaName"},
        "ResultPath": result_path,
        "Next": next_checked,
        "Catch": [
            {"ErrorEquals": ["States.ALL"], "ResultPath": f"{result_path}_error", "Next": next_unchecked}
        ],
    }


def _matches_any(variable: str, patterns: tuple[str, ...]) -> dict[str, Any]:
    return {"Or": [{"Variable": variable, "StringMatches": p} for p in patterns]}


def _error_matches(patterns: tuple[str, ...]) -> dict[str, Any]:
    return {
        "Or": [
            {
                "And": [
                    {"Variable": f"$.error.{field}", "IsPresent": True},
                    {"Variable": f"$.error.{field}", "IsString": True},
                    _matches_any(f"$.error.{field}", patterns),
                ]
            }
            for field in ("Error", "Cause")
        ]
    }


def training_pipeline(plan: TrainingJobPlan, settings: PipelineSettings) -> dict[str, Any]:
    """The state machine definition (a dict; json.dumps it, or Stack.to_json_string with tokens)."""
    states: dict[str, Any] = {}
    count = plan.job.instance_count
    n = len(plan.candidates)

    def start_of(i: int) -> str:
        return f"Quota {i + 1}/{n}" if i < n else "No candidate available"

    for c in plan.candidates:
        i = c.index
        tag = f"{i + 1}/{n}"
        nxt = start_of(i + 1)
        backoff = f"Back off {tag}"
        code = (settings.quota_codes or {}).get(c.quota_name)
        states[start_of(i)] = quota_state(
            c.quota_name,
            code,
            needed=count,
            result_path=f"$.quota_{i + 1}",
            next_checked=f"Quota enough {tag}?",
            next_unchecked=f"Create {tag}",
        )
        if code is not None:
            states[f"Quota enough {tag}?"] = {
                "Type": "Choice",
                "Choices": [{"Variable": f"$.quota_{i + 1}.Value", "NumericLessThan": count, "Next": nxt}],
                "Default": f"Create {tag}",
            }
        states[f"Create {tag}"] = {
            "Type": "Task",
            "Comment": f"CreateTrainingJob on {count}x {c.instance_type}",
            "Resource": f"{SDK}sagemaker:createTrainingJob",
            "Parameters": c.request,
            "ResultPath": "$.created",
            "Next": f"Wait {tag}",
            "Catch": [
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": f"Create refused {tag}?"}
            ],
        }
        states[f"Create refused {tag}?"] = {
            "Type": "Choice",
            "Choices": [
                {**_error_matches(CAPACITY_PATTERNS), "Next": backoff},
                # Same content hash, same name: this spec's job already exists; follow it.
                {**_error_matches(IN_USE_PATTERNS), "Next": f"Describe {tag}"},
            ],
            "Default": "Notify create failed",
        }
        states[backoff] = {"Type": "Wait", "Seconds": settings.backoff_seconds, "Next": nxt}
        states[f"Wait {tag}"] = {"Type": "Wait", "Seconds": settings.poll_seconds, "Next": f"Describe {tag}"}
        states[f"Describe {tag}"] = {
            "Type": "Task",
            "Resource": f"{SDK}sagemaker:describeTrainingJob",
            "Parameters": {"TrainingJobName": c.name},
            "ResultSelector": {
                "TrainingJobName.$": "$.TrainingJobName",
                "TrainingJobArn.$": "$.TrainingJobArn",
                "TrainingJobStatus.$": "$.TrainingJobStatus",
                "Detail.$": "$",
            },
            "ResultPath": "$.job",
            "Retry": [
                {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 5, "MaxAttempts": 3, "BackoffRate": 2}
            ],
            "Next": f"Status {tag}?",
        }
        states[f"Status {tag}?"] = {
            "Type": "Choice",
            "Choices": [
                {
                    "Variable": "$.job.TrainingJobStatus",
                    "StringEquals": "Completed",
                    "Next": "Notify succeeded",
                },
                {
                    "And": [
                        {"Variable": "$.job.TrainingJobStatus", "StringEquals": "Failed"},
                        {"Variable": "$.job.Detail.FailureReason", "IsPresent": True},
                        _matches_any("$.job.Detail.FailureReason", CAPACITY_PATTERNS),
                    ],
                    "Next": backoff,
                },
                {
                    "Variable": "$.job.TrainingJobStatus",
                    "StringEquals": "Failed",
                    "Next": "Notify training failed",
                },
                {"Variable": "$.job.TrainingJobStatus", "StringEquals": "Stopped", "Next": "Notify stopped"},
            ],
            "Default": f"Wait {tag}",
        }

    states["No candidate available"] = {
        "Type": "Fail",
        "Error": "NoCandidateAvailable",
        "Cause": (
            f"Every instance candidate of job '{plan.key}' was refused for quota or capacity: "
            + ", ".join(f"{plan.job.instance_count}x {c.instance_type}" for c in plan.candidates)
            + ". Ask for a quota increase, add a candidate, or retry later."
        ),
    }
    _notify(states, "Notify succeeded", settings, "succeeded", "$.job.TrainingJobName", "Succeeded")
    states["Succeeded"] = {
        "Type": "Pass",
        "Parameters": {
            "TrainingJobName.$": "$.job.TrainingJobName",
            "TrainingJobArn.$": "$.job.TrainingJobArn",
            "ModelArtifacts.$": "$.job.Detail.ModelArtifacts.S3ModelArtifacts",
            "InstanceType.$": "$.job.Detail.ResourceConfig.InstanceType",
        },
        "End": True,
    }
    _notify(states, "Notify training failed", settings, "failed", "$.job.TrainingJobName", "Training failed")
    states["Training failed"] = {
        "Type": "Fail",
        "Error": "TrainingJobFailed",
        "CausePath": "$.job.Detail.FailureReason",
    }
    _notify(states, "Notify stopped", settings, "was stopped", "$.job.TrainingJobName", "Training stopped")
    states["Training stopped"] = {
        "Type": "Fail",
        "Error": "TrainingJobStopped",
        "Cause": "The training job was stopped.",
    }
    _notify(states, "Notify create failed", settings, "was refused", None, "Create failed")
    states["Create failed"] = fail_with_caught_error()

    return {
        "Comment": f"sagestack training pipeline for job '{plan.key}' ({plan.digest})",
        "StartAt": start_of(0),
        "States": states,
    }


def publish_state(
    states: dict[str, Any],
    state: str,
    settings: PipelineSettings,
    subject: str,
    message: dict[str, str],
    nxt: str,
) -> None:
    """An SNS publish to the pipeline's topic (a Pass when there is none). `message` is
    {"Message": text} or {"Message.$": intrinsic}."""
    if settings.topic_arn is None:
        states[state] = {"Type": "Pass", "Next": nxt}
        return
    states[state] = {
        "Type": "Task",
        "Resource": f"{SDK}sns:publish",
        "Parameters": {"TopicArn": settings.topic_arn, "Subject": subject, **message},
        # Not ResultPath null: CDK's JSON rendering drops null values.
        "ResultPath": "$.notification",
        # A lost notification must not change the outcome of the pipeline.
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.notification_error", "Next": nxt}],
        "Next": nxt,
    }


def _notify(
    states: dict[str, Any], state: str, settings: PipelineSettings, verb: str, name_path: str | None, nxt: str
) -> None:
    message = (
        {"Message.$": f"States.Format('Training job {{}} {verb}.', {name_path})"}
        if name_path
        else {"Message": f"A training job {verb} by SageMaker; see the execution's error."}
    )
    publish_state(states, state, settings, f"sagestack: training {verb}", message, nxt)
