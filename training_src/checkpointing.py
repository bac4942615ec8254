"""Checkpoints that survive a spot reclaim: written atomically (temp file, fsync, rename, fsync of
the folder), the newest K kept, and on start the newest one that loads is used (a truncated or
corrupt file is skipped with a message, never fatal)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

NAME = re.compile(r"^checkpoint-(\d{9})\.pt$")


def checkpoint_path(folder: Path, step: int) -> Path:
    return folder / f"checkpoint-{step:09d}.pt"


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path), newest first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := NAME.match(p.name))]
    return sorted(found, reverse=True)


def save_atomic(state: dict[str, Any], folder: Path, step: int, keep_last: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(folder, step)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-checkpoint-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself must survive a crash
    finally:
        os.close(dir_fd)
    for _, old in list_checkpoints(folder)[keep_last:]:
        old.unlink(missing_ok=True)
    return final


def load_newest(folder: Path, log: Any = print) -> tuple[int, dict[str, Any]] | None:
    """The newest checkpoint that loads, or None. Corrupt ones are reported and skipped."""
    for step, path in list_checkpoints(folder):
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as e:
            log(f"checkpoint {path.name} is unreadable ({type(e).__name__}: {e}); trying an older one")
            continue
        if not isinstance(state, dict) or "model" not in state:
            log(f"checkpoint {path.name} is not a sagestack checkpoint; trying an older one")
            continue
        return step, state
    return None
