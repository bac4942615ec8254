"""A job's source directory as a deterministic sourcedir.tar.gz, and what goes into it.

Fixed member order, mtimes, owners, modes and gzip header: the archive's bytes (and so the CDK
asset hash and the job's content hash) change only when the code does, whoever builds it, wherever.

What is packed (the archive is uploaded to S3 and unpacked in every training container):
- every file and folder of the source folder except what is ignored. Ignored by default: dotfiles
  and dot-folders (`.env`, `.git`, `.venv`, `.pytest_cache` …), `__pycache__/`, `*.pyc`, `*.pyo`,
  and files that look like secrets (SECRET_PATTERNS: `.env*`, `*.pem`, `*.key`, `id_rsa*`,
  `credentials`, `*.p12` …). A `.sagestackignore` in the folder adds gitignore-style patterns
  (`#` comments, `*`, `?`, `[…]`, `**`, a leading `/` anchors, a trailing `/` means folders, `!`
  re-includes; a file inside an ignored folder cannot be re-included, as in git), read after the
  defaults, so `!` can re-include a default.
- a secret-looking file that is packed all the same (re-included with `!`, or reached through a
  symlink: `settings.txt -> .env` packs `.env`'s content, so a link is judged by every name on its way
  and by its target's path in the folder too) is named by `secret_files` (the `source-dir-secrets`
  rule warns about each);
- a symlink to a file inside the folder is packed as that file's content; a symlink that leads out
  of the folder, to a folder, or nowhere is refused (`problems`; `pack_source_dir` raises
  SourceDirError, the `source-dir-contents` rule reports each at the job's source_dir).
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

IGNORE_FILE = ".sagestackignore"
SECRET_PATTERNS = (
    ".env*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "credentials",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    ".netrc",
    ".pypirc",
    ".npmrc",
)
DEFAULT_IGNORED = (".*", "__pycache__/", "*.pyc", "*.pyo", *SECRET_PATTERNS)
_EPOCH = 0
NOTHING = "(?!)"  # a regular expression no path matches


class SourceDirError(ValueError):
    """The source folder cannot be packed as it is; the message names each file and why."""


@dataclass(frozen=True)
class SourceArchive:
    data: bytes
    sha256: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class IgnorePattern:
    text: str  # as written, for messages
    source: str  # "the defaults" or the ignore file's name
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool


def parse_ignore(lines: list[str], source: str = IGNORE_FILE) -> list[IgnorePattern]:
    """gitignore's pattern format (git-scm.com/docs/gitignore), relative to the source folder."""
    patterns = []
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.endswith("\\ "):  # trailing spaces are dropped unless escaped ("\ ")
            line = line.rstrip(" ")
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        body = line[1:] if negated else line
        folders_only = body.endswith("/")
        body = body.rstrip("/")
        if not body:
            continue
        anchored = "/" in body
        body = body.lstrip("/")
        prefix = "" if anchored or body.startswith("**/") else "(?:.*/)?"
        patterns.append(
            IgnorePattern(
                line, source, re.compile(prefix + _translate(body), re.DOTALL), negated, folders_only
            )
        )
    return patterns


def _translate(glob: str) -> str:
    """A gitignore glob (one path relative to the folder) as a regular expression."""
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i) and (i == 0 or glob[i - 1] == "/"):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i) and i + 2 == n and (i == 0 or glob[i - 1] == "/"):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        elif c == "\\" or (c == "[" and _class_end(glob, i) < 0):
            return NOTHING  # a trailing '\' or an unclosed '[': git's wildmatch matches no path
        elif c == "[":
            end = _class_end(glob, i)
            inner = glob[i + 1 : end]
            if inner[:1] in ("!", "^"):
                inner = "^" + inner[1:]
            out.append("(?!/)[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _class_end(glob: str, start: int) -> int:
    """Where the bracket expression opened at `start` closes (a `]` right after `[` or `[!` is a
    member), or -1 when it does not (then the pattern matches nothing, as in git)."""
    first = start + 1
    if glob[first : first + 1] in ("!", "^"):
        first += 1
    return glob.find("]", first + 1)


def ignore_patterns(root: Path) -> list[IgnorePattern]:
    """The defaults, then the folder's .sagestackignore (later patterns win)."""
    patterns = parse_ignore(list(DEFAULT_IGNORED), "the defaults")
    own = root / IGNORE_FILE
    if own.is_file():
        patterns += parse_ignore(own.read_text(encoding="utf-8", errors="replace").splitlines())
    return patterns


def ignored_by(patterns: list[IgnorePattern], rel: str, is_dir: bool) -> IgnorePattern | None:
    """The pattern that ignores `rel` (a path relative to the folder), or None when it is packed."""
    decided: IgnorePattern | None = None
    for p in patterns:
        if p.folders_only and not is_dir:
            continue
        if p.regex.fullmatch(rel):
            decided = None if p.negated else p
    return decided


@dataclass(frozen=True)
class LinkAlias:
    """A packed symlink: its path in the archive, its target's path in the folder (whose content
    is packed), and the name each link on the way points at."""

    rel: str
    target: str
    hops: tuple[str, ...]


def looks_secret(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, s) for s in SECRET_PATTERNS)


@dataclass(frozen=True)
class SourceSelection:
    """What pack_source_dir packs from a folder, and what it cannot."""

    members: tuple[tuple[str, Path, bool], ...]  # (path in the archive, what to read, is a folder)
    problems: tuple[str, ...]  # symlinks that lead out, to a folder, or nowhere
    patterns: tuple[IgnorePattern, ...]
    links: tuple[LinkAlias, ...] = ()  # the packed symlinks

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(rel for rel, _, is_dir in self.members if not is_dir)

    def link(self, rel: str) -> LinkAlias | None:
        """The packed symlink at `rel`, or None for a plain file."""
        return next((a for a in self.links if a.rel == rel), None)

    def secret_files(self) -> tuple[str, ...]:
        """Packed files that look like secrets: by their own name (re-included past the defaults),
        or, for a symlink, by the name of any link on its way or of any part of its target's path
        in the folder (`settings.txt -> .env` packs the .env file's content)."""
        out = []
        for rel in self.files:
            names = [rel.rsplit("/", 1)[-1]]
            alias = self.link(rel)
            if alias is not None:
                names += [*alias.hops, *PurePosixPath(alias.target).parts]
            if any(looks_secret(n) for n in names):
                out.append(rel)
        return tuple(out)

    def excluded(self, rel: str) -> IgnorePattern | None:
        """The pattern that keeps `rel` (a file's path in the folder) out of the archive, if any."""
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            found = ignored_by(list(self.patterns), "/".join(parts[:depth]), depth < len(parts))
            if found is not None:
                return found
        return None


def select_source_files(root: Path) -> SourceSelection:
    """Walk `root` as git walks a work tree: an ignored folder is not entered."""
    patterns = ignore_patterns(root)
    real_root = root.resolve()
    members: list[tuple[str, Path, bool]] = []
    links: list[LinkAlias] = []
    problems: list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        for entry in os.scandir(folder):
            path = Path(entry.path)
            rel = path.relative_to(root).as_posix()
            link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
            if ignored_by(patterns, rel, is_dir or (link and path.is_dir())) is not None:
                continue
            if link:
                problem = _link_problem(path, rel, real_root)
                if problem:
                    problems.append(problem)
                else:
                    members.append((rel, path.resolve(), False))
                    links.append(_alias(path, rel, real_root))
            elif is_dir:
                members.append((rel, path, True))
                pending.append(path)
            elif entry.is_file(follow_symlinks=False):
                members.append((rel, path, False))
    members.sort(key=lambda m: m[0])
    links.sort(key=lambda a: a.rel)
    return SourceSelection(tuple(members), tuple(sorted(problems)), tuple(patterns), tuple(links))


def _alias(path: Path, rel: str, real_root: Path) -> LinkAlias:
    """A symlink inside the folder (`_link_problem` found none): each hop's name and the target."""
    hops: list[str] = []
    current = path
    while current.is_symlink() and len(hops) < 40:  # the kernel's own limit on a chain of links
        target = os.readlink(current)
        hops.append(PurePosixPath(target).name)
        current = current.parent / target
    return LinkAlias(rel, path.resolve().relative_to(real_root).as_posix(), tuple(hops))


def _link_problem(path: Path, rel: str, real_root: Path) -> str | None:
    """Why a symlink cannot be packed, or None: a link to a file inside the folder is packed as it."""
    target = os.readlink(path)
    resolved = path.resolve()
    if not resolved.exists():
        return f"{rel} is a symlink to {target}, which does not exist"
    if not resolved.is_relative_to(real_root):
        return (
            f"{rel} is a symlink to {target}, outside the source folder: the archive would hold a file "
            "from this machine only; copy the file in, or ignore the link in .sagestackignore"
        )
    if resolved.is_dir():
        return f"{rel} is a symlink to the folder {target}: link each file, or move the folder here"
    return None


def pack_source_dir(root: Path) -> SourceArchive:
    """Pack `root` (files relative to it, as the SageMaker SDK does) into tar.gz bytes."""
    selection = select_source_files(root)
    if selection.problems:
        raise SourceDirError(f"{root} cannot be packed: " + "; ".join(selection.problems))
    import tarfile  # only where a job's code is packed: a synth of the foundation packs none

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, path, is_dir in selection.members:
            info = tarfile.TarInfo(rel)
            info.mtime = _EPOCH
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if is_dir:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                content = path.read_bytes()
                info.size = len(content)
                info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                tar.addfile(info, io.BytesIO(content))
    out = io.BytesIO()
    # mtime=0 and no file name in the gzip header: identical bytes for identical trees.
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=_EPOCH, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    data = out.getvalue()
    return SourceArchive(data=data, sha256=hashlib.sha256(data).hexdigest(), files=selection.files)


def unpack_source_archive(data: bytes, dest: Path) -> None:
    """The archive's files under `dest`, as the container unpacks sourcedir.tar.gz (members that
    would leave `dest` refused: tarfile's data filter)."""
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        tar.extractall(dest, filter="data")


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
