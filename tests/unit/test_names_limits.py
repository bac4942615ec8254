"""Names at SageMaker's limits (core/names.py): every name cut to fit keeps its hash, fits exactly,
never ends a cut on '-', and matches botocore's pattern; a project or environment that cannot be
part of a name is refused with what to write. (issue 37: names.py's cuts were reached by no test at
their boundaries.)"""

from __future__ import annotations

import re

import botocore.session
import pytest

from sagestack.core.names import COMPILE_NAME_PREFIX_MAX, Names

MODEL = botocore.session.get_session().get_service_model("sagemaker")
DIGEST = "0123456789abcdef" * 4


def _shape(name: str) -> tuple[int, str]:
    meta = MODEL.shape_for(name).metadata
    return meta["max"], meta["pattern"]


@pytest.mark.parametrize("job_length", range(40, 60))
@pytest.mark.parametrize("project", ["digits", "digitsx", "digitsxy"])
def test_training_and_preference_jobs_fill_63_characters_and_keep_the_hash(job_length, project):
    limit, pattern = _shape("TrainingJobName")
    names = Names(project, "dev")
    job = ("ab-" * 30)[:job_length]  # with the three projects, cuts land on letters and on '-' alike
    for name, suffix in (
        (names.training_job(job, DIGEST, 3), "-01234567-3"),
        (names.preference_job(job, DIGEST), "-01234567-p"),
        (names.optimization_job(job, DIGEST), "-0123456789ab"),
    ):
        assert len(name) <= limit and name.endswith(suffix) and re.fullmatch(pattern, name), name
        assert name.startswith(f"{project}-dev-") and "--" not in name
        full = f"{project}-dev-{job}{suffix}"
        assert name == full if len(full) <= limit else len(name) >= limit - 1  # cut only when needed


def test_short_names_are_whole():
    names = Names("digits", "dev")
    assert names.training_job("classifier", DIGEST, 0) == "digits-dev-classifier-01234567-0"
    assert names.preference_job("classifier", DIGEST) == "digits-dev-classifier-01234567-p"
    assert names.optimization_job("llm", DIGEST) == "digits-dev-llm-0123456789ab"
    assert names.tuning_job("search", DIGEST) == "digits-search-01234567"
    assert names.retrain_schedule("classifier") == "digits-dev-classifier-retrain"
    assert names.state_machine("classifier") == "digits-dev-classifier"
    assert names.state_machine("search", tuning=True) == "digits-dev-tune-search"
    assert names.compilation_prefix("web") == names.transform_prefix("web") == "digits-dev-web"
    assert names.monitoring_schedule("web") == "digits-dev-web-data-quality"


@pytest.mark.parametrize("length", range(20, 40))
@pytest.mark.parametrize("project", ["digits", "digitsx", "digitsxy"])
def test_the_cut_names_fit_their_own_limits(length, project):
    limit, pattern = _shape("HyperParameterTuningJobName")
    names = Names(project, "dev")
    key = ("cd-" * 20)[:length]  # lengths 20-39: the cuts land on each of 'c', 'd' and '-'
    tuning = names.tuning_job(key, DIGEST)
    assert len(tuning) <= limit == 32 and tuning.endswith("-01234567") and re.fullmatch(pattern, tuning)
    assert "--" not in tuning
    schedule = names.retrain_schedule(key * 2)
    assert len(schedule) <= 64 and schedule.endswith("-retrain") and "--" not in schedule
    for prefix in (names.compilation_prefix(key), names.transform_prefix(key)):
        assert len(prefix) <= COMPILE_NAME_PREFIX_MAX and not prefix.endswith("-")
        assert prefix == f"{project}-dev-{key}"[:COMPILE_NAME_PREFIX_MAX].rstrip("-")


@pytest.mark.parametrize(
    ("project", "env", "what"),
    [
        ("Digits", "dev", "project 'Digits'"),
        ("digits", "dev_eu", "environment 'dev_eu'"),
        ("-x", "dev", "project '-x'"),
    ],
)
def test_a_project_or_environment_outside_names_is_refused_with_what_to_write(project, env, what):
    said = f"{what}: use lowercase letters, digits and '-' (it is part of every resource name), e.g. 'digits' or 'dev'"
    with pytest.raises(ValueError, match=re.escape(said) + "$"):
        Names(project, env)
    Names("digits2", "dev-eu")  # digits and '-' inside are fine


def test_an_environment_tag_cannot_be_overridden():
    names = Names("digits", "dev")
    assert names.request_tags({"team": "ml"}) == (
        ("sagestack:environment", "dev"),
        ("sagestack:project", "digits"),
        ("team", "ml"),
    )
    assert names.request_tags({"sagestack:environment": "dev"}) == names.request_tags()
    with pytest.raises(ValueError, match="tag sagestack:environment='prod': sagestack sets it to 'dev'"):
        names.request_tags({"sagestack:environment": "prod"})
