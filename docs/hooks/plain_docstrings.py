"""A griffe extension (mkdocstrings' `extensions:`) for sagestack's docstrings, which are plain text,
not Markdown: a `Label:` line followed by indented `name: text` lines (the constructs' "Props (CDK
types):") becomes a list with each name in code, and `<placeholders>` outside code spans are shown as
written instead of being read as HTML tags."""

from __future__ import annotations

import re
from typing import Any

import griffe

ITEM = re.compile(r"^(?P<indent> {2,4})(?P<name>[A-Za-z_][\w ,/.()\[\]=]{0,60}?): (?P<text>.*)$")
LABEL = re.compile(r"^\S.*:$")


def _escape(text: str) -> str:
    return text.replace("<", "&lt;").replace("_", "\\_").replace("*", "\\*")


def escape_outside_code(line: str) -> str:
    """Outside backticks, `<` as an entity (Markdown would take `<env>` for a tag) and `_`, `*` escaped
    (`render_training` is a name, not emphasis)."""
    parts = line.split("`")
    return "`".join(_escape(part) if i % 2 == 0 else part for i, part in enumerate(parts))


def markdown_of(text: str) -> str:
    out: list[str] = []
    in_list = False
    for line in text.splitlines():
        item = ITEM.match(line)
        if LABEL.match(line):
            out += [escape_outside_code(line), ""]
            in_list = True
        elif in_list and item:
            out.append(f"- `{item['name']}`: {escape_outside_code(item['text'])}")
        elif in_list and line.startswith("    "):
            out.append("  " + escape_outside_code(line.strip()))
        else:
            if in_list and line.strip():
                out.append("")
            in_list = False
            out.append(escape_outside_code(line))
    return "\n".join(out)


class PlainDocstrings(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and obj.path.startswith("sagestack."):
            obj.docstring.value = markdown_of(obj.docstring.value)
