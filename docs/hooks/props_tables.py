"""The props tables of the constructs guide (docs/guide/constructs.md), generated from the code.

Each `<!-- props: Name -->` … `<!-- /props -->` block is a table with one row per prop of the
construct's signature (TrainingPipeline's typed job props expanded where its `**job_props` stands),
in the signature's order, with the prop's type and, where the signature has one, its default or
"required". The code cannot say what a default of None means ("a new one, kept 30 days"), or why a
prop is required: those words are the page's own, kept by prop name from the block being replaced.
A `<!-- factories: Name -->` block lists a class's static factories and their parameters.

`python docs/hooks/props_tables.py` rewrites the page; a test (tests/unit/test_constructs_guide.py)
fails while the page differs from what this writes, and the site is built from this output.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[1] / "guide" / "constructs.md"
BLOCK = re.compile(r"<!-- (props|factories): (\w+) -->\n(.*?)<!-- /\1 -->", re.S)
REQUIRED = "required"
NONE = "none"


@dataclasses.dataclass(frozen=True)
class Prop:
    name: str
    type: str  # the annotation as written, less `| None`
    required: bool
    default: str | None  # the signature's default as the page writes it; None: none (None, ())


def _construct(name: str) -> Any:
    import sagestack.constructs

    return getattr(sagestack.constructs, name)


def _type(annotation: Any) -> str:
    """The annotation as written (postponed: a string; a TypedDict's value: a ForwardRef), with
    `| None` left out (the default says it) and Mapping / Sequence as the dict / list one passes."""
    text = getattr(annotation, "__forward_arg__", annotation)
    text = text if isinstance(text, str) else getattr(text, "__name__", str(text))
    parts = [p.strip() for p in _split_union(text) if p.strip() != "None"]
    shown = [re.sub(r"\bMapping\[", "dict[", re.sub(r"\bSequence\[", "list[", p)) for p in parts]
    return " or ".join(f"`{p}`" for p in shown)


def _split_union(text: str) -> list[str]:
    """'str | Sequence[str] | None' -> its members (a `|` inside brackets belongs to a member)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def _default(value: Any) -> str | None:
    if value is None or value == ():
        return None
    if isinstance(value, enum.Enum):
        return f"`{type(value).__name__}.{value.name}`"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"`{type(value).__name__}()`" if value == type(value)() else f"`{value!r}`"
    if type(value).__module__.startswith("aws_cdk") and hasattr(value, "name"):  # a jsii enum
        return f"`{type(value).__name__}.{value.name}`"
    return f"`{json.dumps(value)}`" if isinstance(value, str) else f"`{value}`"


def props(cls: type) -> list[Prop]:
    """The construct's props in its signature's order (scope and id are not props)."""
    found: list[Prop] = []
    for p in list(inspect.signature(cls.__init__).parameters.values())[3:]:
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            found += _typed_props(p.annotation)
            continue
        required = p.default is inspect.Parameter.empty
        found.append(Prop(p.name, _type(p.annotation), required, None if required else _default(p.default)))
    return found


def _typed_props(annotation: Any) -> list[Prop]:
    """`**job_props: Unpack[TrainingJobProps]`: the TypedDict's keys (each optional to Python)."""
    match = re.fullmatch(r"Unpack\[(\w+)\]", str(annotation))
    assert match, f"a **props of an unknown form: {annotation}"
    typed = _construct(match.group(1))
    hints = typed.__annotations__
    return [Prop(name, _type(hints[name]), name in typed.__required_keys__, None) for name in hints]


def _head(prop: Prop) -> str:
    return REQUIRED if prop.required else prop.default or ""


def _cell(prop: Prop, note: str) -> str:
    head = _head(prop)
    if not head:
        return note or NONE
    if not note:
        return head
    return f"{head}: {note}" if prop.required and not note.startswith("(") else f"{head} {note}"


def _note(prop: Prop, cell: str) -> str:
    """The page's own words in a default cell: what follows the code's part (all of it when the
    code has none to give, or when the cell does not start with what the code says)."""
    head = _head(prop)
    if not head:
        return "" if cell == NONE else cell
    if cell.startswith(head):
        return cell[len(head) :].lstrip(":, ").strip()
    return cell


def _rows(table: str) -> Iterator[list[str]]:
    for line in table.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            yield [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _notes(table: str, known: dict[str, Prop]) -> dict[str, str]:
    """Each prop's words in the block's rows ('`a`, `b`' and '`a` / `b`' rows give each of them)."""
    notes: dict[str, str] = {}
    for cells in _rows(table):
        if len(cells) < 3 or cells[0] == "prop":
            continue
        for name in re.findall(r"`(\w+)`", cells[0]):
            if name in known:
                notes[name] = _note(known[name], cells[2])
    return notes


def props_table(name: str, table: str) -> str:
    """The table of construct `name`'s props, with the words `table` (the block now) holds."""
    found = props(_construct(name))
    notes = _notes(table, {p.name: p for p in found})
    lines = ["| prop | type | default |", "|---|---|---|"]
    lines += [f"| `{p.name}` | {p.type} | {_cell(p, notes.get(p.name, ''))} |" for p in found]
    return "\n".join(lines) + "\n"


def factories_table(name: str) -> str:
    """A class's static factories (`from_*`) and their parameters, with the defaults they have."""
    cls = _construct(name)
    lines = ["| factory | props |", "|---|---|"]
    for attr, value in vars(cls).items():
        if not (attr.startswith("from_") and isinstance(value, staticmethod)):
            continue
        params = []
        for p in inspect.signature(value.__func__).parameters.values():
            text = f"`{p.name}`: {_type(p.annotation)}"
            default = None if p.default is inspect.Parameter.empty else _default(p.default)
            params.append(text + (f" (default {default})" if default else ""))
        lines.append(f"| `{attr}` | {', '.join(params)} |")
    return "\n".join(lines) + "\n"


def with_props_tables(markdown: str) -> str:
    """The page with each props and factories block generated anew."""

    def block(match: re.Match[str]) -> str:
        kind, name, table = match.groups()
        body = props_table(name, table) if kind == "props" else factories_table(name)
        return f"<!-- {kind}: {name} -->\n{body}<!-- /{kind} -->"

    return BLOCK.sub(block, markdown)


if __name__ == "__main__":  # rewrite the page
    sys.path.insert(0, str(PAGE.parents[2]))
    text = PAGE.read_text()
    new = with_props_tables(text)
    PAGE.write_text(new)
    print(f"{PAGE}: {'rewritten' if new != text else 'already current'}", file=sys.stderr)
