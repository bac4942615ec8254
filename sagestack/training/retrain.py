"""A second way into a training pipeline: retraining. Started with `{"retrain": …}` in its input
(the job's EventBridge Scheduler schedule, or `sagestack run JOB --retrain`), the pipeline trains
again under fresh names instead of following the job its content hash already names.

A job's name is its content address: a pipeline started twice with the same spec follows the job it
already ran. Retraining on new data needs a new job, a new checkpoint prefix (resuming the last
run's final checkpoint would end at once) and a new TensorBoard prefix. This rewrites a finished
definition: each static training-job name, the job-name hyperparameter and those prefixes become
values of the run, chosen by one Choice at the start:
  spec run:  the names of the spec, as before (an unchanged spec still never trains twice);
  retrain:   '<name cut to 54>-<8 hex>' and '<prefix><8 hex>/', the hex from States.UUID().
Everything after training reads names from the job's Describe answer, so it needs no change.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sagestack.core import states as asl

RETRAIN_INPUT = "$.retrain"
START = "Retrain?"
SPEC_NAMES = "Names of the spec"
RETRAIN_ID = "Retrain id"
RETRAIN_NAMES = "Names of the retrain"
SUFFIX_LENGTH = 8  # the first group of a UUID
NAME_MAX = 63  # TrainingJobName
# Where a CreateTrainingJob request names things by content hash; the value kind of each.
_DYNAMIC_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("TrainingJobName",), "name"),
    (("HyperParameters", "sagemaker_job_name"), "json-name"),
    (("CheckpointConfig", "S3Uri"), "prefix"),
    (("TensorBoardOutputConfig", "S3OutputPath"), "prefix"),
    (("MlflowConfig", "MlflowRunName"), "name"),
)


def _training_body(params: Any) -> bool:
    """A CreateTrainingJob body held by a Pass state (the payload a queue submits)."""
    return isinstance(params, dict) and "TrainingJobName" in params and "AlgorithmSpecification" in params


def retrainable(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition with the retrain path (a new dict; the input is not changed)."""
    out = copy.deepcopy(definition)
    states: dict[str, Any] = out["States"]
    slots: dict[tuple[str, str], str] = {}  # (kind, static value) -> slot key under $.run

    def slot(kind: str, value: str) -> str:
        return slots.setdefault((kind, value), f"{kind.replace('-', '_')}_{len(slots) + 1}")

    for state in states.values():
        params = state.get("Parameters")
        if state.get("Type") == "Pass" and _training_body(params):
            resource = "sagemaker:createTrainingJob"  # a queued job's payload (training/states_queue.py)
        elif state.get("Type") != "Task":
            continue
        else:
            resource = str(state.get("Resource", ""))
        if resource.endswith("sagemaker:createTrainingJob"):
            for path, kind in _DYNAMIC_FIELDS:
                node = params
                for part in path[:-1]:
                    node = node.get(part) if isinstance(node, dict) else None
                if isinstance(node, dict) and isinstance(node.get(path[-1]), str):
                    value = node[path[-1]]
                    static = json.loads(value) if kind == "json-name" else value
                    asl.dynamic(params, path, f"$.run.{slot(kind, static)}")
        elif resource.endswith("sagemaker:describeTrainingJob") and isinstance(
            params.get("TrainingJobName"), str
        ):
            asl.dynamic(params, ("TrainingJobName",), f"$.run.{slot('name', params['TrainingJobName'])}")
    if not slots:
        raise ValueError("retrainable: the definition creates no training job")

    spec_names: dict[str, Any] = {}
    bases: dict[str, Any] = {}
    formats: dict[str, str] = {}
    for (kind, value), key in slots.items():
        if kind == "prefix":
            spec_names[key] = value
            bases[key] = value
            formats[f"{key}.$"] = f"States.Format('{{}}{{}}/', $.run_id.base.{key}, $.run_id.suffix)"
            continue
        base = value[: NAME_MAX - SUFFIX_LENGTH - 1].rstrip("-")
        bases[key] = base
        if kind == "name":
            spec_names[key] = value
            formats[f"{key}.$"] = f"States.Format('{{}}-{{}}', $.run_id.base.{key}, $.run_id.suffix)"
        else:  # the hyperparameter: the name JSON-encoded, as the SDK sends every value
            spec_names[key] = json.dumps(value)
            formats[f"{key}.$"] = f"States.Format('\"{{}}-{{}}\"', $.run_id.base.{key}, $.run_id.suffix)"

    first = out["StartAt"]
    states[START] = asl.choice(asl.when(asl.is_present(RETRAIN_INPUT), RETRAIN_ID), default=SPEC_NAMES)
    states[SPEC_NAMES] = {
        "Type": "Pass",
        "Comment": "a run of the spec: its content-addressed names (a job that exists is followed)",
        "Result": spec_names,
        "ResultPath": "$.run",
        "Next": first,
    }
    states[RETRAIN_ID] = {
        "Type": "Pass",
        "Comment": "a retrain: a fresh suffix for every name and prefix",
        "Parameters": {
            "suffix.$": "States.ArrayGetItem(States.StringSplit(States.UUID(), '-'), 0)",
            "base": bases,
        },
        "ResultPath": "$.run_id",
        "Next": RETRAIN_NAMES,
    }
    states[RETRAIN_NAMES] = {"Type": "Pass", "Parameters": formats, "ResultPath": "$.run", "Next": first}
    out["StartAt"] = START
    out["Comment"] = out["Comment"] + '; retrains on {"retrain": …}'
    return out


def retrain_input(scheduled: bool) -> dict[str, Any]:
    """What starts a retrain: from a schedule, Scheduler's own context attributes (filled in at
    each invocation); by hand, a marker."""
    if scheduled:
        return {
            "retrain": {
                "by": "schedule",
                "scheduled_time": "<aws.scheduler.scheduled-time>",
                "execution_id": "<aws.scheduler.execution-id>",
            }
        }
    return {"retrain": {"by": "sagestack run --retrain"}}
