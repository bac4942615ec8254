"""A job's name hashes what its spec computes (training.identity): the fields its models had when
names were published, always; any field added since, only when a spec sets it. So a new optional
field renames no job, at any depth, unless it is set. (tests/unit/test_request_baseline.py holds every
published name of two projects unchanged.)"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, create_model

from sagestack.core.identity import Registry
from sagestack.core.model import StrictModel
from sagestack.core.names import Names
from sagestack.training.identity import PUBLISHED, job_hash
from sagestack.training.models import CheckpointSpec, JobSpec
from sagestack.tuning.models import TuningSpec
from tests.unit.test_tuning_requests import OBJECTIVE, _job_plan

BASE = {"image": "train", "instance_type": ["ml.g5.2xlarge"], "checkpoint": {"every_steps": 100}}


def _hash(job: JobSpec) -> str:
    return job_hash(job, env="dev", source_sha256="0" * 64, image_uris={})


def test_a_new_optional_field_renames_no_job_until_it_is_set():
    # JobSpec as it would be with one more field (the published names stay JobSpec's).
    JobSpecNext = create_model("JobSpecNext", __base__=JobSpec, warmup_steps=(int | None, None))
    digest = _hash(JobSpec.model_validate(BASE))
    assert _hash(JobSpecNext.model_validate(BASE)) == digest
    assert _hash(JobSpecNext.model_validate({**BASE, "warmup_steps": None})) == digest  # its default
    assert _hash(JobSpecNext.model_validate({**BASE, "warmup_steps": 500})) != digest


def test_a_new_field_of_a_nested_model_renames_no_job_until_it_is_set():
    CheckpointNext = create_model("CheckpointNext", __base__=CheckpointSpec, atomic=(bool, True))
    JobSpecNext = create_model("JobSpecNext", __base__=JobSpec, checkpoint=(CheckpointNext | None, None))
    digest = _hash(JobSpec.model_validate(BASE))
    assert _hash(JobSpecNext.model_validate(BASE)) == digest
    changed = {**BASE, "checkpoint": {"every_steps": 100, "atomic": False}}
    assert _hash(JobSpecNext.model_validate(changed)) != digest


def test_a_new_nested_model_hashes_only_what_is_set():
    class Warmup(StrictModel):  # a model added after publication: no published names
        steps: int = 100
        ratio: float = 0.1

    JobSpecNext = create_model("JobSpecNext", __base__=JobSpec, warmup=(Warmup | None, None))
    unset = _hash(JobSpecNext.model_validate(BASE))
    assert unset == _hash(JobSpec.model_validate(BASE))
    defaults = _hash(JobSpecNext.model_validate({**BASE, "warmup": {}}))
    assert defaults != unset  # set, even to its defaults
    assert _hash(JobSpecNext.model_validate({**BASE, "warmup": {"steps": 200}})) not in (unset, defaults)


def test_what_a_job_computes_is_its_identity_not_when_it_retrains():
    scheduled = {**BASE, "schedule": {"expression": "rate(7 days)"}}
    assert _hash(JobSpec.model_validate(scheduled)) == _hash(JobSpec.model_validate(BASE))
    assert _hash(JobSpec.model_validate({**BASE, "instance_count": 2})) != _hash(JobSpec.model_validate(BASE))


def _identity_models(
    cls: type[BaseModel], registry: Registry, seen: list[type[BaseModel]]
) -> list[type[BaseModel]]:
    """The models a hash reaches from `cls` (not through fields that are no part of the identity)."""
    seen.append(cls)
    record = next((registry[c] for c in cls.__mro__ if c in registry), None)

    def types(annotation: Any) -> Iterator[Any]:
        yield annotation
        for arg in typing.get_args(annotation):
            yield from types(arg)

    for name, info in cls.model_fields.items():
        if record is not None and name in record.not_identity:
            continue
        for t in types(info.annotation):
            if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                _identity_models(t, registry, seen)
    return seen


@pytest.mark.parametrize("registry_of", ["training", "tuning"])
def test_every_published_name_is_a_field_and_every_other_field_has_a_default(registry_of):
    """A published field renamed without `hashed_as`, or removed, would rename every job; a field
    added without a default would be in every hash."""
    from sagestack.tuning.request import PUBLISHED as TUNING_PUBLISHED

    registry, root = (PUBLISHED, JobSpec) if registry_of == "training" else (TUNING_PUBLISHED, TuningSpec)
    for cls, record in registry.items():
        fields = set(cls.model_fields)
        assert record.fields <= fields, (cls.__name__, record.fields - fields)
        assert set(record.hashed_as) <= record.fields and record.not_identity <= fields, cls.__name__
    for cls in _identity_models(root, registry, []):
        record = next((registry[c] for c in cls.__mro__ if c in registry), None)
        published = record.fields | record.not_identity if record else set()
        required = {n for n, info in cls.model_fields.items() if info.is_required() and n not in published}
        assert not required, f"{cls.__name__}: {required} would enter every name's hash"


def test_a_new_optional_search_field_renames_no_tuning_job_until_it_is_set():
    from sagestack.tuning.request import render_tuning_request

    body = {
        "job": "classifier",
        "objective": OBJECTIVE,
        "max_jobs": 4,
        "ranges": {"lr": {"continuous": [0.1, 1]}},
    }
    TuningNext = create_model("TuningNext", __base__=TuningSpec, patience=(int | None, None))
    plan = _job_plan()

    def name(tuning: TuningSpec) -> str:
        request = render_tuning_request(tuning, key="lr", names=Names("digits", "prod"), job_plan=plan)
        return str(request["HyperParameterTuningJobName"])

    published = name(TuningSpec.model_validate(body))
    assert name(TuningNext.model_validate(body)) == published
    assert name(TuningNext.model_validate({**body, "patience": 3})) != published
