"""Spec -> CreateHyperParameterTuningJob request.

The training job definition is the tuned job's own rendered CreateTrainingJob request (spot,
checkpoints, distribution keys, channels, VPC …), with its instance candidates as a prioritized
HyperParameterTuningResourceConfig and the tuned hyperparameters taken out of the static ones.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from sagestack.core.identity import Registry, content_hash, identity, published
from sagestack.core.names import Names
from sagestack.training.rendered import RenderedJob
from sagestack.training.request import encode_hyperparameter
from sagestack.tuning import models as m
from sagestack.tuning.models import RangeSpec, TuningSpec

# A search's fields when tuning job names were published (core.identity): a field added since
# enters the name's hash only when a spec sets it.
PUBLISHED: Registry = {
    m.TuningSpec: published(
        "job",
        "objective",
        "strategy",
        "ranges",
        "max_jobs",
        "max_parallel_jobs",
        "early_stopping",
        "hyperband",
        "completion",
        "random_seed",
        "warm_start",
        "static_hyperparameters",
    ),
    m.ObjectiveSpec: published("metric", "type"),
    m.RangeSpec: published("continuous", "integer", "categorical", "scaling"),
    m.HyperbandSpec: published("min_resource", "max_resource"),
    m.CompletionSpec: published("target_objective_value", "max_jobs_not_improving", "max_runtime"),
    m.WarmStartSpec: published("parents", "type"),
}

# CreateTrainingJob keys a HyperParameterTrainingJobDefinition takes as they are.
_DEFINITION_KEYS = (
    "RoleArn",
    "InputDataConfig",
    "VpcConfig",
    "OutputDataConfig",
    "StoppingCondition",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "CheckpointConfig",
    "RetryStrategy",
    "Environment",
)


def grid_size(tuning: TuningSpec) -> int:
    """Grid search runs every combination of the categorical values."""
    sizes = [len(r.categorical or []) for r in tuning.ranges.values()]
    return max(1, math.prod(sizes))


def max_jobs(tuning: TuningSpec) -> int:
    if tuning.strategy == "Grid":
        return tuning.max_jobs or grid_size(tuning)
    if tuning.max_jobs is None:
        raise ValueError("max_jobs is required unless the strategy is Grid")
    return tuning.max_jobs


def parameter_ranges(ranges: dict[str, RangeSpec]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name, r in sorted(ranges.items()):
        if r.continuous is not None:
            out.setdefault("ContinuousParameterRanges", []).append(
                {
                    "Name": name,
                    "MinValue": repr(float(r.continuous[0])),
                    "MaxValue": repr(float(r.continuous[1])),
                    "ScalingType": r.scaling,
                }
            )
        elif r.integer is not None:
            out.setdefault("IntegerParameterRanges", []).append(
                {
                    "Name": name,
                    "MinValue": str(r.integer[0]),
                    "MaxValue": str(r.integer[1]),
                    "ScalingType": r.scaling,
                }
            )
        else:
            assert r.categorical is not None
            out.setdefault("CategoricalParameterRanges", []).append(
                {
                    "Name": name,
                    "Values": [v if isinstance(v, str) else encode_hyperparameter(v) for v in r.categorical],
                }
            )
    return out


def grid_points(tuning: TuningSpec) -> list[dict[str, Any]]:
    """Every combination of a Grid search, in a fixed order (for local runs)."""
    names = sorted(tuning.ranges)
    values = [tuning.ranges[n].categorical or [] for n in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def render_tuning_request(
    tuning: TuningSpec, *, key: str, names: Names, job_plan: RenderedJob, parents: list[str] | None = None
) -> dict[str, Any]:
    """A complete CreateHyperParameterTuningJob request. Unset options are omitted."""
    base = job_plan.tuning_base
    digest = content_hash({"tuning": identity(tuning, PUBLISHED), "job": job_plan.digest})[:10]
    name = names.tuning_job(key, digest)
    static = {k: v for k, v in base["HyperParameters"].items() if k not in tuning.ranges}
    static.update({k: encode_hyperparameter(v) for k, v in tuning.static_hyperparameters.items()})
    static["sagemaker_job_name"] = encode_hyperparameter(name)  # trials are named by the tuning job
    algorithm = {
        k: base["AlgorithmSpecification"][k]
        for k in ("TrainingImage", "TrainingInputMode", "MetricDefinitions")
        if k in base["AlgorithmSpecification"]
    }
    definition: dict[str, Any] = {
        "StaticHyperParameters": static,
        "AlgorithmSpecification": algorithm,
        **{k: base[k] for k in _DEFINITION_KEYS if k in base},
    }
    resource = base["ResourceConfig"]
    if len(job_plan.candidates) == 1:
        definition["ResourceConfig"] = resource
    else:
        definition["HyperParameterTuningResourceConfig"] = {
            "AllocationStrategy": "Prioritized",  # the spec's order of preference
            "InstanceConfigs": [
                {
                    "InstanceType": c.instance_type,
                    "InstanceCount": resource["InstanceCount"],
                    "VolumeSizeInGB": resource["VolumeSizeInGB"],
                }
                for c in job_plan.candidates
            ],
        }
        if "VolumeKmsKeyId" in resource:
            definition["HyperParameterTuningResourceConfig"]["VolumeKmsKeyId"] = resource["VolumeKmsKeyId"]

    limits: dict[str, Any] = {"MaxParallelTrainingJobs": tuning.max_parallel_jobs}
    if tuning.strategy != "Grid":  # Grid runs every combination; SageMaker derives the count
        limits["MaxNumberOfTrainingJobs"] = max_jobs(tuning)
    config: dict[str, Any] = {
        "Strategy": tuning.strategy,
        "HyperParameterTuningJobObjective": {
            "Type": tuning.objective.type,
            "MetricName": tuning.objective.metric,
        },
        "ResourceLimits": limits,
        "ParameterRanges": parameter_ranges(tuning.ranges),
    }
    if tuning.strategy != "Hyperband":  # Hyperband stops trials itself; SageMaker refuses both
        config["TrainingJobEarlyStoppingType"] = tuning.early_stopping
    if tuning.strategy == "Hyperband" and tuning.hyperband is not None:
        config["StrategyConfig"] = {
            "HyperbandStrategyConfig": {
                "MinResource": tuning.hyperband.min_resource,
                "MaxResource": tuning.hyperband.max_resource,
            }
        }
    if tuning.random_seed is not None:
        config["RandomSeed"] = tuning.random_seed
    if tuning.completion is not None:
        criteria: dict[str, Any] = {}
        if tuning.completion.target_objective_value is not None:
            criteria["TargetObjectiveMetricValue"] = tuning.completion.target_objective_value
        if tuning.completion.max_jobs_not_improving is not None:
            criteria["BestObjectiveNotImproving"] = {
                "MaxNumberOfTrainingJobsNotImproving": tuning.completion.max_jobs_not_improving
            }
        if tuning.completion.max_runtime is not None:
            limits["MaxRuntimeInSeconds"] = tuning.completion.max_runtime
        if criteria:
            config["TuningJobCompletionCriteria"] = criteria
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobConfig": config,
        "TrainingJobDefinition": definition,
        "Tags": [t for t in base.get("Tags", []) if t["Key"] != "sagestack:spec-hash"]
        + [{"Key": "sagestack:tuning", "Value": key}, {"Key": "sagestack:spec-hash", "Value": digest}],
    }
    if tuning.warm_start is not None:
        request["WarmStartConfig"] = {
            "ParentHyperParameterTuningJobs": [
                {"HyperParameterTuningJobName": p} for p in (parents or tuning.warm_start.parents)
            ],
            "WarmStartType": tuning.warm_start.type,
        }
    return request
