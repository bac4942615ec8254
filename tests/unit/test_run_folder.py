"""Which folders a local run may take (local/rundir.claim): only a folder carrying sagestack's own
marker is a run folder; entry names that look like a run's (model/, checkpoints/) prove nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagestack.local.training.rundir import MARKER, RUN_ENTRIES, RunFolderRefused, claim


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _users_folder(tmp_path: Path) -> Path:
    """A folder of the user's whose entries happen to carry a run's names."""
    folder = tmp_path / "mine"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "model").mkdir()
    (folder / "checkpoints" / "epoch-9.pt").write_bytes(b"weeks of training")
    (folder / "model" / "best.pth").write_bytes(b"the model I ship")
    return folder


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh", "no-fresh"])
def test_an_unmarked_folder_holding_model_and_checkpoints_is_refused_and_left_as_it_was(tmp_path, fresh):
    folder = _users_folder(tmp_path)
    before = _tree(folder)
    with pytest.raises(RunFolderRefused) as refused:
        claim(folder, fresh=fresh, job="classifier", default=tmp_path / "default")
    message = str(refused.value)
    assert f"--workdir {folder}: refused: it has no {MARKER} marker" in message
    assert "holds checkpoints/, model/" in message
    assert ("--fresh would delete them" if fresh else "replace its model/") in message
    assert _tree(folder) == before
    assert not (folder / MARKER).exists()


def test_fresh_refuses_an_unmarked_folder_even_when_it_holds_only_checkpoints(tmp_path):
    folder = tmp_path / "downloaded"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "checkpoint-10.pt").write_bytes(b"x")
    with pytest.raises(RunFolderRefused, match="--fresh would delete them"):
        claim(folder, fresh=True, job="classifier", default=tmp_path / "default")
    assert (folder / "checkpoints" / "checkpoint-10.pt").read_bytes() == b"x"


def test_checkpoints_copied_into_an_unmarked_folder_are_taken_to_resume_from(tmp_path):
    folder = tmp_path / "downloaded"
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "checkpoint-10.pt").write_bytes(b"x")
    assert claim(folder, fresh=False, job="classifier", default=tmp_path / "default") == folder
    assert json.loads((folder / MARKER).read_text())["job"] == "classifier"
    assert (folder / "checkpoints" / "checkpoint-10.pt").read_bytes() == b"x"


def test_fresh_empties_a_marked_folder_of_the_runs_entries_only(tmp_path):
    folder = tmp_path / "run"
    claim(folder, fresh=False, job="classifier", default=tmp_path / "default")
    for name in ("model", "checkpoints", "hosts", "logs"):
        (folder / name).mkdir()
        (folder / name / "f").write_text("run output")
    (folder / "request.json").write_text("{}")
    (folder / "notes.txt").write_text("mine")
    claim(folder, fresh=True, job="classifier", default=tmp_path / "default")
    assert {p.name for p in folder.iterdir()} == {MARKER, "notes.txt"}
    assert set(RUN_ENTRIES) >= {"model", "checkpoints", "hosts", "logs", "request.json"}


def test_the_default_folder_of_an_earlier_unmarked_run_is_refused_with_a_way_forward(tmp_path):
    default = tmp_path / ".sagestack" / "local" / "dev" / "classifier"
    (default / "model").mkdir(parents=True)
    (default / "request.json").write_text("{}")
    with pytest.raises(RunFolderRefused) as refused:
        claim(default, fresh=True, job="classifier", default=default)
    message = str(refused.value)
    assert message.startswith(f"{default}: refused")  # not "--workdir": none was given
    assert "remove it yourself, or give --workdir a new or empty folder" in message
    assert (default / "request.json").exists()
