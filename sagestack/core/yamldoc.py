"""YAML documents that remember where every key and value came from, and overlay merging."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.errors import Location, Path_, SpecError, SpecIssue


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
    """Parse one YAML file (round-trip loader, so line numbers survive); SpecError on bad YAML.

    Parsed files are memoized by (path, mtime, size): synthesizing N environments reads the
    project file N times, and the round-trip parser is the slow part of loading a spec."""
    try:
        st = path.stat()
        key = (str(path.resolve()), display, st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _PARSED:
        return _PARSED[key].copy()
    doc = _parse(path, display)
    if key is not None:
        _PARSED[key] = doc.copy()
    return doc


_PARSED: dict[tuple[str, str, int, int], Document] = {}


# Bounds a spec file must stay within (a real one is a few kilobytes): larger files, deeper nesting
# or alias expansion beyond them are refused with a location instead of taking the machine's memory.
MAX_SPEC_BYTES = 1024 * 1024
MAX_NODES = 100_000  # keys, items and scalars after alias expansion
MAX_DEPTH = 64


def _issue(display: str, message: str, line: int = 1, column: int = 1) -> SpecError:
    return SpecError([SpecIssue(message, location=Location(display, line, column))])


def _line_col(data: bytes | str, offset: int) -> tuple[int, int]:
    head = data[:offset]
    newline = b"\n" if isinstance(head, bytes) else "\n"
    line = head.count(newline) + 1  # type: ignore[arg-type]
    return line, offset - (head.rfind(newline) + 1) + 1  # type: ignore[arg-type]


def _read_text(path: Path, display: str) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise _issue(
                display,
                f"the file is {size / 1024 / 1024:.1f} MiB; a spec is at most {MAX_SPEC_BYTES // 1024 // 1024} MiB "
                "of YAML (is this the right file?)",
            )
        data = path.read_bytes()
    except OSError as e:
        raise _issue(display, f"cannot read {display}: {e.strerror}") from None
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


def _parse(path: Path, display: str) -> Document:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    text = _read_text(path, display)
    try:
        raw = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        loc = Location(display, mark.line + 1, mark.column + 1) if mark else Location(display, 1, 1)
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise SpecError([SpecIssue(f"invalid YAML: {problem}", location=loc)]) from None
    except YAMLError as e:  # e.g. the reader's "unacceptable character": no mark, a position
        position = getattr(e, "position", None)
        line, column = _line_col(text, position) if isinstance(position, int) else (1, 1)
        raise _issue(display, f"invalid YAML: {e}".replace("\n", " "), line, column) from None
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
            doc.keys[child] = at(node.lc.key(k))
            doc.values[child] = at(node.lc.value(k))
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


def _under(paths: dict[Path_, Location], prefix: Path_) -> Iterator[Path_]:
    n = len(prefix)
    return (p for p in list(paths) if p[:n] == prefix)


def merge(base: Document, overlay: Document) -> Document:
    """Deep-merge `overlay` onto `base`: mappings merge key by key, everything else (lists
    included) is replaced. Each path keeps the location of the file that set it last."""
    out = Document(data=None, keys=dict(base.keys), values=dict(base.values), file=base.file)

    def walk(b: Any, o: Any, path: Path_) -> Any:
        if isinstance(b, dict) and isinstance(o, dict):
            merged = dict(b)
            for k, v in o.items():
                merged[k] = walk(b.get(k), v, (*path, k)) if k in b else _take(v, (*path, k))
            return merged
        return _take(o, path)

    def _take(value: Any, path: Path_) -> Any:
        for p in _under(out.keys, path):
            if p != path:
                del out.keys[p]
        for p in _under(out.values, path):
            del out.values[p]
        for p in _under(overlay.keys, path):
            out.keys[p] = overlay.keys[p]
        for p in _under(overlay.values, path):
            out.values[p] = overlay.values[p]
        return value

    out.data = walk(base.data, overlay.data, ())
    return out
