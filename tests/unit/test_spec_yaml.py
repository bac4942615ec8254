"""The YAML of a spec as users write it: merge keys, files that are not the project's own, and
errors that say where and how to fix the text (issue 37, items 1-3)."""

from __future__ import annotations

from pathlib import Path

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
    """The issue's own text: top-level `x-` keys are the user's (as in Compose files), a place for
    anchors; the spec's keys merge from them."""
    project.spec(JOBS_MERGED).env("dev", "x-a: &a {k: v}\nx-b: {<<: *a, own: 3}\ntags: {<<: *a}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    assert project.load("dev").spec.tags == {"k": "v"}
    project.env("dev", "x-a: &a {k: v}\nx-b: {<<: *a, own: 3}\ntagz: {<<: *a}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert result.exit_code == 2, result.output  # a misspelt key is still refused, located
    assert "config/envs/dev.yaml:3:1: error: tagz: unknown key" in result.output
    assert "x-a" not in result.output and "x-b" not in result.output
    project.env("dev", "tags: {<<: &a {team: ml}}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert result.exit_code == 0, result.output


def test_top_level_extension_keys_hold_anchors_for_jobs(project):
    spec = MINIMAL.replace("jobs:\n", "x-gpu: &gpu {instance_type: ml.g5.xlarge, max_run: 2h}\njobs:\n")
    spec += "  second:\n    <<: *gpu\n    image: train\n"
    loaded = project.spec(spec).load()
    assert loaded.spec.jobs["second"].instance_type == ["ml.g5.xlarge"]
    assert loaded.spec.jobs["second"].max_run == 7200


# ---------------------------------------------------------------- files outside the project (item 2)

SECRET = "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"


def _validate(project) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["validate", "--root", str(project.root)])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    return result.exit_code, result.output


def _link_overlay(project, target) -> None:  # type: ignore[no-untyped-def]
    overlay = project.root / "config" / "envs" / "dev.yaml"
    overlay.unlink()
    overlay.symlink_to(target)


def test_an_overlay_linked_to_a_file_outside_the_project_is_refused_by_name_only(project, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[default]\n{SECRET}\n")
    _link_overlay(project.spec().env("dev"), credentials)
    assert project.errors("dev") == [
        "config/envs/dev.yaml:1:1: (top level): config/envs/dev.yaml links to a file outside the "
        "project; a spec is a YAML file inside the project: copy the file to config/envs/dev.yaml "
        "(or link to one inside the project)"
    ]
    code, output = _validate(project)
    assert code == 2 and "config/envs/dev.yaml:1:1: error:" in output
    assert "AKIA" not in output and str(tmp_path) not in output


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_an_overlay_linked_to_the_process_environment_shows_none_of_it(project):
    entries = Path("/proc/self/environ").read_bytes().split(b"\0")
    values = [e.decode(errors="replace").partition("=")[2] for e in entries]
    shown = [v for v in values if len(v) >= 12]  # a value long enough not to occur by chance
    _link_overlay(project.spec().env("dev"), "/proc/self/environ")
    code, output = _validate(project)
    assert code == 2 and "links to a file outside the project" in output
    assert not [v for v in shown if v in output]  # (a worker may start with a bare environment)


def test_a_link_to_a_file_inside_the_project_is_read(project):
    project.spec().write("config/shared.yaml", "retain_data: false\n")
    _link_overlay(project.env("dev"), "../shared.yaml")
    assert project.load("dev").spec.retain_data is False


def test_a_lock_linked_outside_the_project_is_refused(project, tmp_path):
    (tmp_path / "lock.json").write_text('{"k": "' + SECRET + '"}')
    project.spec().env("dev").root.joinpath("config/envs/dev.lock.json").symlink_to(tmp_path / "lock.json")
    errors = project.errors("dev")
    assert errors[0].startswith("config/envs/dev.lock.json:1:1: (top level): config/envs/dev.lock.json links")
    assert all("AKIA" not in e for e in errors)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            b"retain_data: false\n\x01\x02\x1b[31mred\n",
            "2:1: error: (top level): a control character (U+0001)",
        ),
        (
            b"retain_data: false\nx: \x1b]0;title\x07\n",
            "2:4: error: (top level): a control character (U+001B)",
        ),
        (b"retain_data: false\nx: \x00\x1b[2J\n", "2:4: error: (top level): this is a binary file"),
        (b"retain_data: false\nx: \xff\x1b[2J\n", "2:4: error: (top level): the file is not UTF-8"),
    ],
)
def test_an_error_in_a_binary_file_shows_no_control_bytes(project, body, says):
    project.spec().env("dev").root.joinpath("config/envs/dev.yaml").write_bytes(body)
    code, output = _validate(project)
    assert code == 2 and f"config/envs/dev.yaml:{says}" in output, output
    assert not any(c < " " and c != "\n" for c in output), repr(output)


# ---------------------------------------------------------------- errors that say how to fix the text (item 3)


def test_a_tab_in_the_indentation_says_where_and_to_indent_with_spaces(project):
    project.spec().env("dev", "retain_data: false\ntags:\n\tteam: ml\n\towner: me\n")
    assert project.errors("dev") == [
        "config/envs/dev.yaml:3:1: tags: a tab in the indentation; YAML indents with spaces only: "
        "indent with spaces (also indented with tabs: line 4)"
    ]


def test_a_duplicate_key_names_both_lines_and_which_to_delete(project):
    project.spec().env("dev", "retain_data: false\ntags:\n  team: ml\n  team: ai\n")
    assert project.errors("dev") == [
        "config/envs/dev.yaml:4:3: tags.team: 'team' is given twice in one mapping, on line 3 and on "
        "line 4; a key is allowed once: delete one of them (to keep this value, delete line 3)"
    ]


@pytest.mark.parametrize(
    ("overlay", "says"),
    [
        (
            "retain_data: false\ntags: {team: ml,\n  owner: me\nfoo: 1\n",
            "2:7: tags: the mapping opened with '{' here is not closed: line 4, column 4 has ':' where "
            "',' or '}' must come; close it with '}' (or separate its entries with ',')",
        ),
        (
            "retain_data: false\ntags: {team: ml, owner: me\n",
            "2:7: tags: the mapping opened with '{' here is not closed: the file ends where ',' or '}' "
            "must come; close it with '}' (or separate its entries with ',')",
        ),
        (
            "jobs:\n  classifier:\n    instance_type: [ml.m5.xlarge,\n    max_run: 1h\n",
            "3:20: jobs.classifier.instance_type: the list opened with '[' here is not closed:",
        ),
    ],
)
def test_an_unclosed_bracket_is_located_where_it_was_opened(project, overlay, says):
    project.spec().env("dev", overlay)
    (error,) = project.errors("dev")
    assert error.startswith(f"config/envs/dev.yaml:{says}"), error


def test_the_syntax_errors_exit_2_through_the_cli_with_the_line_to_fix(project):
    project.spec().env("dev", "retain_data: false\ntags: {team: ml,\n  owner: me\nfoo: 1\n")
    code, output = _validate(project)
    assert code == 2
    assert output.splitlines()[:4] == [
        "config/envs/dev.yaml:2:7: error: tags: the mapping opened with '{' here is not closed: line 4, "
        "column 4 has ':' where ',' or '}' must come; close it with '}' (or separate its entries with ',') "
        "(in dev)",
        "  |",
        "2 | tags: {team: ml,",
        "  |       ^^^^^^^^^^",
    ]


def test_tags_over_the_limit_from_an_overlay_are_located_in_the_overlay(project):
    own = "".join(f"  p{i}: x\n" for i in range(40))
    added = "".join(f"  e{i}: x\n" for i in range(12))
    project.spec(MINIMAL + "tags:\n" + own).env("dev", "tags:\n" + added)
    (error,) = [e for e in project.errors("dev") if "tags given" in e]
    assert error == (
        "config/envs/dev.yaml:8:7: tags.e6: 52 tags given; with the 4 sagestack adds to job "
        "classifier's training jobs, AWS's 50 a resource leave room for 46: drop this one and the 5 "
        "after it [tag-limits]"
    )
