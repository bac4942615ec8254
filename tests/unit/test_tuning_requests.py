"""Rendered CreateHyperParameterTuningJob requests: a golden file per strategy, each validated
against botocore's SageMaker model, and the details that must be right."""

from __future__ import annotations

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.training.models import JobSpec
from sagestack.training.rendered import resolve_training_job
from sagestack.tuning.models import TuningSpec
from sagestack.tuning.request import grid_points, render_tuning_request
from tests.unit.test_training_requests import GPU, context

JOB = {
    "image": "train",
    "instance_type": ["ml.g5.2xlarge", "ml.g4dn.2xlarge"],
    "use_spot_instances": True,
    "max_run": "2h",
    "max_wait": "4h",
    "checkpoint": {"every_steps": 100},
    "hyperparameters": {"epochs": 10, "lr": 0.001, "batch_size_per_device": 64},
    "metric_definitions": {"val_accuracy": "val_accuracy=([0-9.]+)", "train_loss": "train_loss=([0-9.]+)"},
}
OBJECTIVE = {"metric": "val_accuracy", "type": "Maximize"}
CASES = {
    "bayesian": {
        "strategy": "Bayesian",
        "max_jobs": 20,
        "max_parallel_jobs": 4,
        "early_stopping": "Auto",
        "ranges": {
            "lr": {"continuous": [1e-4, 1e-1], "scaling": "Logarithmic"},
            "batch_size_per_device": {"categorical": [32, 64, 128]},
        },
        "completion": {"target_objective_value": 0.99, "max_jobs_not_improving": 5, "max_runtime": "6h"},
        "warm_start": {"parents": ["digits-lr-search-0a1b2c3d"], "type": "TransferLearning"},
    },
    "random": {
        "strategy": "Random",
        "max_jobs": 10,
        "max_parallel_jobs": 2,
        "random_seed": 7,
        "ranges": {
            "lr": {"continuous": [1e-4, 1e-1], "scaling": "Logarithmic"},
            "grad_accum_steps": {"integer": [1, 8]},
        },
        "static_hyperparameters": {"warmup_steps": 0},
    },
    "hyperband": {
        "strategy": "Hyperband",
        "max_jobs": 30,
        "max_parallel_jobs": 6,
        "hyperband": {"min_resource": 1, "max_resource": 10},
        "ranges": {"lr": {"continuous": [1e-4, 1e-1], "scaling": "Logarithmic"}},
    },
    "grid": {
        "strategy": "Grid",
        "max_parallel_jobs": 3,
        "ranges": {
            "batch_size_per_device": {"categorical": [32, 64, 128]},
            "optimizer": {"categorical": ["adam", "sgd"]},
        },
    },
}


def _job_plan(body=JOB):
    return resolve_training_job(
        names=Names("digits", "prod"),
        key="classifier",
        job=JobSpec.model_validate(body),
        source_sha256="0" * 64,
        image_uris={},
        context=context(GPU),
    )


def _render(case: str) -> dict:
    tuning = TuningSpec.model_validate({"job": "classifier", "objective": OBJECTIVE, **CASES[case]})
    request = render_tuning_request(
        tuning, key="lr-search", names=Names("digits", "prod"), job_plan=_job_plan()
    )
    validate_request("CreateHyperParameterTuningJob", request)
    return request


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_tuning_request(case, snapshot):
    assert _render(case) == snapshot.use_extension(JSONSnapshotExtension)


def test_tuned_hyperparameters_leave_the_static_ones_and_the_candidates_stay_prioritized():
    request = _render("bayesian")
    definition = request["TrainingJobDefinition"]
    static = definition["StaticHyperParameters"]
    assert "lr" not in static and "batch_size_per_device" not in static and static["epochs"] == "10"
    assert static["sagemaker_program"] == '"train.py"'
    assert definition["HyperParameterTuningResourceConfig"]["AllocationStrategy"] == "Prioritized"
    assert [
        c["InstanceType"] for c in definition["HyperParameterTuningResourceConfig"]["InstanceConfigs"]
    ] == ["ml.g5.2xlarge", "ml.g4dn.2xlarge"]
    assert definition["EnableManagedSpotTraining"] is True and "CheckpointConfig" in definition
    ranges = request["HyperParameterTuningJobConfig"]["ParameterRanges"]
    assert ranges["ContinuousParameterRanges"] == [
        {"Name": "lr", "MinValue": "0.0001", "MaxValue": "0.1", "ScalingType": "Logarithmic"}
    ]
    assert ranges["CategoricalParameterRanges"] == [
        {"Name": "batch_size_per_device", "Values": ["32", "64", "128"]}
    ]


def test_grid_has_no_job_count_and_enumerates_every_combination():
    request = _render("grid")
    assert "MaxNumberOfTrainingJobs" not in request["HyperParameterTuningJobConfig"]["ResourceLimits"]
    tuning = TuningSpec.model_validate({"job": "classifier", "objective": OBJECTIVE, **CASES["grid"]})
    points = grid_points(tuning)
    assert len(points) == 6 and points[0] == {"batch_size_per_device": 32, "optimizer": "adam"}


def test_hyperband_gets_its_strategy_config_and_no_early_stopping_type():
    config = _render("hyperband")["HyperParameterTuningJobConfig"]
    assert config["StrategyConfig"] == {"HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 10}}
    assert "TrainingJobEarlyStoppingType" not in config


def test_tuning_job_names_fit_32_characters():
    request = _render("random")
    assert len(request["HyperParameterTuningJobName"]) <= 32
    long = render_tuning_request(
        TuningSpec.model_validate({"job": "c", "objective": OBJECTIVE, **CASES["random"]}),
        key="a-very-long-tuning-entry-name",
        names=Names("a-long-project-name", "prod"),
        job_plan=_job_plan(),
    )
    assert len(long["HyperParameterTuningJobName"]) == 32


def _spec(case: str, **changes) -> TuningSpec:
    return TuningSpec.model_validate({"job": "classifier", "objective": OBJECTIVE, **CASES[case], **changes})


def test_a_search_over_one_candidate_sends_its_resource_config_as_it_is():
    plan = _job_plan({**JOB, "instance_type": ["ml.p3.2xlarge"]})
    request = render_tuning_request(_spec("random"), key="s", names=Names("digits", "prod"), job_plan=plan)
    definition = request["TrainingJobDefinition"]
    assert definition["ResourceConfig"] == plan.candidates[0].request["ResourceConfig"]
    assert "HyperParameterTuningResourceConfig" not in definition
    validate_request("CreateHyperParameterTuningJob", request)


def test_the_first_candidates_volume_key_goes_to_every_instance_config():
    # ml.p3.2xlarge has no NVMe storage (its volume takes the key); ml.p4d.24xlarge has (it refuses one)
    for order, keyed in (
        (["ml.p3.2xlarge", "ml.p4d.24xlarge"], True),
        (["ml.p4d.24xlarge", "ml.p3.2xlarge"], False),
    ):
        plan = _job_plan({**JOB, "instance_type": order})
        request = render_tuning_request(
            _spec("random"), key="s", names=Names("digits", "prod"), job_plan=plan
        )
        config = request["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"]
        assert ("VolumeKmsKeyId" in config) is keyed
        if keyed:
            assert config["VolumeKmsKeyId"] == plan.candidates[0].request["ResourceConfig"]["VolumeKmsKeyId"]
        validate_request("CreateHyperParameterTuningJob", request)


def test_the_number_of_trials_grid_derives_and_the_others_need():
    from sagestack.tuning.request import grid_size, max_jobs

    grid = _spec("grid")
    assert grid_size(grid) == 6 and max_jobs(grid) == 6
    assert max_jobs(_spec("grid", max_jobs=4)) == 4  # the spec's own count, when it gives one
    one = _spec("grid", ranges={"optimizer": {"categorical": ["adam"]}})
    assert grid_size(one) == 1 and max_jobs(one) == 1
    assert max_jobs(_spec("random")) == 10
    with pytest.raises(ValueError, match=r"^max_jobs is required unless the strategy is Grid$"):
        max_jobs(_spec("random", max_jobs=None))


def test_only_hyperband_sends_a_strategy_config():
    # (the tuning-hyperband rule refuses hyperband: under another strategy; the renderer sends none either way)
    request = render_tuning_request(
        _spec("bayesian", hyperband={"min_resource": 1, "max_resource": 10}),
        key="s",
        names=Names("digits", "prod"),
        job_plan=_job_plan(),
    )
    assert "StrategyConfig" not in request["HyperParameterTuningJobConfig"]
