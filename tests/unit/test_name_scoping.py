"""Names' IAM patterns stop at the environment: 'digits-dev' never matches 'digits-dev2-…'; a
tuning job's pattern cannot (32 characters), so its statements go by the environment's tags, which
every request carries and a caller cannot set otherwise."""

from __future__ import annotations

import fnmatch

import pytest

from sagestack.core.names import Names


@pytest.mark.parametrize(
    "attr", ["compilation_job_pattern", "transform_job_pattern", "processing_job_pattern"]
)
def test_cut_name_patterns_do_not_reach_a_sibling_environment(attr):
    dev, dev2 = Names("digits", "dev"), Names("digits", "dev2")
    pattern = getattr(dev, attr)
    assert fnmatch.fnmatchcase(f"{dev.transform_prefix('score')}-{'a' * 32}", pattern)
    assert fnmatch.fnmatchcase(f"{dev.compilation_prefix('digits')}-{'a' * 32}", pattern)
    assert not fnmatch.fnmatchcase(f"{dev2.transform_prefix('score')}-{'a' * 32}", pattern)
    assert not fnmatch.fnmatchcase(f"{dev2.compilation_prefix('digits')}-{'a' * 32}", pattern)


def test_request_tags_always_carry_the_environment_and_refuse_another():
    names = Names("digits", "dev")
    assert dict(names.request_tags({"team": "ml"})) == {
        "team": "ml",
        "sagestack:project": "digits",
        "sagestack:environment": "dev",
    }
    with pytest.raises(ValueError, match=r"sagestack:environment='prod'.*drop it"):
        names.request_tags({"sagestack:environment": "prod"})
