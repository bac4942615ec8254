"""A lock mismatch told as the request fields that changed (as `cdk diff` tells properties), in
`plan`, in `sagestack lock` and in the locked synth's refusal; a lock written before the lock
recorded fields still matches, and its mismatch is told as hashes with a hint to re-lock."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.ops.lock import LockMismatchError, lock_changes, lock_document, read_lock
from sagestack.project import resolve_environment
from sagestack.project.requests import render_environment, requests_named
from tests.conftest import MINIMAL

SPEC = MINIMAL + "    hyperparameters: {epochs: 10, lr: 0.001}\n"
CHANGED = SPEC.replace("epochs: 10", "epochs: 12") + "    keep_alive: 300\n"


def _cli(project, *args: str):
    return CliRunner().invoke(
        app, [*args, "--env", "dev", "--root", str(project.root)], env={"COLUMNS": "80"}
    )


def _current(project) -> dict:
    plan = resolve_environment(project.load("dev"))
    return lock_document(plan, render_environment(plan, project.root))


def test_a_one_key_change_is_told_as_the_fields_that_changed(project):
    project.spec(SPEC).env("dev")
    assert _cli(project, "lock").exit_code == 0
    before = read_lock(project.root, "dev")
    project.spec(CHANGED)

    changes = lock_changes(before, _current(project))
    old_hash = before["jobs"]["classifier"]["hash"]
    new_hash = _current(project)["jobs"]["classifier"]["hash"]
    assert changes == [
        f"~ jobs.classifier (hash {old_hash} → {new_hash})",
        '    ~ HyperParameters.epochs: "10" → "12"',
        "    + ResourceConfig.KeepAlivePeriodInSeconds: 300",
    ]
    # the locked synth's refusal (exit 4) and plan tell it the same way
    refusal = str(LockMismatchError("dev", changes))
    assert '\n      ~ HyperParameters.epochs: "10" → "12"\n' in refusal
    assert max(map(len, refusal.splitlines())) <= 80, refusal
    plan = _cli(project, "plan", "--quotas", "off").output
    assert "lock: 1 change(s) against config/envs/dev.lock.json" in plan
    assert '      ~ HyperParameters.epochs: "10" → "12"' in plan.splitlines()
    assert "request_sha256" not in plan and "TrainingJobName" not in plan

    relocked = _cli(project, "lock")
    assert relocked.exit_code == 0, relocked.output
    assert "      + ResourceConfig.KeepAlivePeriodInSeconds: 300" in relocked.output.splitlines()


def test_every_candidate_shares_a_change_once_and_keeps_its_own_apart(project):
    spec = SPEC.replace("instance_type: ml.m5.xlarge", "instance_type: [ml.m5.xlarge, ml.c5.xlarge]")
    project.spec(spec).env("dev")
    before = _current(project)
    project.spec(spec.replace("epochs: 10", "epochs: 3"))
    lines = lock_changes(before, _current(project))
    assert lines[1:] == ['    ~ HyperParameters.epochs: "10" → "3"']

    project.spec(spec.replace("[ml.m5.xlarge, ml.c5.xlarge]", "[ml.m5.xlarge, ml.c5.2xlarge]"))
    lines = lock_changes(before, _current(project))
    assert "    + candidate ml.c5.2xlarge" in lines and "    - candidate ml.c5.xlarge" in lines


def test_a_lock_without_fields_still_matches_and_its_mismatch_is_hashes_with_a_hint(project):
    project.spec(SPEC).env("dev")
    assert _cli(project, "lock").exit_code == 0
    path = project.root / "config/envs/dev.lock.json"
    old = json.loads(path.read_text())
    del old["requests"]  # as `sagestack lock` wrote it before locks recorded fields
    path.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
    assert "lock: matches" in _cli(project, "plan", "--quotas", "off").output

    project.spec(CHANGED)
    changes = lock_changes(old, _current(project))
    assert changes[0].startswith("~ jobs.classifier.candidates.ml.m5.xlarge.name: ")
    assert any(c.startswith("~ jobs.classifier.hash: ") for c in changes)
    assert changes[-1].startswith("(this lock records hashes only: after `sagestack lock --env dev`")

    relocked = _cli(project, "lock")
    assert "now with each request's fields" in relocked.output
    assert "requests" in json.loads(path.read_text())


def test_the_lock_is_the_same_bytes_each_time_and_one_field_a_line(project):
    project.spec(SPEC).env("dev")
    path = project.root / "config/envs/dev.lock.json"
    assert _cli(project, "lock").exit_code == 0
    first = path.read_text()
    assert _cli(project, "lock").exit_code == 0
    assert path.read_text() == first
    fields = read_lock(project.root, "dev")["requests"]["jobs"]["classifier"]["shared"]
    assert fields["HyperParameters.epochs"] == "10"
    assert '  "HyperParameters.epochs": "10",\n' in first


def test_a_source_change_is_the_hash_and_the_source_not_a_list_of_names(project):
    project.spec(SPEC).env("dev")
    before = _current(project)
    (project.root / "training_src" / "train.py").write_text("print('train, again')\n")
    lines = lock_changes(before, _current(project))
    assert lines[0].startswith("~ jobs.classifier (hash ")
    assert lines[1] == "    only the names and tags carrying the hash (it covers the source too)"
    old, new = before["sources"]["training_src"][:12], _current(project)["sources"]["training_src"][:12]
    assert lines[2:] == [f"~ sources.training_src: {old} → {new}"]


DRIVERS = SPEC + "    launcher: drivers\n"


def test_a_drivers_job_locks_its_launch_files_and_a_change_of_the_drivers_shows(project, monkeypatch):
    """The launch files' digest (code/jobs/<digest>/) is in the lock beside the source archives: a new
    pinned sagemaker-train's drivers change no request (they name the prefix by a stand-in) but show
    as that digest; a lock without a drivers job has no such section (its bytes are unchanged)."""
    import sagestack.core.drivers as drivers

    project.spec(SPEC).env("dev")
    assert "launch_files" not in _current(project)
    project.spec(DRIVERS)
    before = _current(project)
    digest = before["launch_files"]["classifier"]
    plan = resolve_environment(project.load("dev"))
    (shown,) = requests_named(plan, render_environment(plan, project.root), "classifier")
    assert "content-addressed at synth" in shown.stand_ins["code/jobs/launch-files/"]  # `render` says so
    assert len(digest) == 16 and int(digest, 16) >= 0
    shipped = drivers._sdk_files()
    bumped = tuple(
        (p, d + b"# a newer sagemaker-train\n" if p.endswith("_driver.py") else d) for p, d in shipped
    )
    monkeypatch.setattr(drivers, "_sdk_files", lambda: bumped)
    after = _current(project)
    assert after["jobs"] == before["jobs"] and after["sources"] == before["sources"]
    assert lock_changes(before, after) == [
        f"~ launch_files.classifier: {digest} → {after['launch_files']['classifier']}"
    ]


def test_without_the_pinned_sdk_a_drivers_job_is_a_spec_error_not_a_traceback(project, monkeypatch):
    import sagestack.core.drivers as drivers
    from sagestack.core.errors import SpecError

    def missing() -> None:
        raise drivers.DriversUnavailable(
            "launcher: drivers needs sagemaker-train; pip install 'sagestack[train]'"
        )

    project.spec(DRIVERS).env("dev")
    monkeypatch.setattr(drivers, "_sdk_files", missing)
    with pytest.raises(SpecError) as info:
        _current(project)
    assert str(info.value).count("jobs.classifier.launcher: launcher: drivers needs sagemaker-train") == 1
    result = _cli(project, "lock")
    assert result.exit_code != 0 and "pip install 'sagestack[train]'" in result.output
    assert "Traceback" not in result.output
