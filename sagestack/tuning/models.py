"""The spec of a hyperparameter search (`tuning:`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sagestack.core.model import StrictModel, exactly_one
from sagestack.core.types import (
    HyperparameterValue,
    Seconds,
)


class ObjectiveSpec(StrictModel):
    metric: str
    type: Literal["Maximize", "Minimize"]


class RangeSpec(StrictModel):
    continuous: tuple[float, float] | None = None
    integer: tuple[int, int] | None = None
    categorical: list[str | int | float] | None = Field(default=None, min_length=1, max_length=30)
    scaling: Literal["Auto", "Linear", "Logarithmic", "ReverseLogarithmic"] = "Auto"

    @model_validator(mode="after")
    def _one_kind(self) -> RangeSpec:
        exactly_one(self, ("continuous", "integer", "categorical"), "a range")
        return self


class HyperbandSpec(StrictModel):
    min_resource: int = Field(ge=1)
    max_resource: int = Field(ge=1)


class CompletionSpec(StrictModel):
    target_objective_value: float | None = None
    max_jobs_not_improving: int | None = Field(default=None, ge=3)
    max_runtime: Seconds | None = None


class WarmStartSpec(StrictModel):
    parents: list[str] = Field(min_length=1, max_length=5)
    type: Literal["IdenticalDataAndAlgorithm", "TransferLearning"] = "IdenticalDataAndAlgorithm"


class TuningSpec(StrictModel):
    job: str = Field(description="a key of jobs:")
    objective: ObjectiveSpec
    strategy: Literal["Bayesian", "Random", "Hyperband", "Grid"] = "Bayesian"
    ranges: dict[str, RangeSpec] = Field(min_length=1)
    max_jobs: int | None = Field(
        default=None, ge=1, description="default: Grid's combinations, else required"
    )
    max_parallel_jobs: int = Field(default=1, ge=1)
    early_stopping: Literal["Off", "Auto"] = "Off"
    hyperband: HyperbandSpec | None = None
    completion: CompletionSpec | None = None
    random_seed: int | None = None
    warm_start: WarmStartSpec | None = None
    static_hyperparameters: dict[str, HyperparameterValue] = Field(default_factory=dict)
