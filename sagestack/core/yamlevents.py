"""The fast way to read a spec: libyaml's events (PyYAML's C parser) built straight into plain data
and the location of every key and value — what ruamel's round-trip loader gives, for the YAML a spec
is written in, at a small part of the cost (ruamel's scanner is pure Python: a 1 MiB spec took
seconds).

ruamel stays the reference. Anchors, aliases and merge keys (`<<: *a`, `<<: [*a, *b]`) are read
here as ruamel reads them: an alias's content, and a merged key, located where the anchor's is
written; own keys first and kept over merged ones, then each merged mapping's keys in order. Anything
else outside the plain subset — a tag, a merge key followed by anything but aliases, a key that is
not a string, a key given twice, a timestamp, a number not written in decimal, a directive, a second
document, an empty value, a tab, nesting or size past the limits, Unicode line breaks, a syntax
error — makes `read_events` answer None, and the caller reads the text with ruamel, whose values,
messages and locations are then exactly those of before. tests/unit/test_spec_fuzz.py holds the two readers
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


# Merge keys a spec may hold: ruamel's reading costs the square of the mappings merging one anchor
# (each checks it is not listed yet by comparing itself with every one listed: 4,000 took 51 s), so
# a text with more is refused by it, located, and declined here.
MAX_MERGES = 1000
_MERGE_KEY = re.compile(r"(?:^|(?<=[\s,{\[?]))<<[ \t]*:(?=\s|$)", re.M)


def merge_keys(text: str) -> list[int]:
    """The offsets of what may be a merge key (`<<:`) in `text`, found before parsing it: at most
    MAX_MERGES + 1 of them (a quoted "<<" is no merge key; text holding ' <<: ' may count once)."""
    found = []
    for m in _MERGE_KEY.finditer(text):
        found.append(m.start())
        if len(found) > MAX_MERGES:
            break
    return found


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
    if any(c in text for c in _OTHER_READINGS) or len(merge_keys(text)) > MAX_MERGES:
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


class _Anchored:
    """An anchored node as written: its value, and the locations below it by relative path (an
    alias repeats them: ruamel locates an alias's content where the anchor's is written)."""

    def __init__(self, value: Any, location: Location, keys: list[Any], values: list[Any]) -> None:
        self.value = value
        self.location = location
        self.keys = keys  # [(relative path, Location)]
        self.values = values
        self.nodes = 1 + len(values)  # the node itself and every key's value and item below it
        self.depth = max((len(p) for p, _ in values), default=0)
        self._by_key: dict[Any, tuple[list[Any], list[Any]]] | None = None

    def below(self, key: str) -> tuple[list[Any], list[Any]]:
        """The locations of one key of an anchored mapping and of what is below it, relative to
        the mapping (grouped once: a merge takes every key)."""
        if self._by_key is None:
            self._by_key = {}
            for index, logged in enumerate((self.keys, self.values)):
                for entry in logged:
                    self._by_key.setdefault(entry[0][0], ([], []))[index].append(entry)
        return self._by_key[key]


class _Frame:
    """An open collection: a mapping's key awaiting its value, and its merge keys' mappings; the
    anchor it is written with, and where its locations start in the logs."""

    __slots__ = ("anchor", "container", "key", "location", "logged", "merges", "path")

    def __init__(self, container: Any, path: Path_, anchor: str | None, logged: tuple[int, int]) -> None:
        self.container = container
        self.path = path
        self.key: Any = _NO_KEY
        self.merges: list[_Anchored] | None = None  # after a merge key: the mappings it merges
        self.anchor = anchor
        self.logged = logged
        self.location: Location | None = None


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
        # every location recorded, in order, while an anchored collection is open (`capturing` of
        # them): an anchored collection's are the slice since its start
        self.key_log: list[tuple[Path_, Location]] = []
        self.value_log: list[tuple[Path_, Location]] = []
        self.capturing = 0
        self.anchors: dict[str, _Anchored] = {}
        self.nodes = 0

    def build(self, parser: Any, yaml: Any) -> tuple[Any, dict[Path_, Location], dict[Path_, Location]]:
        root: Any = None
        documents = 0
        scalar, mapping, sequence = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
        ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
        stack: list[_Frame] = []
        while True:
            event = parser.get_event()
            kind = type(event)
            if kind is scalar:
                value: Any = self.scalar(event)
            elif kind is mapping or kind is sequence:
                value = {} if kind is mapping else []
            elif kind in ends:
                self.close(stack.pop())
                continue
            elif kind is yaml.AliasEvent:
                if not stack:
                    raise _Unsupported
                self.alias(stack[-1], event)
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
                raise _Unsupported
            if event.tag is not None:
                raise _Unsupported
            if stack and stack[-1].key is _MERGE:  # `<<:` then a list of aliases, or refused
                if kind is not sequence or event.anchor is not None:
                    raise _Unsupported  # a mapping written in place, a scalar: ruamel reads it
                logged = (len(self.key_log), len(self.value_log))
                stack.append(_Frame(_MergeList(stack[-1]), stack[-1].path, None, logged))
                continue
            if not stack:
                if event.anchor is not None:
                    raise _Unsupported  # nothing can repeat the whole document but itself
                root = value
                path: Path_ = ()
            else:
                placed = self.place(stack[-1], value, event)
                if placed is None:  # a key: its value comes next
                    continue
                path = placed
            if kind is not scalar:
                stack.append(_Frame(value, path, event.anchor, (len(self.key_log), len(self.value_log))))
                if event.anchor is not None:  # an alias inside it would be recursive: refused
                    self.capturing += 1
                    self.anchors.pop(event.anchor, None)
                    stack[-1].location = self.values[path]
            elif event.anchor is not None:
                self.anchors[event.anchor] = _Anchored(value, self.values[path], [], [])

    def place(self, frame: _Frame, value: Any, event: Any) -> Path_ | None:
        container, path, key = frame.container, frame.path, frame.key
        mark = event.start_mark
        if isinstance(container, dict):
            if key is _NO_KEY:
                if event.anchor is not None:
                    raise _Unsupported  # an anchored key
                if value is _MERGE:
                    if frame.merges is not None:
                        raise _Unsupported  # a second merge key: ruamel's error
                    frame.key, frame.merges = _MERGE, []
                    return None
                if not isinstance(value, str) or value in container:
                    raise _Unsupported  # a collection, number, boolean or null as a key; a duplicate
                frame.key = value
                self.key_at((*path, value), Location(self.file, mark.line + 1, mark.column + 1))
                return None
            if value is _MERGE:
                raise _Unsupported  # `<<` as a value
            frame.key = _NO_KEY
            child: Path_ = (*path, key)
            container[key] = value
        elif value is _MERGE or (isinstance(container, _MergeList)):
            raise _Unsupported  # `<<` as an item; a merge list holding anything but aliases
        else:
            child = (*path, len(container))
            container.append(value)
        self.nodes += 1  # (count and value_at, inline: this runs for every value of the file)
        if len(child) > self.max_depth or self.nodes >= self.max_nodes:
            raise _Unsupported  # ruamel's reading reports it
        location = Location(self.file, mark.line + 1, mark.column + 1)
        self.values[child] = location
        if self.capturing:
            self.value_log.append((child, location))
        return child

    def alias(self, frame: _Frame, event: Any) -> None:
        """`*name`: the anchored value again (a copy), its content located where it was written;
        a merge key's mapping, or one of its list."""
        anchored = self.anchors.get(event.anchor)
        if anchored is None:
            raise _Unsupported  # an alias of a collection still open (recursive)
        container, key = frame.container, frame.key
        if key is _MERGE:  # `<<: *a`
            if not isinstance(anchored.value, dict) or frame.merges is None:
                raise _Unsupported
            frame.merges.append(anchored)
            frame.key = _NO_KEY
            return
        if isinstance(container, _MergeList):  # `<<: [*a, *b]`
            if not isinstance(anchored.value, dict):
                raise _Unsupported
            container.merged.append(anchored)
            return
        if isinstance(container, dict):
            if key is _NO_KEY:
                raise _Unsupported  # an alias as a key
            frame.key = _NO_KEY
            child: Path_ = (*frame.path, key)
            container[key] = self.copy_of(anchored, child)
        else:
            child = (*frame.path, len(container))
            container.append(self.copy_of(anchored, child))

    def copy_of(self, anchored: _Anchored, path: Path_) -> Any:
        self.count(path, anchored.nodes, anchored.depth)
        self.value_at(path, anchored.location)
        for relative, location in anchored.keys:
            self.key_at((*path, *relative), location)
        for relative, location in anchored.values:
            self.value_at((*path, *relative), location)
        return _copy_plain(anchored.value)

    def close(self, frame: _Frame) -> None:
        """A collection's end: the mappings its merge key names merged in (own keys first, then
        each merged mapping's keys not seen yet, in order, as ruamel orders them); if anchored, it
        is recorded for its aliases."""
        container = frame.container
        if isinstance(container, _MergeList):
            owner = container.owner
            if owner.merges is None or not container.merged:
                raise _Unsupported
            owner.merges.extend(container.merged)
            owner.key = _NO_KEY
            return
        for anchored in frame.merges or ():
            for key, value in anchored.value.items():
                if key in container:
                    continue  # an own key, or an earlier mapping's: those are kept
                keys, values = anchored.below(key)
                self.count((*frame.path, key), len(values), max(len(p) for p, _ in values) - 1)
                for relative, location in keys:
                    self.key_at((*frame.path, *relative), location)
                for relative, location in values:
                    self.value_at((*frame.path, *relative), location)
                container[key] = _copy_plain(value)
        if frame.anchor is not None:
            assert frame.location is not None
            base = len(frame.path)
            keys_from, values_from = frame.logged
            self.anchors[frame.anchor] = _Anchored(
                container,
                frame.location,
                [(p[base:], loc) for p, loc in self.key_log[keys_from:]],
                [(p[base:], loc) for p, loc in self.value_log[values_from:]],
            )
            self.capturing -= 1
            if not self.capturing:  # no anchored collection open: nothing will slice the logs
                self.key_log.clear()
                self.value_log.clear()

    def count(self, path: Path_, nodes: int, depth: int) -> None:
        self.nodes += nodes
        if len(path) + depth > self.max_depth or self.nodes >= self.max_nodes:
            raise _Unsupported  # ruamel's reading reports it

    def key_at(self, path: Path_, location: Location) -> None:
        self.keys[path] = location
        if self.capturing:
            self.key_log.append((path, location))

    def value_at(self, path: Path_, location: Location) -> None:
        self.values[path] = location
        if self.capturing:
            self.value_log.append((path, location))

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
        if kind == "merge":
            return _MERGE  # `<<`: a merge key where a key is awaited, else refused
        raise _Unsupported  # timestamps, ints in other bases or with underscores …


class _MergeList(list):  # type: ignore[type-arg]
    """The list after a merge key (`<<: [*a, *b]`): the mappings it names."""

    def __init__(self, owner: _Frame) -> None:
        super().__init__()
        self.owner = owner
        self.merged: list[_Anchored] = []


def _copy_plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_plain(v) for v in value]
    return value


_MERGE = object()
_NO_KEY = object()


def path_at(text: str, line: int, column: int) -> Path_:
    """The key path open at `line`:`column` (1-based) of a text, read up to there: the mapping key
    or list item libyaml's events have entered before that point, the path an error in text that
    does not parse is under; () when there is none (or no libyaml)."""
    try:
        import yaml
        from yaml.cyaml import CParser
    except ImportError:
        return ()
    parser = CParser(text)
    stack: list[list[Any]] = []  # [path, the key awaiting its value (a mapping) or the next index]
    try:
        while True:
            event = parser.get_event()
            kind = type(event)
            at = (event.start_mark.line + 1, event.start_mark.column + 1)
            if kind in (yaml.MappingEndEvent, yaml.SequenceEndEvent) and at <= (line, column):
                stack.pop()  # closed at or before the place: a key there is not inside it
                continue
            if at >= (line, column):
                break
            if kind not in (
                yaml.ScalarEvent,
                yaml.AliasEvent,
                yaml.MappingStartEvent,
                yaml.SequenceStartEvent,
            ):
                continue
            child: Path_ = ()
            if stack:
                frame = stack[-1]
                if frame[1] is _NO_KEY:
                    if kind is not yaml.ScalarEvent:
                        break  # a collection as a key: the mapping's path is as near as it gets
                    frame[1] = event.value
                    continue
                child = (*frame[0], frame[1])
                frame[1] = frame[1] + 1 if isinstance(frame[1], int) else _NO_KEY
            if kind is yaml.MappingStartEvent:
                stack.append([child, _NO_KEY])
            elif kind is yaml.SequenceStartEvent:
                stack.append([child, 0])
    except yaml.YAMLError:
        pass
    finally:
        parser.dispose()
    if not stack:
        return ()
    path, pending = stack[-1]
    return tuple(path) if pending is _NO_KEY or isinstance(pending, int) else (*path, pending)
