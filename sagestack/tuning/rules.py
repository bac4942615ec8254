"""Rules about tuning jobs: the objective, the ranges and the budget must make sense before
200 trials are paid for."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.training.hp_names import EPOCHS, as_int, key_named
from sagestack.tuning.request import grid_size


@rule(
    "tuning-objective-metric",
    "error",
    "the objective is one of the tuned job's metric_definitions",
    why=(
        "The tuner optimizes a metric the trials log; one not in "
        "metric_definitions is never recorded and every trial fails to report."
    ),
    fix="Name a metric of the job's metric_definitions as objective.metric.",
)
def tuning_objective_metric(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        job = ctx.spec.jobs.get(t.job)
        if job is None:
            continue  # tuning-job-reference reports it
        if t.objective.metric not in job.metric_definitions:
            defined = list(job.metric_definitions)
            yield Finding(
                ("tuning", name, "objective", "metric"),
                f"metric '{t.objective.metric}' is not in job '{t.job}' metric_definitions"
                f"{did_you_mean(t.objective.metric, defined)} (defined: {', '.join(defined) or 'none'}); "
                "SageMaker reads the objective from the job's log with that regex",
            )


@rule(
    "tuning-range-bounds",
    "error",
    "each range's minimum is below its maximum; logarithmic scales stay positive",
    why=(
        "SageMaker refuses a range whose minimum is not below its "
        "maximum, and a logarithmic scale needs positive values."
    ),
    fix="Order the bounds; use Linear scaling for ranges that reach 0 or below.",
)
def tuning_range_bounds(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        for param, r in t.ranges.items():
            path = ("tuning", name, "ranges", param)
            bounds = r.continuous or r.integer
            if bounds is None:
                if r.scaling != "Auto":
                    yield Finding(
                        path, f"scaling {r.scaling} applies to continuous and integer ranges, not categorical"
                    )
                continue
            low, high = bounds
            if not low < high:
                yield Finding(path, f"minimum {low} is not below maximum {high}")
            if r.scaling == "Logarithmic" and low <= 0:
                yield Finding(path, f"logarithmic scaling needs a minimum above 0, got {low}")
            if r.scaling == "ReverseLogarithmic" and (r.integer is not None or not 0 <= low < high < 1):
                yield Finding(path, "reverse-logarithmic scaling needs a continuous range within [0, 1)")


@rule(
    "tuning-static-overlap",
    "error",
    "a tuned hyperparameter is not also static, nor a sagemaker_ key",
    why=(
        "A tuned hyperparameter that is also static (or a sagemaker_* "
        "key) is rejected by CreateHyperParameterTuningJob."
    ),
    fix="Remove it from static_hyperparameters (or from the job's hyperparameters when tuned).",
)
def tuning_static_overlap(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        for param in t.ranges:
            if param in t.static_hyperparameters:
                yield Finding(
                    ("tuning", name, "static_hyperparameters", param),
                    f"'{param}' is tuned (ranges:) and static at once; keep one",
                )
            if param.startswith("sagemaker_"):
                yield Finding(
                    ("tuning", name, "ranges", param),
                    "sagemaker_ keys belong to the container, not the search",
                )


@rule(
    "tuning-grid-categorical",
    "error",
    "Grid search takes categorical ranges only; its job count follows from them",
    why=(
        "Grid search enumerates categorical values only; it refuses "
        "continuous and integer ranges and computes its own job count."
    ),
    fix="Make every range categorical, or choose Bayesian/Random.",
)
def tuning_grid_categorical(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        if t.strategy != "Grid":
            continue
        for param, r in t.ranges.items():
            if r.categorical is None:
                yield Finding(
                    ("tuning", name, "ranges", param),
                    "Grid search needs categorical ranges; list the values to try (categorical: [...])",
                )
        if t.max_jobs is not None and t.max_jobs != grid_size(t):
            yield Finding(
                ("tuning", name, "max_jobs"),
                f"Grid search runs every combination, {grid_size(t)} jobs; drop max_jobs or set it to that",
            )


@rule(
    "tuning-hyperband",
    "error",
    "Hyperband has its resource bounds, reported per epoch, and no other early stopping",
    why=(
        "Hyperband stops trials by resource (epochs) itself; it needs min/max resource, "
        "the script must report the metric per epoch, and other early stopping is refused."
    ),
    fix="Set hyperband: {min_resource, max_resource}, early_stopping: Off, and log the metric every epoch.",
)
def tuning_hyperband(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        if t.strategy != "Hyperband":
            if t.hyperband is not None:
                yield Finding(
                    ("tuning", name, "hyperband"),
                    f"hyperband settings apply only to strategy Hyperband, not {t.strategy}",
                )
            continue
        if t.hyperband is None:
            yield Finding(
                ("tuning", name), "Hyperband needs hyperband: {min_resource: N, max_resource: M} (in epochs)"
            )
            continue
        if t.hyperband.min_resource >= t.hyperband.max_resource:
            yield Finding(("tuning", name, "hyperband"), "min_resource must be below max_resource")
        if t.early_stopping == "Auto":
            yield Finding(
                ("tuning", name, "early_stopping"), "Hyperband stops trials itself; set early_stopping: Off"
            )
        job = ctx.spec.jobs.get(t.job)
        epochs_key = key_named(job.hyperparameters, EPOCHS) if job else None
        epochs = as_int(job.hyperparameters[epochs_key]) if job and epochs_key else None
        if epochs is not None and epochs < t.hyperband.max_resource:
            yield Finding(
                ("tuning", name, "hyperband", "max_resource"),
                f"max_resource {t.hyperband.max_resource} exceeds the job's {epochs_key} ({epochs}): Hyperband needs the "
                "objective metric once per epoch, up to max_resource epochs",
            )


@rule(
    "tuning-budget",
    "error",
    "max_jobs is set (unless Grid) and max_parallel_jobs does not exceed it",
    why=(
        "MaxNumberOfTrainingJobs is required except for Grid, "
        "and MaxParallelTrainingJobs above it is refused."
    ),
    fix="Set max_jobs, and keep max_parallel_jobs <= max_jobs (and within your quota).",
)
def tuning_budget(ctx: RuleContext) -> Iterator[Finding]:
    for name, t in ctx.spec.tuning.items():
        if t.strategy != "Grid" and t.max_jobs is None:
            yield Finding(
                ("tuning", name), f"strategy {t.strategy} needs max_jobs (the number of trials to pay for)"
            )
            continue
        total = t.max_jobs or grid_size(t)
        if t.max_parallel_jobs > total:
            yield Finding(
                ("tuning", name, "max_parallel_jobs"),
                f"max_parallel_jobs ({t.max_parallel_jobs}) exceeds the {total} jobs of the search",
            )
