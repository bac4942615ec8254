"""YAML documents that remember where every key and value came from, and overlay merging."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.spec.errors import Location, Path_, SpecError, SpecIssue


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
        return copy.deepcopy(_PARSED[key])
    doc = _parse(path, display)
    if key is not None:
        _PARSED[key] = copy.deepcopy(doc)
    return doc


_PARSED: dict[tuple[str, str, int, int], Document] = {}


def _parse(path: Path, display: str) -> Document:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError

    yaml = YAML(typ="rt")
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(
            [SpecIssue(f"cannot read {display}: {e.strerror}", location=Location(display, 1, 1))]
        ) from None
    try:
        raw = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        loc = Location(display, mark.line + 1, mark.column + 1) if mark else Location(display, 1, 1)
        problem = " ".join(str(x) for x in (e.context, e.problem) if x)
        raise SpecError([SpecIssue(f"invalid YAML: {problem}", location=loc)]) from None
    doc = Document(data=None, file=display)
    doc.data = _plain(raw, (), doc)
    if doc.data is None:
        doc.data = {}
    return doc


def _plain(node: Any, path: Path_, doc: Document) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import ScalarString

    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for k, v in node.items():
            child = (*path, str(k))
            kl, kc = node.lc.key(k)
            vl, vc = node.lc.value(k)
            doc.keys[child] = Location(doc.file, kl + 1, kc + 1)
            doc.values[child] = Location(doc.file, vl + 1, vc + 1)
            out[str(k)] = _plain(v, child, doc)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, v in enumerate(node):
            child = (*path, i)
            line, col = node.lc.item(i)
            doc.values[child] = Location(doc.file, line + 1, col + 1)
            items.append(_plain(v, child, doc))
        return items
    if isinstance(node, ScalarString):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


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
