"""A job's source directory as a deterministic sourcedir.tar.gz.

Fixed member order, mtimes, owners, modes and gzip header: the archive's bytes (and so the CDK
asset hash and the job's content hash) change only when the code does, whoever builds it, wherever.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

EXCLUDED_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ipynb_checkpoints"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
_EPOCH = 0


@dataclass(frozen=True)
class SourceArchive:
    data: bytes
    sha256: str
    files: tuple[str, ...]


def _members(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root)
        if any(part in EXCLUDED_DIRS for part in rel.parts) or path.name.endswith(EXCLUDED_SUFFIXES):
            continue
        if path.is_symlink():
            continue  # a link out of the tree would make the archive depend on the machine
        out.append(path)
    return out


def pack_source_dir(root: Path) -> SourceArchive:
    """Pack `root` (files relative to it, as the SageMaker SDK does) into tar.gz bytes."""
    raw = io.BytesIO()
    files = []
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _members(root):
            rel = path.relative_to(root).as_posix()
            info = tarfile.TarInfo(rel)
            info.mtime = _EPOCH
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_dir():
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                content = path.read_bytes()
                info.size = len(content)
                info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                tar.addfile(info, io.BytesIO(content))
                files.append(rel)
    out = io.BytesIO()
    # mtime=0 and no file name in the gzip header: identical bytes for identical trees.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=_EPOCH, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    data = out.getvalue()
    return SourceArchive(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(files))


def dockerfile_fingerprint(folder: Path, build_args: dict[str, str], target: str | None) -> str:
    """What a Dockerfile image is made of: every file of its build folder, the build args and the
    target (sha256). Independent of CDK, so plan, lock and synth agree on it."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if any(part in (".git", "__pycache__") for part in path.relative_to(folder).parts):
            continue
        h.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    h.update(json.dumps({"build_args": build_args, "target": target}, sort_keys=True).encode())
    return h.hexdigest()
