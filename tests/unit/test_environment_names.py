"""An environment's name becomes part of every physical name (stacks, jobs, endpoints, buckets), so the
loader takes only what all of them accept: 1-16 characters, lowercase letters, digits and hyphens,
starting with a letter. The edges are asserted on both sides."""

from __future__ import annotations

import pytest

from tests.conftest import MINIMAL


@pytest.mark.parametrize("name", ["d", "dev", "dev-2", "a" * 16, "prod-eu-west-1"])
def test_names_every_physical_name_accepts_load(project, name):
    project.spec(MINIMAL).env(name)
    assert project.load(name).env == name


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("a" * 17, "a" * 16),
        ("Dev", "dev"),
        ("dev_1", "dev-1"),
        ("1dev", "dev"),
        ("-dev", "dev"),
        ("dev.1", "dev-1"),
        ("prod eu", "prod-eu"),
    ],
)
def test_other_names_are_refused_with_what_is_allowed(project, name, suggested):
    project.spec(MINIMAL).env(name)
    assert project.errors(name) == [
        f"config/envs/{name}.yaml:1:1: (top level): environment name '{name}' must be 1-16 lowercase letters, digits and "
        "hyphens, starting with a letter (it is part of every stack, job, endpoint and bucket name); "
        f"rename config/envs/{name}.yaml to config/envs/{suggested}.yaml"
    ]
