"""`local train --workdir DIR [--fresh]`: sagestack removes only what it made.

A run folder sagestack makes carries a marker (.sagestack-run); --fresh starts such a folder over
(the run's own entries), and any other folder is refused, with or without --fresh, before anything
is written or removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.rundir import MARKER, RUN_ENTRIES, RunFolderRefused
from sagestack.local.training.train import run_local_training

pytestmark = pytest.mark.train

QUICK = ["--set", "max_steps=2", "--set", "epochs=1", "--no-track"]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "no-fresh"])
def test_the_project_root_as_workdir_is_refused_and_nothing_in_it_is_touched(digits_project, fresh):
    root = digits_project.root
    (root / "notes.txt").write_text("my notes: do not lose\n")
    before = _tree(root)
    args = ["local", "train", "classifier", "--env", "dev", "--workdir", str(root), "--root", str(root)]
    result = CliRunner().invoke(app, [*args, *(["--fresh"] if fresh else []), *QUICK])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert f"--workdir {root}: refused" in message
    assert "has no .sagestack-run marker" in message and "config/, containers/, notes.txt" in message
    assert ("--fresh would delete them" if fresh else "a run would write into it") in message
    assert "Nothing was written or removed. Give --workdir a new or empty folder" in message
    assert _tree(root) == before  # config/, training_src/ and the notes, byte for byte; nothing added


def test_fresh_starts_a_folder_sagestack_made_over_and_keeps_what_it_did_not_write(digits_project, tmp_path):
    loaded = digits_project.load("dev")
    workdir = tmp_path / "run"
    hps = {"max_steps": 4, "epochs": 1, "checkpoint_every_steps": 2}
    spot = "classifier-spot"  # its CheckpointConfig: the checkpoints the run folder shares
    first = run_local_training(
        loaded, spot, LocalTrainOptions(workdir=workdir, overrides=hps, tracking=False)
    )
    assert first.succeeded, first.failure
    marker = json.loads((workdir / MARKER).read_text())
    assert marker["made_by"] == "sagestack local train" and marker["job"] == spot
    # every entry a run writes is one --fresh may remove: the list cannot fall behind the runner
    assert {p.name for p in workdir.iterdir()} <= set(RUN_ENTRIES)
    assert list((workdir / "checkpoints").glob("checkpoint-*.pt"))
    (workdir / "notes.txt").write_text("mine\n")

    again = run_local_training(
        loaded,
        spot,
        LocalTrainOptions(
            workdir=workdir, fresh=True, overrides={**hps, "checkpoint_every_steps": 0}, tracking=False
        ),
    )
    assert again.succeeded, again.failure
    assert "resumed from checkpoint" not in again.log_files[0].read_text()
    assert not list((workdir / "checkpoints").glob("*"))  # the earlier run's checkpoints are gone
    assert (workdir / "notes.txt").read_text() == "mine\n"
    assert (workdir / MARKER).exists()


def test_a_folder_that_only_holds_checkpoints_to_resume_from_is_taken(digits_project, tmp_path):
    workdir = tmp_path / "downloaded"
    (workdir / "checkpoints").mkdir(parents=True)
    options = LocalTrainOptions(workdir=workdir, overrides={"max_steps": 2, "epochs": 1}, tracking=False)
    result = run_local_training(digits_project.load("dev"), "classifier", options)
    assert result.succeeded, result.failure
    assert (workdir / MARKER).exists()


def test_a_file_as_workdir_is_refused(digits_project, tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x")
    options = LocalTrainOptions(workdir=target, fresh=True, tracking=False)
    with pytest.raises(RunFolderRefused, match=r"a-file: refused: it is a file, not a folder"):
        run_local_training(digits_project.load("dev"), "classifier", options)
    assert target.read_text() == "x"
