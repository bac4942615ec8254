"""Tuning rules, each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

BASE = (
    MINIMAL
    + """\
    hyperparameters: {epochs: 10, lr: 0.001}
    metric_definitions: {val_accuracy: 'val_accuracy=([0-9.]+)'}
tuning:
  search:
    job: classifier
"""
)


def tuning(body: str) -> str:
    return BASE + "".join(f"    {line}\n" for line in body.strip().splitlines())


OK = "objective: {metric: val_accuracy, type: Maximize}\nranges: {lr: {continuous: [0.0001, 0.1], scaling: Logarithmic}}\nmax_jobs: 8\nmax_parallel_jobs: 2"


def test_tuning_objective_metric(project):
    assert findings(project, "tuning-objective-metric", tuning(OK)) == []
    assert findings(
        project, "tuning-objective-metric", tuning(OK.replace("metric: val_accuracy", "metric: val_acc"))
    ) == [
        "tuning.search.objective.metric: metric 'val_acc' is not in job 'classifier' metric_definitions; did you "
        "mean 'val_accuracy'? (defined: val_accuracy); SageMaker reads the objective from the job's log with that regex"
    ]


def test_tuning_range_bounds(project):
    assert findings(project, "tuning-range-bounds", tuning(OK)) == []
    assert findings(project, "tuning-range-bounds", tuning(OK.replace("[0.0001, 0.1]", "[0.0, 0.1]"))) == [
        "tuning.search.ranges.lr: logarithmic scaling needs a minimum above 0, got 0.0"
    ]
    assert findings(project, "tuning-range-bounds", tuning(OK.replace("[0.0001, 0.1]", "[0.1, 0.01]"))) == [
        "tuning.search.ranges.lr: minimum 0.1 is not below maximum 0.01"
    ]


def test_tuning_static_overlap(project):
    assert (
        findings(project, "tuning-static-overlap", tuning(OK + "\nstatic_hyperparameters: {epochs: 3}")) == []
    )
    assert findings(
        project, "tuning-static-overlap", tuning(OK + "\nstatic_hyperparameters: {lr: 0.01}")
    ) == ["tuning.search.static_hyperparameters.lr: 'lr' is tuned (ranges:) and static at once; keep one"]


GRID = "objective: {metric: val_accuracy, type: Maximize}\nstrategy: Grid\nranges: {batch_size_per_device: {categorical: [32, 64, 128]}, optimizer: {categorical: [adam, sgd]}}"


def test_tuning_grid_categorical(project):
    assert findings(project, "tuning-grid-categorical", tuning(GRID)) == []
    assert findings(project, "tuning-grid-categorical", tuning(GRID + "\nmax_jobs: 5")) == [
        "tuning.search.max_jobs: Grid search runs every combination, 6 jobs; drop max_jobs or set it to that"
    ]
    continuous = tuning(GRID.replace("{categorical: [adam, sgd]}", "{continuous: [0.1, 0.9]}"))
    assert findings(project, "tuning-grid-categorical", continuous) == [
        "tuning.search.ranges.optimizer: Grid search needs categorical ranges; list the values to try (categorical: [...])"
    ]


HYPERBAND = OK + "\nstrategy: Hyperband\nhyperband: {min_resource: 1, max_resource: 10}"


def test_tuning_hyperband(project):
    assert findings(project, "tuning-hyperband", tuning(HYPERBAND)) == []
    assert findings(
        project, "tuning-hyperband", tuning(HYPERBAND.replace("max_resource: 10", "max_resource: 20"))
    ) == [
        "tuning.search.hyperband.max_resource: max_resource 20 exceeds the job's epochs (10): Hyperband needs the "
        "objective metric once per epoch, up to max_resource epochs"
    ]
    # the epochs in the spelling the job uses (Hugging Face's num_train_epochs, the examples' num-epochs)
    for key in ("num_train_epochs", "num-epochs"):
        spelt = tuning(HYPERBAND.replace("max_resource: 10", "max_resource: 20")).replace(
            "epochs:", f"{key}:"
        )
        assert findings(project, "tuning-hyperband", spelt) == [
            f"tuning.search.hyperband.max_resource: max_resource 20 exceeds the job's {key} (10): Hyperband "
            "needs the objective metric once per epoch, up to max_resource epochs"
        ], key
    assert findings(project, "tuning-hyperband", tuning(OK + "\nstrategy: Hyperband")) == [
        "tuning.search: Hyperband needs hyperband: {min_resource: N, max_resource: M} (in epochs)"
    ]
    assert findings(project, "tuning-hyperband", tuning(HYPERBAND + "\nearly_stopping: Auto")) == [
        "tuning.search.early_stopping: Hyperband stops trials itself; set early_stopping: Off"
    ]


def test_tuning_budget(project):
    assert findings(project, "tuning-budget", tuning(OK)) == []
    assert findings(
        project, "tuning-budget", tuning(OK.replace("max_parallel_jobs: 2", "max_parallel_jobs: 9"))
    ) == ["tuning.search.max_parallel_jobs: max_parallel_jobs (9) exceeds the 8 jobs of the search"]
    assert findings(project, "tuning-budget", tuning(OK.replace("max_jobs: 8\n", ""))) == [
        "tuning.search: strategy Bayesian needs max_jobs (the number of trials to pay for)"
    ]
