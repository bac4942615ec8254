"""The folder of a local training run, and what `--fresh` may remove from it.

Every run folder sagestack makes carries a marker, `.sagestack-run` (what made it, for which job,
when), and only a folder with the marker is a run folder. A run takes a marked folder, a new or empty
folder, or (without `--fresh`) one holding nothing but `checkpoints/` copied there to resume from; it
marks it. Any other folder (the project root, a home folder, a file, a folder that merely holds
`model/` and `checkpoints/`) is refused before anything is written or removed: a run would write
model/, checkpoints/ … into it and replace its model/, and `--fresh` would delete what sagestack did
not write. Entry names prove nothing: a folder of the user's may be called `model/` too. `--fresh`
removes the run's own entries (RUN_ENTRIES) from a marked folder and leaves anything else alone.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from sagestack.local.errors import LocalRunError

MARKER = ".sagestack-run"
# What a run writes in its folder: the request, the code, the simulated hosts, the shared checkpoints
# (and, beside them, writes in progress: training_src/checkpointing.py), the logs, the model, the figures.
RUN_ENTRIES = (
    MARKER,
    "request.json",
    "sourcedir.tar.gz",
    "hosts",
    "sandbox",  # the drivers contract's per-host sandbox files (local/drivers/sandbox.py)
    "checkpoints",
    ".checkpoints.partial",
    "logs",
    "model",
    "metrics.json",
    "training_curves.png",
)
SHOWN = 6  # entries named in a refusal
# What an unmarked folder may hold and still be taken (without --fresh): checkpoints to resume from.
RESUMABLE = frozenset({"checkpoints"})


class RunFolderRefused(LocalRunError):
    """--workdir names a folder sagestack did not make for a run (exit 2: a usage error)."""


def _refuse(folder: Path, why: str, fresh: bool, default: Path) -> RunFolderRefused:
    consequence = (
        "--fresh would delete them"
        if fresh
        else "a run would write into it (model/, checkpoints/, hosts/, logs/ …) and replace its model/"
    )
    if folder == default:
        way = (
            "If it is the folder of a run by an earlier sagestack, move what you want to keep out "
            "of it and remove it yourself, or give --workdir a new or empty folder"
        )
        return RunFolderRefused(
            f"{folder}: refused: {why}; {consequence}. Nothing was written or removed. {way}"
        )
    return RunFolderRefused(
        f"--workdir {folder}: refused: {why}; {consequence}. Nothing was written or removed. "
        f"Give --workdir a new or empty folder (the default is {default}), or remove what you want "
        "gone yourself"
    )


def _foreign(entries: set[str], fresh: bool) -> bool:
    """Whether an unmarked, non-empty folder is not the run's to take: with --fresh always (it would
    remove what sagestack did not mark), otherwise unless it holds only checkpoints to resume from."""
    return fresh or not entries <= RESUMABLE


def claim(folder: Path, *, fresh: bool, job: str, default: Path) -> Path:
    """The run's folder, made (or taken) and marked; with `fresh`, its earlier run's entries removed.
    RunFolderRefused for a folder sagestack did not make for a run."""
    if folder.exists() and not folder.is_dir():
        raise _refuse(folder, "it is a file, not a folder", fresh, default)
    entries = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    if entries and MARKER not in entries and _foreign(entries, fresh):
        listed = sorted(f"{name}/" if (folder / name).is_dir() else name for name in entries)
        more = f" (and {len(listed) - SHOWN} more)" if len(listed) > SHOWN else ""
        why = (
            f"it has no {MARKER} marker (sagestack did not make it for a run) and holds "
            f"{', '.join(listed[:SHOWN])}{more}"
        )
        raise _refuse(folder, why, fresh, default)
    if fresh:
        for name in RUN_ENTRIES:
            path = folder / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / MARKER).exists():
        record = {
            "made_by": "sagestack local train",
            "job": job,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "note": "sagestack local train --fresh removes this folder's run entries; nothing else",
        }
        (folder / MARKER).write_text(json.dumps(record, indent=2) + "\n")
    return folder
