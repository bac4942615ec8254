"""The launch contract as one object: each contract's declared answers agree with the request it
renders, only training/launch_contract.py reads a job's `launcher:`, and the local run's request is
rendered by the environment's renderer (the same keys as `render`'s, the same drivers as the
launch files' the constructs upload)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sagestack.core.deployment import LOCAL_BUCKET
from sagestack.core.sourcedir import pack_source_dir
from sagestack.training.launch_contract import CONTRACTS, LaunchContract, launch_contract
from sagestack.training.models import JobSpec
from tests.conftest import MINIMAL, REPO
from tests.unit.test_drivers_request import TORCHRUN, plan

READS_LAUNCHER = re.compile(r"(?<!sagestack\.training)\.launcher\b|\[\s*[\"']launcher[\"']\s*\]")


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_each_contract_s_answers_agree_with_the_request_it_renders(name: str) -> None:
    job = {**TORCHRUN, "launcher": name}
    contract = launch_contract(JobSpec.model_validate({"image": "train", **job}))
    assert contract.name == name
    rendered = plan(job)
    request = rendered.candidates[0].request
    channels = {c["ChannelName"] for c in request.get("InputDataConfig", [])}
    starts_drivers = "ContainerEntrypoint" in request["AlgorithmSpecification"]
    assert contract.runs_sdk_drivers == starts_drivers == ({"code", "sm_drivers"} <= channels)
    assert contract.sends_sdk_keys == ("sagemaker_program" in request["HyperParameters"])
    assert contract.image_needs_toolkit == (not starts_drivers)
    assert contract.pipeline_resources == int(contract.runs_sdk_drivers)  # the launch files' upload
    assert ("CompressionType" in request["OutputDataConfig"]) == contract.runs_sdk_drivers
    assert ("drivers" in contract.identity()) == contract.runs_sdk_drivers
    # a tuning job's trials: the toolkit contract, rendered only where it is not the job's own
    trial = contract.trial_job(JobSpec.model_validate({"image": "train", **job}))
    assert (trial is None) == (rendered.toolkit_request is None)
    assert trial is None or launch_contract(trial).sends_sdk_keys


def test_only_the_contract_reads_a_job_s_launcher() -> None:
    readers = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "sagestack").rglob("*.py")
        if READS_LAUNCHER.search(path.read_text())
    )
    assert readers == ["sagestack/training/launch_contract.py"]
    assert READS_LAUNCHER.search('if job.launcher == "drivers":')  # what it would find


def test_the_default_is_the_toolkit_contract() -> None:
    job = JobSpec.model_validate({"image": "train", "instance_type": "ml.g5.xlarge"})
    assert type(launch_contract(job)) is LaunchContract


def _shape(request: dict[str, Any]) -> dict[str, Any]:
    """A request's keys and its hyperparameters' and algorithm's keys: what does not depend on values
    only a deployment knows (names, URIs, the hash)."""
    return {
        "keys": sorted(request),
        "algorithm": sorted(request["AlgorithmSpecification"]),
        "hyperparameters": sorted(request["HyperParameters"]),
        "channels": [c["ChannelName"] for c in request.get("InputDataConfig", [])],
    }


@pytest.mark.parametrize("launcher", sorted(CONTRACTS))
def test_the_local_request_is_the_render_with_local_values(project, launcher: str) -> None:  # type: ignore[no-untyped-def]
    from sagestack.local.training.job import local_training_request
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment

    project.spec(MINIMAL + f"    launcher: {launcher}\n    hyperparameters: {{epochs: 2}}\n").env("dev")
    loaded = project.load("dev")
    out = render_environment(resolve_environment(loaded), project.root)
    cloud = out.jobs["classifier"].candidates[0].request
    local = local_training_request(loaded, "classifier", {})
    assert _shape(local.request) == _shape(cloud)
    assert local.request["HyperParameters"]["epochs"] == cloud["HyperParameters"]["epochs"]
    assert local.deployment.bucket == LOCAL_BUCKET  # local values, not the stand-ins
    job = loaded.spec.jobs["classifier"]
    files = launch_contract(job).launch_files(job, pack_source_dir(project.root / "training_src"))
    assert local.drivers == (None if files is None else files.drivers.files)
    assert (files is None) == ("classifier" not in out.launch_files)
    # a tuning trial: the toolkit contract whatever the job's, and no drivers
    trial = local_training_request(loaded, "classifier", {}, tuning_objective="val_accuracy")
    assert "sagemaker_program" in trial.request["HyperParameters"] and trial.drivers is None
    assert trial.request["HyperParameters"]["_tuning_objective_metric"] == "val_accuracy"
