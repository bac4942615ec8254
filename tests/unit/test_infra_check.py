"""A training field end to end, the recipe's proof: `enable_infra_check` (CreateTrainingJob's
InfraCheckConfig) from the spec into every request that is CreateTrainingJob — each candidate, the
InstancePreferences job, `render`, the lock's fields, the local run's request — and out of the one
that cannot take it (a tuning job's training definition); unset, no key and no job renamed."""

from __future__ import annotations

import pytest

from sagestack.core.catalog import validate_request
from sagestack.core.identity import identity
from sagestack.core.names import Names
from sagestack.training.identity import PUBLISHED, job_hash
from sagestack.training.models import JobSpec
from sagestack.tuning.models import TuningSpec
from sagestack.tuning.request import render_tuning_request
from tests.conftest import MINIMAL
from tests.unit.test_training_requests import _plan

CANDIDATES = ["ml.g5.2xlarge", "ml.g4dn.2xlarge"]  # alike but for the type: one InstancePreferences job


@pytest.mark.parametrize("value", [True, False])
def test_every_create_training_job_request_carries_the_check_as_set(value: bool) -> None:
    plan = _plan({"instance_type": CANDIDATES, "enable_infra_check": value})
    assert plan.preferred is not None
    for request in [*(c.request for c in plan.candidates), plan.preferred.request]:
        assert request["InfraCheckConfig"] == {"EnableInfraCheck": value}
        validate_request("CreateTrainingJob", request)


def test_unset_the_request_has_no_key_and_no_job_is_renamed() -> None:
    plan = _plan({"instance_type": CANDIDATES})
    assert plan.preferred is not None
    assert all(
        "InfraCheckConfig" not in r for r in [*(c.request for c in plan.candidates), plan.preferred.request]
    )
    unset = JobSpec.model_validate({"image": "t", "instance_type": "ml.g5.xlarge"})
    assert "enable_infra_check" not in identity(unset, PUBLISHED)  # added after names were published
    digest = job_hash(unset, env="dev", source_sha256="0" * 64, image_uris={})
    for value in (True, False):  # set, even to false, the request differs: so does the name
        set_ = unset.model_copy(update={"enable_infra_check": value})
        assert job_hash(set_, env="dev", source_sha256="0" * 64, image_uris={}) != digest


def test_a_tuning_jobs_trials_leave_it_out() -> None:
    """HyperParameterTrainingJobDefinition has no InfraCheckConfig: the definition is still valid."""
    plan = _plan({"instance_type": "ml.g5.2xlarge", "enable_infra_check": True})
    tuning = TuningSpec.model_validate(
        {
            "job": "c",
            "objective": {"metric": "val_accuracy", "type": "Maximize"},
            "ranges": {"lr": {"continuous": [0.0001, 0.1]}},
            "max_jobs": 4,
        }
    )
    request = render_tuning_request(tuning, key="search", names=Names("digits", "dev"), job_plan=plan)
    validate_request("CreateHyperParameterTuningJob", request)
    assert "InfraCheckConfig" not in request["TrainingJobDefinition"]


def test_render_the_lock_and_the_local_run_see_the_spec_s_value(project) -> None:  # type: ignore[no-untyped-def]
    from sagestack.local.training.job import local_training_request
    from sagestack.ops.lock_fields import request_fields
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment, requests_named

    project.spec(MINIMAL + "    enable_infra_check: true\n").env("dev")
    plan = resolve_environment(project.load("dev"))
    out = render_environment(plan, project.root)  # validated against botocore's model
    (shown,) = requests_named(plan, out, "classifier")
    assert shown.operation == "CreateTrainingJob"
    assert shown.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert request_fields(out)["jobs"]["classifier"]["shared"]["InfraCheckConfig.EnableInfraCheck"] is True
    # the local run's request is rendered alike; nothing here acts on it (no instances to check)
    local = local_training_request(project.load("dev"), "classifier", {})
    assert local.request["InfraCheckConfig"] == {"EnableInfraCheck": True}
