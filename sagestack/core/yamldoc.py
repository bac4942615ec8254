"""YAML documents that remember where every key and value came from, and overlay merging."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.errors import Location, Path_, SpecError, SpecIssue, printable, yaml_syntax_issue
from sagestack.core.yamlevents import MAX_MERGES, merge_keys, path_at, read_events


@dataclass
class Document:
    """Plain data (dicts, lists, scalars) plus the location of each key and value by path."""

    data: Any
    keys: dict[Path_, Location] = field(default_factory=dict)
    values: dict[Path_, Location] = field(default_factory=dict)
    file: str = ""

    def locate(self, path: Path_, *, key: bool = False) -> Location | None:
        """The location of `path` (its key when key=True), else of the nearest enclosing entry."""
        p = tuple(path)
        while True:
            found = (
                (self.keys.get(p) or self.values.get(p)) if key else (self.values.get(p) or self.keys.get(p))
            )
            if found or not p:
                return found or (Location(self.file, 1, 1) if self.file else None)
            p = p[:-1]

    def copy(self) -> Document:
        """A copy to change freely: the data (plain dicts, lists, immutable scalars) copied, the
        locations (immutable) shared; copy.deepcopy rebuilds every Location, ~100x slower."""
        return Document(_copy_plain(self.data), dict(self.keys), dict(self.values), self.file)


def _copy_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_plain(v) for v in value]
    return value


def read_yaml(path: Path, display: str) -> Document:
    """Parse one YAML file with the line and column of every key and value (libyaml's events where
    the text allows, else ruamel's round-trip loader: core/yamlevents.py); SpecError on bad YAML.

    Parses are memoized by the file's bytes (read again each time: cheap, and never stale, where a
    file rewritten within the clock's tick keeps its mtime), failures included: a command that loads
    N environments parses the project file once, even one the parser refuses."""
    data = read_bounded(path, display)
    if data is None:
        raise _issue(display, f"cannot read {display}: {os.strerror(errno.ENOENT)}")
    key = (display, hashlib.blake2b(data, digest_size=20).digest())
    found = _PARSED.get(key)
    if found is None:
        try:
            found = _parse(data, display)
        except SpecError as e:
            found = e
        while len(_PARSED) >= _PARSED_KEPT:  # the oldest first (dicts keep their order)
            del _PARSED[next(iter(_PARSED))]
        _PARSED[key] = found
    if isinstance(found, SpecError):
        raise SpecError(found.issues) from None
    return found.copy()


_PARSED: dict[tuple[str, bytes], Document | SpecError] = {}
_PARSED_KEPT = 64  # files: a project's own are a handful; a long process (the tests) must not grow


# Bounds a spec file must stay within (a real one is a few kilobytes): larger files, deeper nesting
# or alias expansion beyond them are refused with a location instead of taking the machine's memory.
MAX_SPEC_BYTES = 1024 * 1024
MAX_NODES = 100_000  # keys, items and scalars after alias expansion
MAX_DEPTH = 64


def _issue(display: str, message: str, line: int = 1, column: int = 1, path: Path_ = ()) -> SpecError:
    return SpecError([SpecIssue(message, path=path, location=Location(display, line, column))])


def _line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    head = data[:offset]
    newline = b"\n" if isinstance(head, bytes) else "\n"
    line = head.count(newline) + 1  # type: ignore[arg-type]
    return line, offset - (head.rfind(newline) + 1) + 1  # type: ignore[arg-type]


_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def _not_regular(display: str, mode: int, what: str, fmt: str) -> SpecError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a file")
    return _issue(display, f"{display} is {kind}, not a regular file; {what} is a {fmt} text file")


def read_bounded(
    path: Path, display: str, limit: int = MAX_SPEC_BYTES, *, what: str = "a spec", fmt: str = "YAML"
) -> bytes | None:
    """The bytes of a config file, None when it does not exist; SpecError (located at its first
    line) for anything but a regular file after links are followed (a device reads forever, a FIFO
    blocks), for a file over `limit` bytes, or one that cannot be read. The size is judged on the
    bytes read, at most limit + 1 of them: /proc files and devices report st_size 0."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(display, st.st_mode, what, fmt)
        if not inside_project(path, display):
            raise _issue(
                display,
                f"{display} links to a file outside the project; {what} is a {fmt} file inside the "
                f"project: copy the file to {display} (or link to one inside the project)",
            )
        if st.st_size > limit:
            raise _too_large(
                display, f"{st.st_size / 1024 / 1024:.1f} MiB", f"{what} is at most {_mib(limit)} of {fmt}"
            )
        # O_NONBLOCK: should the file be swapped for a FIFO after the stat, open does not wait
        with open(path, "rb", buffering=0, opener=_nonblocking) as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise _not_regular(display, mode, what, fmt)
            chunks, left = [], limit + 1
            while left > 0 and (chunk := f.read(min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _issue(display, f"cannot read {display}: {e.strerror}") from None
    data = b"".join(chunks)
    if len(data) > limit:
        raise _too_large(display, f"more than {_mib(limit)}", f"{what} is at most {_mib(limit)} of {fmt}")
    return data


def inside_project(path: Path, display: str) -> bool:
    """Whether `path`, links followed, is inside the project: the folder `display` (the name a
    message gives the file: its path in the project) is relative to. A config file linked outside
    (/proc/self/environ, ~/.aws/credentials) is never read, nor shown in an error."""
    parts = Path(display).parts
    if Path(display).is_absolute() or ".." in parts or Path(path).parts[-len(parts) :] != parts:
        return True  # not named by its place in a project: nothing to hold it to
    root = os.path.realpath(Path(path).parents[len(parts) - 1])
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def _nonblocking(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))


def _mib(n: int) -> str:
    return f"{n // 1024 // 1024} MiB" if n % (1024 * 1024) == 0 else f"{n} bytes"


def _too_large(display: str, size: str, bound: str) -> SpecError:
    return _issue(display, f"the file is {size}; {bound} (is this the right file?)")


def _decode(data: bytes, display: str) -> str:
    if b"\x00" in data:
        line, column = _line_col(data, data.index(b"\x00"))
        raise _issue(display, "this is a binary file (a NUL byte), not YAML text", line, column)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = _line_col(data, e.start)
        raise _issue(
            display,
            f"the file is not UTF-8 (byte 0x{data[e.start]:02x}); save it as UTF-8",
            line,
            column,
        ) from None
    return text.removeprefix("\ufeff")


@functools.cache
def _depth_scanner() -> type:
    """ruamel's round-trip scanner, refusing a flow collection deeper than MAX_DEPTH when it meets
    its bracket. Without it `[[[…` costs the square of its depth before the composer's own limit
    sees a node: after each bracket the scanner looks ahead for a key, checking every bracket open."""
    from ruamel.yaml.composer import MaxDepthExceededError
    from ruamel.yaml.scanner import RoundTripScanner

    class DepthScanner(RoundTripScanner):
        def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
            if self.flow_level >= MAX_DEPTH:
                raise MaxDepthExceededError(None, None, "too deep", self.reader.get_mark())
            super().fetch_flow_collection_start(TokenClass, to_push)

    return DepthScanner


def _parse(data: bytes, display: str) -> Document:
    text = _decode(data, display)
    fast = read_events(text, display, MAX_DEPTH, MAX_NODES)
    if fast is not None:
        return Document({} if fast[0] is None else fast[0], fast[1], fast[2], display)
    return read_with_ruamel(text, display)


def read_with_ruamel(text: str, display: str) -> Document:
    """The reference reading of a spec's text (ruamel's round-trip loader): every construct YAML
    has, every error with ruamel's message and mark."""
    from ruamel.yaml.composer import MaxDepthExceededError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    merges = merge_keys(text)
    if len(merges) > MAX_MERGES:
        line, column = _line_col(text, merges[-1])
        raise _issue(
            display,
            f"more than {MAX_MERGES} merge keys (<<:); a real spec has a few dozen: "
            "merge fewer mappings, or write their keys out",
            line,
            column,
            path_at(text, line, column),
        )
    yaml = _ruamel()
    try:
        raw = yaml.load(text)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError):
        # ruamel's constructor failing on a value it resolved (2024-13-45 as a date, `!!int abc`)
        # or on a key it cannot hash (`? {a: {b: c}}`): find the node, for a location
        message, line, column = _unconstructable(text)
        raise _issue(display, f"invalid YAML: {message}", line, column) from None
    except MaxDepthExceededError as e:
        mark = e.problem_mark
        raise _issue(
            display, f"nested more than {MAX_DEPTH} levels deep", mark.line + 1, mark.column + 1
        ) from None
    except MarkedYAMLError as e:
        message, line, column, key = yaml_syntax_issue(e, text, lambda: _ruamel().compose(text))
        path = (*path_at(text, line, column), *key)
        raise _issue(display, message, line, column, path) from None
    except YAMLError as e:  # e.g. the reader's "unacceptable character": no mark, a position
        position = getattr(e, "position", None)
        line, column = _line_col(text, position) if isinstance(position, int) else (1, 1)
        character = getattr(e, "character", None)
        message = (
            f"a control character (U+{character:04X}) is not allowed in YAML text; is this the right "
            "file? (a text editor shows it; delete it)"
            if isinstance(character, int)
            else f"invalid YAML: {printable(str(e))}"
        )
        raise _issue(display, message, line, column, path_at(text, line, column)) from None
    except RecursionError:
        raise _issue(
            display, f"invalid YAML: nested deeper than the parser can follow (at most {MAX_DEPTH})"
        ) from None
    doc = Document(data=None, file=display)
    try:
        doc.data = _plain(raw, (), doc, _Budget())
    except _TooLarge as e:
        location = doc.locate(e.path) or Location(display, 1, 1)
        raise SpecError([SpecIssue(e.message, path=e.path, location=location)]) from None
    if doc.data is None:
        doc.data = {}
    return doc


def _ruamel() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.Scanner = _depth_scanner()
    yaml.max_depth = MAX_DEPTH + 1  # the composer counts the top node as 1; a path, as 0
    return yaml


def _unconstructable(text: str) -> tuple[str, int, int]:
    """The first value in `text` that ruamel composes but cannot construct, or the first key that
    is a mapping or list: what is wrong, and its line and column (the text composed before)."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    yaml = _ruamel()
    pending, seen, bad_key = [yaml.compose(text)], set(), None
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            try:
                yaml.constructor.construct_object(node, deep=True)
            except Exception as e:
                kind = str(node.tag).rsplit(":", 1)[-1]
                message = f"{node.value!r} cannot be read as {kind} ({printable(str(e))}); quote it to keep it as text"
                return message, node.start_mark.line + 1, node.start_mark.column + 1
            continue
        children = [c for pair in node.value for c in pair] if isinstance(node, MappingNode) else node.value
        if isinstance(node, MappingNode) and bad_key is None:
            bad_key = next((k for k, _ in node.value if not isinstance(k, ScalarNode)), None)
        if isinstance(node, (MappingNode, SequenceNode)):
            pending.extend(reversed(children))
    mark = bad_key.start_mark if bad_key is not None else None
    where = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    return "a mapping or list used as a key (a key is a name)", *where


class _TooLarge(Exception):
    def __init__(self, message: str, path: Path_) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


@dataclass
class _Budget:
    nodes: int = 0


def _plain(node: Any, path: Path_, doc: Document, budget: _Budget) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import ScalarString

    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        raise _TooLarge(
            f"the spec expands to more than {MAX_NODES} values (YAML aliases repeating anchors?); "
            "a real spec has a few hundred",
            path,
        )
    if len(path) > MAX_DEPTH:
        raise _TooLarge(f"nested more than {MAX_DEPTH} levels deep", path)
    here = doc.values.get(path) or Location(doc.file, 1, 1)

    def at(mark: Any) -> Location:
        # ruamel records no position for some nodes (tagged collections): use the parent's
        return Location(doc.file, mark[0] + 1, mark[1] + 1) if mark else here

    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for k, v in node.items():
            child = (*path, str(k))
            written = _written_in(node, k)  # the map the key is written in: a merged key's anchor
            doc.keys[child] = at(written.lc.key(k))
            doc.values[child] = at(written.lc.value(k))
            out[str(k)] = _plain(v, child, doc, budget)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, v in enumerate(node):
            child = (*path, i)
            doc.values[child] = at(node.lc.item(i))
            items.append(_plain(v, child, doc, budget))
        return items
    if isinstance(node, ScalarString):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, (str, bytes)) or hasattr(node, "isoformat"):
        return node
    # anything else the round-trip loader builds (tagged values, sets, ordered maps): its text
    return str(node)


def _written_in(node: Any, key: Any) -> Any:
    """The mapping `key` of `node` is written in: `node` itself, or for a key a merge key
    (`<<: *a`, `<<: [*a, *b]`) brought in, the first merged mapping that has it, as YAML 1.1 merges
    (own keys first, then each merged mapping in order; merged mappings may merge others)."""
    if key in (node.lc.data or ()):
        return node
    for merged in getattr(node, "merge", ()):
        if key in merged:
            return _written_in(merged, key)
    return node  # not found (cannot happen for a key of node.items()): the mapping itself


def _paths(value: Any, path: Path_) -> Iterator[Path_]:
    """`path` and the path of every key and item of the plain `value` found there."""
    stack = [(path, value)]
    while stack:
        here, v = stack.pop()
        yield here
        if isinstance(v, dict):
            stack.extend(((*here, k), child) for k, child in v.items())
        elif isinstance(v, list):
            stack.extend(((*here, i), child) for i, child in enumerate(v))


def merge(base: Document, overlay: Document) -> Document:
    """Deep-merge `overlay` onto `base`: mappings merge key by key, everything else (lists
    included) is replaced. Each path keeps the location of the file that set it last.

    Linear in the two documents: a replaced value forgets the locations of the base's value and
    takes the overlay's, each found by walking those two values (never by scanning every path)."""
    out = Document(data=None, keys=dict(base.keys), values=dict(base.values), file=base.file)

    def walk(b: Any, o: Any, path: Path_) -> Any:
        if isinstance(b, dict) and isinstance(o, dict):
            merged = dict(b)
            for k, v in o.items():
                merged[k] = walk(b[k], v, (*path, k)) if k in b else take(None, v, (*path, k))
            return merged
        return take(b, o, path)

    def take(old: Any, value: Any, path: Path_) -> Any:
        for p in _paths(old, path) if isinstance(old, (dict, list)) else (path,):
            if p != path:
                out.keys.pop(p, None)
            out.values.pop(p, None)
        for p in _paths(value, path) if isinstance(value, (dict, list)) else (path,):
            if p in overlay.keys:
                out.keys[p] = overlay.keys[p]
            if p in overlay.values:
                out.values[p] = overlay.values[p]
        return value

    out.data = walk(base.data, overlay.data, ())
    return out
