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
