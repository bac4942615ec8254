"""The tuning pipeline as Amazon States Language: quota check for the parallel trials, create the
tuning job, poll it, record the best training job and its model artifact (SSM + the output)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.states import CAPACITY_PATTERNS, IN_USE_PATTERNS, PipelineSettings, notify_outcome


@dataclass(frozen=True)
class TuningPipelineInputs:
    key: str
    request: dict[str, Any]  # CreateHyperParameterTuningJob (values may be tokens)
    quota_name: str  # of the first (preferred) instance candidate
    quota_needed: int  # max_parallel_jobs x instance_count
    parameter_name: str  # SSM parameter that records the best model


def tuning_pipeline(inputs: TuningPipelineInputs, settings: PipelineSettings) -> dict[str, Any]:
    name = inputs.request["HyperParameterTuningJobName"]
    states = _quota_states(inputs, settings)
    states["Create tuning job"] = asl.task(
        "sagemaker:createHyperParameterTuningJob",
        inputs.request,
        result_path="$.created",
        nxt="Wait",
        catch_=asl.catch("Create refused?"),
    )
    states["Create refused?"] = asl.choice(
        asl.when(asl.error_matches(IN_USE_PATTERNS), "Describe"),  # this spec's search already exists
        asl.when(asl.error_matches(CAPACITY_PATTERNS), "Notify create failed"),
        default="Notify create failed",
    )
    status = "$.tuning.Status"
    best_job = asl.all_of(
        asl.string_equals(status, "Completed"),
        asl.is_present("$.tuning.Detail.BestTrainingJob.TrainingJobName"),
    )
    states.update(
        asl.poll(
            asl.PollStates("Wait", "Describe", "Status?"),
            asl.Describe(
                "sagemaker:describeHyperParameterTuningJob",
                {"HyperParameterTuningJobName": name},
                result_path="$.tuning",
                result_selector={"Status.$": "$.HyperParameterTuningJobStatus", "Detail.$": "$"},
            ),
            status_path=status,
            seconds=settings.poll_seconds,
            before_done=(asl.when(best_job, "Best model"),),
            done="No best job",  # completed, and every trial failed
            failed="Notify tuning failed",
            stopped="Notify tuning stopped",
        )
    )
    states["No best job"] = asl.fail(
        "NoBestTrainingJob",
        cause="The tuning job completed without a best training job: every trial failed.",
    )
    states.update(_best_model_states(inputs))
    states["Notify succeeded"] = notify_outcome(settings, "succeeded", "$.best.TrainingJobName", "Succeeded")
    states["Succeeded"] = {"Type": "Pass", "InputPath": "$.best", "End": True}
    states["Notify tuning failed"] = notify_outcome(settings, "failed", None, "Tuning failed")
    states["Tuning failed"] = asl.fail(
        "TuningJobFailed",
        cause="The tuning job failed; see DescribeHyperParameterTuningJob's FailureReason.",
    )
    states["Notify tuning stopped"] = notify_outcome(
        settings, "was stopped", None, "Tuning stopped", kind="Tuning"
    )
    states["Tuning stopped"] = asl.fail("TuningJobStopped", cause="The tuning job was stopped.")
    states["Notify create failed"] = notify_outcome(settings, "was refused", None, "Create failed")
    states["Create failed"] = asl.fail_with_caught_error()
    return {"Comment": f"sagestack tuning pipeline for '{inputs.key}'", "StartAt": "Quota", "States": states}


def _quota_states(inputs: TuningPipelineInputs, settings: PipelineSettings) -> dict[str, Any]:
    """Enough quota for every parallel trial, or fail saying how to ask for more."""
    states: dict[str, Any] = {}
    code = (settings.quota_codes or {}).get(inputs.quota_name)
    states.update(
        asl.quota_check(
            "Quota",
            inputs.quota_name,
            code,
            needed=inputs.quota_needed,
            result_path="$.quota",
            next_checked="Quota enough?",
            next_unchecked="Create tuning job",
        )
    )
    states["Quota enough?"] = asl.quota_enough(
        "$.quota", inputs.quota_needed, short="Quota too low", enough="Create tuning job"
    )
    how = (
        f"`aws service-quotas request-service-quota-increase --service-code sagemaker --quota-code {code} "
        f"--desired-value {inputs.quota_needed}`"
        if code
        else "the Service Quotas console (or `sagestack quota snapshot`, then the CLI command it prints)"
    )
    states["Quota too low"] = asl.fail(
        "QuotaTooLow",
        cause=f"'{inputs.quota_name}' must allow {inputs.quota_needed} instances (max_parallel_jobs x "
        f"instance_count); lower max_parallel_jobs or ask for an increase with {how}",
    )
    return states


def _best_model_states(inputs: TuningPipelineInputs) -> dict[str, Any]:
    """Record the best training job and where its model lies (SSM and the execution's output)."""
    name = inputs.request["HyperParameterTuningJobName"]
    output_path = inputs.request["TrainingJobDefinition"]["OutputDataConfig"]["S3OutputPath"]
    states: dict[str, Any] = {}
    states["Best model"] = {
        "Type": "Pass",
        "Comment": "SageMaker writes a job's model to <S3OutputPath><job name>/output/model.tar.gz",
        "Parameters": {
            "TuningJobName": name,
            "TrainingJobName.$": "$.tuning.Detail.BestTrainingJob.TrainingJobName",
            "Objective.$": "$.tuning.Detail.BestTrainingJob.FinalHyperParameterTuningJobObjectiveMetric",
            "ModelArtifacts.$": f"States.Format('{output_path}{{}}/output/model.tar.gz', "
            "$.tuning.Detail.BestTrainingJob.TrainingJobName)",
            "TrainingImage.$": "$.tuning.Detail.TrainingJobDefinition.AlgorithmSpecification.TrainingImage",
        },
        "ResultPath": "$.best",
        "Next": "Record best model",
    }
    states["Record best model"] = asl.task(
        "ssm:putParameter",
        {
            "Name": inputs.parameter_name,
            "Type": "String",
            "Overwrite": True,
            "Value.$": "States.JsonToString($.best)",
        },
        result_path="$.recorded",
        nxt="Notify succeeded",
    )
    return states
