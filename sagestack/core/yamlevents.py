"""The fast way to read a spec: libyaml's events (PyYAML's C parser) built straight into plain data
and the location of every key and value — what ruamel's round-trip loader gives, for the YAML a spec
is written in, at a small part of the cost (ruamel's scanner is pure Python: a 1 MiB spec took
seconds).

ruamel stays the reference. Anything outside the plain subset — a tag, an anchor or alias, a merge
key, a key that is not a string, a key given twice, a timestamp, a number not written in decimal, a
directive, a second document, an empty value, a tab, nesting or size past the limits, Unicode line
breaks, a syntax error —
makes `read_events` answer None, and the caller reads the text with ruamel, whose values, messages
and locations are then exactly those of before. tests/unit/test_spec_fuzz.py holds the two readers
equal on every text both accept."""

from __future__ import annotations

import re
from typing import Any

from sagestack.core.errors import Location, Path_

_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_NOT_PLAIN_FLOAT = re.compile(r"[_:]|inf|nan", re.IGNORECASE)
# Line breaks for YAML 1.1 (libyaml) but not for YAML 1.2 (ruamel), so lines would be counted
# apart; and the tab, which libyaml accepts in places where ruamel refuses it.
_OTHER_READINGS = ("\x85", "\u2028", "\u2029", "\t")


class _Unsupported(Exception):
    """Outside the subset: ruamel reads this text."""


def read_events(
    text: str, file: str, max_depth: int, max_nodes: int
) -> tuple[Any, dict[Path_, Location], dict[Path_, Location]] | None:
    """(data, key locations, value locations) of one YAML document, or None: read it with ruamel."""
    try:
        import yaml  # type: ignore[import-untyped]
        from yaml.cyaml import CParser  # type: ignore[import-untyped]  # ImportError without libyaml
    except ImportError:
        return None
    if any(c in text for c in _OTHER_READINGS):
        return None
    parser = CParser(text)
    try:
        return _Builder(file, max_depth, max_nodes, _resolvers()).build(parser, yaml)
    except (_Unsupported, yaml.YAMLError):
        return None
    finally:
        parser.dispose()


_RESOLVERS: dict[str, list[tuple[str, Any]]] = {}


def _resolvers() -> dict[str, list[tuple[str, Any]]]:
    """ruamel's own implicit resolvers for YAML 1.2, so that a plain scalar gets the type ruamel
    would give it: first character -> [(kind, the pattern's match)] (those for any character last)."""
    if not _RESOLVERS:
        from ruamel.yaml.resolver import VersionedResolver

        table = VersionedResolver().versioned_resolver
        for first in [k for k in table if k is not None]:
            for tag, pattern in table[first] + table.get(None, []):
                _RESOLVERS.setdefault(first, []).append((str(tag).rsplit(":", 1)[-1], pattern.match))
    return _RESOLVERS


class _Builder:
    def __init__(
        self, file: str, max_depth: int, max_nodes: int, resolvers: dict[str, list[tuple[str, Any]]]
    ) -> None:
        self.file = file
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.resolvers = resolvers
        self.keys: dict[Path_, Location] = {}
        self.values: dict[Path_, Location] = {}
        self.nodes = 0

    def build(self, parser: Any, yaml: Any) -> tuple[Any, dict[Path_, Location], dict[Path_, Location]]:
        root: Any = None
        documents = 0
        scalar, mapping, sequence = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
        ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
        # each open collection: [container, its path, the key awaiting its value (mappings)]
        stack: list[list[Any]] = []
        while True:
            event = parser.get_event()
            kind = type(event)
            if kind is scalar:
                value: Any = self.scalar(event)
            elif kind is mapping or kind is sequence:
                value = {} if kind is mapping else []
            elif kind in ends:
                stack.pop()
                continue
            elif kind is yaml.StreamEndEvent:
                return root, self.keys, self.values
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1 or event.version or event.tags:
                    raise _Unsupported
                continue
            elif kind is yaml.StreamStartEvent or kind is yaml.DocumentEndEvent:
                continue
            else:
                raise _Unsupported  # an alias
            if event.anchor is not None or event.tag is not None:
                raise _Unsupported
            if not stack:
                root = value
                path: Path_ = ()
            else:
                placed = self.place(stack[-1], value, event)
                if placed is None:  # a key: its value comes next
                    continue
                path = placed
            if kind is not scalar:
                stack.append([value, path, _NO_KEY])

    def place(self, frame: list[Any], value: Any, event: Any) -> Path_ | None:
        container, path, key = frame
        mark = event.start_mark
        if isinstance(container, dict):
            if key is _NO_KEY:
                if not isinstance(value, str) or value in container:
                    raise _Unsupported  # a collection, number, boolean or null as a key; a duplicate
                frame[2] = value
                self.keys[(*path, value)] = Location(self.file, mark.line + 1, mark.column + 1)
                return None
            frame[2] = _NO_KEY
            child: Path_ = (*path, key)
            container[key] = value
        else:
            child = (*path, len(container))
            container.append(value)
        self.nodes += 1
        if len(child) > self.max_depth or self.nodes >= self.max_nodes:
            raise _Unsupported  # ruamel's reading reports it
        self.values[child] = Location(self.file, mark.line + 1, mark.column + 1)
        return child

    def scalar(self, event: Any) -> Any:
        value = event.value
        if event.style:  # quoted, literal or folded (a plain scalar has none): a string
            return value
        if not value:
            raise _Unsupported  # an empty value: ruamel places it at the next token, libyaml here
        kind = "str"
        for candidate, match in self.resolvers.get(value[0], ()):
            if match(value):
                kind = candidate
                break
        if kind == "str":
            return value
        if kind == "null":
            return None
        if kind == "bool":
            return value.lower() == "true"
        if kind == "int" and _INT.match(value):
            return int(value)
        if kind == "float" and not _NOT_PLAIN_FLOAT.search(value):
            return float(value)
        raise _Unsupported  # timestamps, merge keys, ints in other bases or with underscores …


_NO_KEY = object()
