"""The YAML of a spec as users write it: merge keys, files that are not the project's own, and
errors that say where and how to fix the text (issue 37, items 1-3)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core import yamldoc
from sagestack.core.errors import Location
from sagestack.core.yamlevents import read_events
from tests.conftest import MINIMAL

# ---------------------------------------------------------------- merge keys (item 1)

JOBS_MERGED = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier: &job
    image: train
    instance_type: ml.m5.xlarge
    max_run: 2h
    hyperparameters: &hp {epochs: 5, lr: 0.01}
  second:
    <<: *job
    max_run: 3h
  third: {<<: [*job], hyperparameters: {<<: *hp, lr: 0.1}}
"""


@pytest.fixture(params=["libyaml events", "ruamel"])
def reader(request, monkeypatch):  # type: ignore[no-untyped-def]
    """Each test runs under both readers: the fast one, and ruamel's (the fast one declining)."""
    if request.param == "ruamel":
        monkeypatch.setattr(yamldoc, "read_events", lambda *a: None)
    yamldoc._PARSED.clear()
    yield request.param
    yamldoc._PARSED.clear()


def test_merge_keys_load_with_own_keys_over_merged_ones(project, reader):
    jobs = project.spec(JOBS_MERGED).load().spec.jobs
    assert jobs["second"].max_run == 3 * 3600 and jobs["second"].instance_type == ["ml.m5.xlarge"]
    assert jobs["third"].max_run == 2 * 3600
    assert jobs["third"].hyperparameters == {"epochs": 5, "lr": 0.1}


def test_a_merged_key_is_located_where_it_is_written(project, reader):
    doc = project.spec(JOBS_MERGED).load().document
    file = "config/sagestack.yaml"
    assert doc.locate(("jobs", "second", "image"), key=True) == Location(file, 7, 5)  # in the anchor
    assert doc.locate(("jobs", "second", "max_run"), key=True) == Location(file, 13, 5)  # its own
    assert doc.locate(("jobs", "third", "hyperparameters", "epochs")) == Location(file, 10, 35)


def test_merge_list_takes_the_first_mapping_that_has_a_key(project, reader):
    text = MINIMAL + "x: &a {k: 1}\ny: &b {k: 2, m: 3}\nz: {<<: [*a, *b], own: 4}\n"
    doc = yamldoc.read_yaml(project.spec(text).root / "config/sagestack.yaml", "f.yaml")
    assert doc.data["z"] == {"own": 4, "k": 1, "m": 3}
    assert doc.locate(("z", "k")) == Location("f.yaml", 9, 11)
    assert doc.locate(("z", "m")) == Location("f.yaml", 10, 17)


def test_an_error_in_a_merged_value_is_located_in_the_anchor_of_the_overlay(project, reader):
    overlay = "x: &j {max_run: soon}\njobs:\n  classifier: {<<: *j}\n"
    errors = project.spec().env("dev", overlay).errors("dev")
    assert len(errors) == 2, errors  # the unknown key x, and the duration where it is written
    assert errors[1].startswith(
        "config/envs/dev.yaml:1:17: jobs.classifier.max_run: 'soon' is not a duration"
    )


def test_the_fast_reader_reads_merge_keys_itself():
    """Merge keys are common: they stay on the fast path (ruamel is 10x slower on a large spec)."""
    for text in (JOBS_MERGED, "a: &a {k: 1}\nb: {<<: [*a], own: 2}\n", "a: &a 1\nb: [*a, *a]\n"):
        assert read_events(text, "f.yaml", 64, 100_000) is not None, text


def test_validate_with_merge_keys_exits_0_through_the_cli(project):
    project.spec(JOBS_MERGED).env("dev", "x-a: &a {k: 1}\nx-b: {<<: *a, own: 3}\ntags: {<<: *a}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert result.exit_code == 2, result.output  # x-a, x-b: unknown keys, each located
    assert "config/envs/dev.yaml:1:1: error: x-a: unknown key" in result.output
    assert "config/envs/dev.yaml:2:1: error: x-b: unknown key" in result.output
    project.env("dev", "tags: {<<: &a {team: ml}}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert result.exit_code == 0, result.output
