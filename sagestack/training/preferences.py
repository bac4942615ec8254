"""One job over every instance candidate (ResourceConfig.InstancePreferences: SageMaker launches the
first with capacity), when the candidates' requests differ in nothing else."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sagestack.core.names import Names
from sagestack.training.candidates import RenderedCandidate
from sagestack.training.models import JobSpec
from sagestack.training.request import encode_hyperparameter


@dataclass(frozen=True)
class PreferredJob:
    name: str
    request: dict[str, Any]  # every candidate as a preference; the pipeline sends the quota-filtered ones


PREFERENCES_MAX = 5  # ResourceConfig.InstancePreferences holds 1 to 5
# What may differ between candidates' requests on the preference path: the name, the instance type,
# and, for torch_distributed, the SDK's sagemaker_instance_type (the toolkit reads the running
# instance's type from resourceconfig.json, not from it). Anything else — MPI processes per host,
# SMDDP's instance type, EFA variables, a volume key on a type with instance storage — keeps the loop.
_RUNTIME_ADAPTED = ("sagemaker_job_name",)


def _comparable(job: JobSpec, request: dict[str, Any]) -> dict[str, Any]:
    r: dict[str, Any] = json.loads(json.dumps(request))
    r.pop("TrainingJobName", None)
    r.get("MlflowConfig", {}).pop("MlflowRunName", None)  # the job's name, as TrainingJobName
    r["ResourceConfig"].pop("InstanceType", None)
    r["ResourceConfig"].pop("TrainingPlanArn", None)  # carried per preference (TrainingPlanArns)
    hp = r.get("HyperParameters", {})
    for k in _RUNTIME_ADAPTED:
        hp.pop(k, None)
    if job.distribution is not None and job.distribution.kind == "torch_distributed":
        hp.pop("sagemaker_instance_type", None)
    return r


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [path]


def preference_refusal(job: JobSpec, candidates: list[RenderedCandidate]) -> str | None:
    """Why these candidates cannot be one job with InstancePreferences (None: they can)."""
    if len(candidates) < 2:
        return "one candidate"
    if len(candidates) > PREFERENCES_MAX:
        return f"{len(candidates)} candidates; InstancePreferences holds {PREFERENCES_MAX}"
    if job.use_spot_instances:
        return "managed spot training, which InstancePreferences does not support"
    first = _comparable(job, candidates[0].request)
    for c in candidates[1:]:
        diff = _differences(first, _comparable(job, c.request))
        if diff:
            fields = ", ".join(dict.fromkeys(d.rsplit(".", 1)[-1] for d in diff))
            return f"{candidates[0].instance_type} and {c.instance_type} differ in {fields}"
    return None


def preferred_job(names: Names, key: str, digest: str, candidates: list[RenderedCandidate]) -> PreferredJob:
    """The first candidate's request as one job over every candidate, in order of preference."""
    name = names.preference_job(key, digest)
    request = json.loads(json.dumps(candidates[0].request))
    request["TrainingJobName"] = name
    if "sagemaker_job_name" in request["HyperParameters"]:  # the toolkit's key (none under the drivers)
        request["HyperParameters"]["sagemaker_job_name"] = encode_hyperparameter(name)
    request["HyperParameters"].pop("sagemaker_instance_type", None)
    if "MlflowConfig" in request:
        request["MlflowConfig"]["MlflowRunName"] = name
    request.pop("EnableManagedSpotTraining", None)  # exclusive with InstancePreferences
    resources = request["ResourceConfig"]
    count = resources.pop("InstanceCount")
    resources.pop("InstanceType")
    resources.pop("TrainingPlanArn", None)
    resources["InstancePreferences"] = [preference(c, count) for c in candidates]
    return PreferredJob(name=name, request=request)


def preference(candidate: RenderedCandidate, count: int) -> dict[str, Any]:
    """One entry of InstancePreferences: the type, the count and the candidate's training plan."""
    entry: dict[str, Any] = {"InstanceType": candidate.instance_type, "InstanceCount": count}
    plan = candidate.request["ResourceConfig"].get("TrainingPlanArn")
    if plan:
        entry["TrainingPlanArns"] = [plan]
    return entry
