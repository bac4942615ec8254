"""Checkpoints that survive a spot reclaim: written atomically (temp file, fsync, rename, fsync of
the folder), the newest K kept, and on start the newest one that loads is used (a truncated or
corrupt file is skipped with a message, never fatal).

A write in progress lives beside the checkpoint folder, not in it (`temp_folder`, same file system,
so the rename stays atomic): SageMaker uploads everything under the checkpoint folder to S3, and a
half-written file must never be uploaded. Partial writes a killed run left behind are removed when
the next run starts, before it writes anything.

Loading takes tensors and plain values only (torch.load(weights_only=True)): on a shared file system
someone else could plant a file, and unpickling anything else can run code. The training state is
saved in those types (training_src/train.py keeps its RNG states as tensors, lists and numbers).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

import torch

NAME = re.compile(r"^checkpoint-(\d{9})\.pt$")
TEMP_PREFIX = ".tmp-checkpoint-"
# .tmp-checkpoint-<host>-<pid>-<random>.pt: who is writing it (older runs wrote .tmp-checkpoint-<random>.pt)
TEMP_OWNER = re.compile(r"^\.tmp-checkpoint-(?P<host>.+)-(?P<pid>\d+)-[^-]+\.pt$")


def checkpoint_path(folder: Path, step: int) -> Path:
    return folder / f"checkpoint-{step:09d}.pt"


def temp_folder(folder: Path) -> Path:
    """Where writes in progress live: a sibling of the (resolved) checkpoint folder, outside what
    SageMaker syncs, on the same file system."""
    real = folder.resolve()
    return real.parent / f".{real.name}.partial"


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path), newest first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := NAME.match(p.name))]
    return sorted(found, reverse=True)


def _fsync_folder(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself must survive a crash
    finally:
        os.close(dir_fd)


def _write_temp(state: dict[str, Any], where: Path) -> Path:
    fd, tmp = tempfile.mkstemp(
        dir=where, prefix=f"{TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-", suffix=".pt"
    )
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def save_atomic(state: dict[str, Any], folder: Path, step: int, keep_last: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(folder, step)
    staging = temp_folder(folder)
    try:
        staging.mkdir(exist_ok=True)
        tmp = _write_temp(state, staging)
    except OSError as e:  # the folder's parent is not ours to write: stage in the folder itself
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        tmp = _write_temp(state, folder)
    try:
        os.replace(tmp, final)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        if e.errno != errno.EXDEV:
            raise
        # the checkpoint folder is a mount of its own: stage inside it (the rename must not cross)
        os.replace(_write_temp(state, folder), final)
    _fsync_folder(folder)
    for _, old in list_checkpoints(folder)[keep_last:]:
        old.unlink(missing_ok=True)
    return final


def _writer_alive(name: str) -> bool:
    """Whether the process named in a temp file's name may still be writing it: only a process of
    this host that is still running (another host's writer cannot be asked, and one world has one
    writer, rank 0, which writes nothing before every rank has loaded)."""
    owner = TEMP_OWNER.match(name)
    if owner is None or owner["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    return True


def remove_partial_writes(folder: Path) -> int:
    """Remove the temp files killed writes left, in the checkpoint folder and beside it. Returns the count."""
    removed = 0
    for where in (folder, temp_folder(folder)):
        if not where.is_dir():
            continue
        for path in where.iterdir():
            if path.name.startswith(TEMP_PREFIX) and not _writer_alive(path.name):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed += 1
    return removed


def _refusal(path: Path, error: pickle.UnpicklingError) -> str:
    """Why weights-only loading refused the file: the globals it would have had to import and run."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:
        names = []
    what = ", ".join(names) if names else str(error).splitlines()[0][:200]
    return (
        f"checkpoint {path.name} is refused: it holds {what}, which loading would have to import and "
        "run (checkpoints load tensors and plain values only; sagestack's training never writes "
        "anything else, so the file was written by other code or planted); trying an older one"
    )


def load_newest(folder: Path, log: Any = print) -> tuple[int, dict[str, Any]] | None:
    """The newest checkpoint that loads, or None. Partial writes of a killed run are removed first;
    corrupt files, and files that would run code when loaded, are reported and skipped."""
    removed = remove_partial_writes(folder) if folder.is_dir() else 0
    if removed:
        log(f"removed {removed} partial checkpoint write(s) left by an earlier run")
    for step, path in list_checkpoints(folder):
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            if "Weights only load failed" not in str(e):  # truncated, not refused
                log(f"checkpoint {path.name} is unreadable (UnpicklingError: {e}); trying an older one")
            else:
                log(_refusal(path, e))
            continue
        except Exception as e:
            log(f"checkpoint {path.name} is unreadable ({type(e).__name__}: {e}); trying an older one")
            continue
        if not isinstance(state, dict) or "model" not in state:
            log(f"checkpoint {path.name} is not a sagestack checkpoint; trying an older one")
            continue
        return step, state
    return None
