"""Checkpoint files: atomic, the newest K kept, and a corrupt newest one skipped."""

from __future__ import annotations

import pytest
import torch

from tests.training_src.conftest import SRC, load

ckpt = load("checkpointing")


def state(step: int) -> dict:
    return {"model": {"w": torch.full((4,), float(step))}, "step": step}


def test_keeps_the_newest_k(tmp_path):
    for step in (10, 20, 30, 40):
        ckpt.save_atomic(state(step), tmp_path, step, keep_last=2)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [40, 30]
    assert not list(tmp_path.glob(".tmp-*"))


def test_truncated_newest_is_skipped_for_the_previous_one(tmp_path):
    for step in (10, 20):
        ckpt.save_atomic(state(step), tmp_path, step, keep_last=3)
    newest = ckpt.checkpoint_path(tmp_path, 20)
    newest.write_bytes(newest.read_bytes()[:50])  # as a crash mid-copy would leave it
    messages = []
    step, loaded = ckpt.load_newest(tmp_path, log=messages.append)
    assert step == 10 and torch.equal(loaded["model"]["w"], torch.full((4,), 10.0))
    assert len(messages) == 1 and "checkpoint-000000020.pt is unreadable" in messages[0]


def test_foreign_file_is_not_taken_for_a_checkpoint(tmp_path):
    ckpt.save_atomic(state(5), tmp_path, 5, keep_last=3)
    torch.save({"something": "else"}, ckpt.checkpoint_path(tmp_path, 6))
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    step, _ = ckpt.load_newest(tmp_path, log=lambda m: None)
    assert step == 5


def test_nothing_to_resume(tmp_path):
    assert ckpt.load_newest(tmp_path / "missing", log=print) is None


def test_validation_runs_at_epoch_ends_that_reach_a_multiple_of_val_every_steps(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(SRC))  # train.py imports its siblings, as under torchrun
    train = load("train")
    per_epoch, epochs = 22, 12

    def validating(every: int, start_epoch: int = 0) -> list[int]:
        return [
            e
            for e in range(start_epoch, epochs)
            if train.validates_after(e * per_epoch, (e + 1) * per_epoch, every, e == epochs - 1)
        ]

    assert validating(100) == [4, 9, 11]  # steps 110 and 220 cross 100 and 200; the last always
    assert validating(0) == list(range(epochs))
    assert validating(22) == list(range(epochs))
    assert validating(100, start_epoch=6) == [9, 11]  # a resumed run validates where a whole one does
    with pytest.raises(train.HyperparameterError, match="val_every_steps must be >= 0"):
        train.parse_args(["--val_every_steps", "-1"])


def test_a_write_in_progress_is_outside_the_synced_folder(tmp_path, monkeypatch):
    """SageMaker uploads everything under the checkpoint folder: a partial file must never be there."""
    folder = tmp_path / "checkpoints"
    seen = []
    real_save = torch.save

    def spying_save(obj, f, *args, **kwargs):
        seen.append(sorted(p.name for p in folder.iterdir()) if folder.exists() else [])
        real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", spying_save)
    ckpt.save_atomic(state(1), folder, 1, keep_last=3)
    ckpt.save_atomic(state(2), folder, 2, keep_last=3)
    assert seen == [[], ["checkpoint-000000001.pt"]]
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint-000000001.pt", "checkpoint-000000002.pt"]


def test_stale_partial_writes_are_removed_before_resuming_and_a_live_writer_s_kept(tmp_path):
    import os
    import socket
    import subprocess

    folder = tmp_path / "checkpoints"
    ckpt.save_atomic(state(10), folder, 10, keep_last=3)
    ended = subprocess.Popen(["true"])
    ended.wait()
    host = socket.gethostname()
    legacy = folder / ".tmp-checkpoint-k2j3h4.pt"  # the old name, inside the synced folder
    dead = ckpt.temp_folder(folder) / f".tmp-checkpoint-{host}-{ended.pid}-a1b2.pt"
    live = ckpt.temp_folder(folder) / f".tmp-checkpoint-{host}-{os.getpid()}-c3d4.pt"
    for partial in (legacy, dead, live):
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(b"PK\x03\x04 half a checkpoint")
    messages = []
    step, _ = ckpt.load_newest(folder, log=messages.append)
    assert step == 10
    assert not legacy.exists() and not dead.exists()
    assert live.exists()  # a process of this host still running may be writing it
    assert any("removed 2 partial checkpoint write(s)" in m for m in messages), messages


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    folder = tmp_path / "checkpoints"
    ckpt.save_atomic(state(10), folder, 10, keep_last=3)
    marker = tmp_path / "ran"
    torch.save({"model": {}, "step": 20, "payload": _RunsCode(marker)}, ckpt.checkpoint_path(folder, 20))
    messages = []
    step, _ = ckpt.load_newest(folder, log=messages.append)
    assert step == 10 and not marker.exists()
    assert len(messages) == 1
    assert messages[0].startswith("checkpoint checkpoint-000000020.pt is refused: it holds posix.system")
    assert "trying an older one" in messages[0]


def test_the_training_state_loads_weights_only_and_restores_every_generator(monkeypatch, tmp_path):
    import random

    import numpy as np

    monkeypatch.syspath_prepend(str(SRC))
    train = load("train")
    train.seed_everything(7)
    random.random(), np.random.rand(3), torch.rand(2)  # somewhere mid-stream
    saved = train.rng_state()
    expected = (random.random(), np.random.rand(3).tolist(), torch.rand(2).tolist())
    path = ckpt.save_atomic({"model": {}, "rng": [saved]}, tmp_path, 1, keep_last=1)
    restored = torch.load(path, weights_only=True)["rng"][0]
    train.seed_everything(99)
    train.set_rng_state(restored)
    assert (random.random(), np.random.rand(3).tolist(), torch.rand(2).tolist()) == expected


def test_a_checkpoint_folder_on_a_mount_of_its_own_is_staged_inside_it(tmp_path, monkeypatch):
    import errno
    import os

    folder = tmp_path / "checkpoints"
    real_replace, refused = os.replace, []

    def across_mounts(src, dst):
        if not refused:  # the first rename crosses file systems, as from a sibling of a mount point
            refused.append(src)
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(src, dst)

    monkeypatch.setattr(ckpt.os, "replace", across_mounts)
    ckpt.save_atomic(state(3), folder, 3, keep_last=3)
    assert refused and not list(tmp_path.rglob(".tmp-checkpoint-*"))
    step, loaded = ckpt.load_newest(folder, log=print)
    assert step == 3 and torch.equal(loaded["model"]["w"], torch.full((4,), 3.0))
