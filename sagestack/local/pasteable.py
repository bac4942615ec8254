"""Commands sagestack prints for a user to paste (`mlflow ui …`, `tensorboard --logdir …`), written
so that they work as printed in the shell the user ran sagestack from: paths relative to that folder
when they lie below it, and this environment's program by its path when the shell would find
another one first (or none: sagestack run as `.venv/bin/sagestack` without activating)."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path


def shown_path(path: Path, cwd: Path | None = None) -> Path:
    """`path` as the user in `cwd` (default: here) would type it."""
    here = (cwd or Path.cwd()).resolve()
    resolved = path.resolve()
    return resolved.relative_to(here) if resolved.is_relative_to(here) else resolved


def program(name: str) -> str | None:
    """How to call this environment's `name` from the user's shell: the bare name when the shell
    finds this one, its path when it would find another or none; None when this environment (and
    the shell) have no such program."""
    ours = Path(sys.executable).parent / name
    found = shutil.which(name)
    if ours.exists() and (found is None or Path(found).resolve() != ours.resolve()):
        return shlex.quote(str(ours))
    return name if found is not None else None
