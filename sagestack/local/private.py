"""Local outputs that hold request data or models are the user's alone: folders 0700, files 0600.

The usual umask (022) makes files world-readable; these helpers set the modes themselves. The folders
sagestack creates are 0700 (a folder that existed is the user's business, unless it is sagestack's
own store); a file that existed with a wider mode is narrowed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

FOLDER = 0o700
FILE = 0o600


def private_dir(path: Path, *, narrow_existing: bool = False) -> Path:
    """`path` and any missing parents, each made 0700. A folder that existed is left as it is (it
    may be the user's own), unless `narrow_existing` says it is sagestack's (made before these modes)."""
    missing = []
    at = path
    while not at.exists():
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
            os.mkdir(folder, FOLDER)
            os.chmod(folder, FOLDER)  # mkdir's mode is masked by the umask; this one is not
    if narrow_existing and not missing and path.stat().st_mode & 0o777 != FOLDER:
        os.chmod(path, FOLDER)
    return path


def open_private(path: Path, mode: str = "a") -> IO[str]:
    """A text file opened for writing (`a` append, `w` truncate), created 0600, narrowed if wider."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    fd = os.open(path, flags, FILE)
    if os.fstat(fd).st_mode & 0o777 != FILE:
        os.fchmod(fd, FILE)
    return os.fdopen(fd, mode)


def write_private_bytes(path: Path, data: bytes) -> None:
    """`data` as the whole of `path`, a 0600 file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), FILE)
        f.write(data)


def make_private(path: Path) -> None:
    """An existing file narrowed to 0600 (one written before these modes), or nothing if absent."""
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_mode & 0o777 != FILE:
            path.chmod(FILE)
