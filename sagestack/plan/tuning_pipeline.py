"""The tuning pipeline as Amazon States Language: quota check for the parallel trials, create the
tuning job, poll it, record the best training job and its model artifact (SSM + the output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.plan.pipeline import (
    CAPACITY_PATTERNS,
    IN_USE_PATTERNS,
    SDK,
    PipelineSettings,
    _error_matches,
    _notify,
    fail_with_caught_error,
    quota_state,
)


@dataclass(frozen=True)
class TuningPipelineInputs:
    key: str
    request: dict[str, Any]  # CreateHyperParameterTuningJob (values may be tokens)
    quota_name: str  # of the first (preferred) instance candidate
    quota_needed: int  # max_parallel_jobs x instance_count
    parameter_name: str  # SSM parameter that records the best model


def tuning_pipeline(inputs: TuningPipelineInputs, settings: PipelineSettings) -> dict[str, Any]:
    name = inputs.request["HyperParameterTuningJobName"]
    output_path = inputs.request["TrainingJobDefinition"]["OutputDataConfig"]["S3OutputPath"]
    states: dict[str, Any] = {}
    code = (settings.quota_codes or {}).get(inputs.quota_name)
    states["Quota"] = quota_state(
        inputs.quota_name,
        code,
        needed=inputs.quota_needed,
        result_path="$.quota",
        next_checked="Quota enough?",
        next_unchecked="Create tuning job",
    )
    if code is not None:
        states["Quota enough?"] = {
            "Type": "Choice",
            "Choices": [
                {"Variable": "$.quota.Value", "NumericLessThan": inputs.quota_needed, "Next": "Quota too low"}
            ],
            "Default": "Create tuning job",
        }
        states["Quota too low"] = {
            "Type": "Fail",
            "Error": "QuotaTooLow",
            "Cause": f"'{inputs.quota_name}' must allow {inputs.quota_needed} instances (max_parallel_jobs x "
            "instance_count); lower max_parallel_jobs or ask for an increase with `aws service-quotas "
            f"request-service-quota-increase --service-code sagemaker --quota-code {code} "
            f"--desired-value {inputs.quota_needed}`",
        }
    states["Create tuning job"] = {
        "Type": "Task",
        "Resource": f"{SDK}sagemaker:createHyperParameterTuningJob",
        "Parameters": inputs.request,
        "ResultPath": "$.created",
        "Next": "Wait",
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Create refused?"}],
    }
    states["Create refused?"] = {
        "Type": "Choice",
        "Choices": [
            {**_error_matches(IN_USE_PATTERNS), "Next": "Describe"},  # this spec's search already exists
            {**_error_matches(CAPACITY_PATTERNS), "Next": "Notify create failed"},
        ],
        "Default": "Notify create failed",
    }
    states["Wait"] = {"Type": "Wait", "Seconds": settings.poll_seconds, "Next": "Describe"}
    states["Describe"] = {
        "Type": "Task",
        "Resource": f"{SDK}sagemaker:describeHyperParameterTuningJob",
        "Parameters": {"HyperParameterTuningJobName": name},
        "ResultSelector": {"Status.$": "$.HyperParameterTuningJobStatus", "Detail.$": "$"},
        "ResultPath": "$.tuning",
        "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 5, "MaxAttempts": 3, "BackoffRate": 2}],
        "Next": "Status?",
    }
    states["Status?"] = {
        "Type": "Choice",
        "Choices": [
            {
                "And": [
                    {"Variable": "$.tuning.Status", "StringEquals": "Completed"},
                    {"Variable": "$.tuning.Detail.BestTrainingJob.TrainingJobName", "IsPresent": True},
                ],
                "Next": "Best model",
            },
            {"Variable": "$.tuning.Status", "StringEquals": "Completed", "Next": "No best job"},
            {"Variable": "$.tuning.Status", "StringEquals": "Failed", "Next": "Notify tuning failed"},
            {"Variable": "$.tuning.Status", "StringEquals": "Stopped", "Next": "Notify tuning stopped"},
        ],
        "Default": "Wait",
    }
    states["No best job"] = {
        "Type": "Fail",
        "Error": "NoBestTrainingJob",
        "Cause": "The tuning job completed without a best training job: every trial failed.",
    }
    states["Best model"] = {
        "Type": "Pass",
        "Comment": "SageMaker writes a job's model to <S3OutputPath><job name>/output/model.tar.gz",
        "Parameters": {
            "TuningJobName": name,
            "TrainingJobName.$": "$.tuning.Detail.BestTrainingJob.TrainingJobName",
            "Objective.$": "$.tuning.Detail.BestTrainingJob.FinalHyperParameterTuningJobObjectiveMetric",
            "ModelArtifacts.$": f"States.Format('{output_path}{{}}/output/model.tar.gz', "
            "$.tuning.Detail.BestTrainingJob.TrainingJobName)",
        },
        "ResultPath": "$.best",
        "Next": "Record best model",
    }
    states["Record best model"] = {
        "Type": "Task",
        "Resource": f"{SDK}ssm:putParameter",
        "Parameters": {
            "Name": inputs.parameter_name,
            "Type": "String",
            "Overwrite": True,
            "Value.$": "States.JsonToString($.best)",
        },
        "ResultPath": "$.recorded",
        "Next": "Notify succeeded",
    }
    _notify(states, "Notify succeeded", settings, "succeeded", "$.best.TrainingJobName", "Succeeded")
    states["Succeeded"] = {"Type": "Pass", "InputPath": "$.best", "End": True}
    _notify(states, "Notify tuning failed", settings, "failed", None, "Tuning failed")
    states["Tuning failed"] = {
        "Type": "Fail",
        "Error": "TuningJobFailed",
        "Cause": "The tuning job failed or was stopped; see DescribeHyperParameterTuningJob's FailureReason.",
    }
    _notify(states, "Notify create failed", settings, "was refused", None, "Create failed")
    states["Create failed"] = fail_with_caught_error()
    return {"Comment": f"sagestack tuning pipeline for '{inputs.key}'", "StartAt": "Quota", "States": states}
