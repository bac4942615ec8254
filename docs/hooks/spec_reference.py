"""The spec reference page, generated from the JSON Schema `sagestack schema` writes: every key of
every object with its type, default, allowed values, description and an example. Each object of the
spec is a section with an anchor (its schema name, lowercased); each key has an anchor of its own
(`<object>-<key>`). Examples are the values the example project and the guides' YAML blocks give
that key; a key none of them sets shows its default, or its first allowed value."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from plain_docstrings import escape_outside_code as md

from sagestack.project.schema import project_schema

ROOT = "ProjectSpec"
Found = dict[tuple[str, str], Any]  # (object, key) -> the first value a document gives it


def _ref(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _link(name: str) -> str:
    return f"[{name}](#{name.lower()})"


def type_of(node: dict[str, Any]) -> str:
    """A node's type in words, objects linked to their sections."""
    ref = _ref(node)
    if ref:
        return _link(ref)
    if "anyOf" in node:
        kinds = [type_of(n) for n in node["anyOf"] if n.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds))
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"list of {type_of(node.get('items', {}))}"
    if kind == "object":
        if "patternProperties" in node:
            (inner,) = node["patternProperties"].values()
            return f"mapping of names to {type_of(inner)}"
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return f"mapping of strings to {type_of(extra)}"
        return "mapping"
    word = str(kind or "any")
    if node.get("description") and kind in ("integer", "string") and len(node["description"]) < 40:
        word += f" ({md(node['description'])})"
    return word


def allowed(node: dict[str, Any]) -> list[str]:
    """The constraints of a node (and of its non-null anyOf branches) in words."""
    out: list[str] = []
    for branch in node.get("anyOf", [node]):
        if branch.get("type") == "null":
            continue
        if "enum" in branch:
            out.append("one of " + ", ".join(f"`{json.dumps(v)}`" for v in branch["enum"]))
        if "pattern" in branch:
            out.append(f"matching `{branch['pattern']}`")
        for key, word in (
            ("minimum", "≥"),
            ("ge", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("le", "≤"),
            ("exclusiveMaximum", "<"),
        ):
            if key in branch or (key in node and branch is not node):
                value = branch.get(key, node.get(key))
                out.append(f"{word} {value}")
        for key, word in (("minLength", "at least {} characters"), ("maxLength", "at most {} characters")):
            if key in branch:
                out.append(word.format(branch[key]))
        if "minItems" in branch:
            out.append(f"at least {branch['minItems']} item(s)")
        if "items" in branch and "enum" in branch["items"]:
            out.append("each one of " + ", ".join(f"`{v}`" for v in branch["items"]["enum"]))
    return list(dict.fromkeys(out))


def _branch_for(defs: dict[str, Any], node: dict[str, Any], value: Any) -> str | None:
    """The object definition a value of this node is read as, if any."""
    ref = _ref(node)
    if ref:
        return ref
    for branch in node.get("anyOf", []):
        ref = _ref(branch)
        if ref and isinstance(value, dict) and set(value) <= set(defs[ref].get("properties", {})):
            return ref
    return None


def collect_examples(defs: dict[str, Any], data: Any, name: str, found: dict[tuple[str, str], Any]) -> None:
    """Record, for every (object, key) the data sets, the first value it gives."""
    props = defs[name].get("properties", {})
    if not isinstance(data, dict):
        return
    for key, value in data.items():
        node = props.get(key)
        if node is None:
            continue
        found.setdefault((name, key), value)
        _descend(defs, node, value, found)


def _descend(
    defs: dict[str, Any], node: dict[str, Any], value: Any, found: dict[tuple[str, str], Any]
) -> None:
    inner = _branch_for(defs, node, value)
    if inner:
        collect_examples(defs, value, inner, found)
        return
    entries = node.get("patternProperties") or {}
    extra = node.get("additionalProperties")
    element = next(iter(entries.values()), extra if isinstance(extra, dict) else None)
    if element is not None and isinstance(value, dict):
        for item in value.values():
            _descend(defs, element, item, found)
    if node.get("type") == "array" and isinstance(value, list):
        for item in value:
            _descend(defs, node.get("items", {}), item, found)
    for branch in node.get("anyOf", []):
        if branch.get("type") == "array" and isinstance(value, list):
            for item in value:
                _descend(defs, branch.get("items", {}), item, found)


# the example project, then the broad one the construct baselines synthesize (it sets what the example
# does not: VPCs, channels, shadows, MPI, SMP, warm starts, …); both are valid specs the tests load
PROJECTS = ("", "tests/constructs/baseline/broad")


def yaml_documents(root: Path, guides: Iterable[Path]) -> list[Any]:
    """The example projects' specs and overlays, and every YAML block of the guides."""
    docs: list[Any] = []
    for project in PROJECTS:
        config = root / project / "config"
        for path in [config / "sagestack.yaml", *sorted((config / "envs").glob("*.yaml"))]:
            if path.exists():
                docs.append(yaml.safe_load(path.read_text()))
    for guide in guides:
        for block in re.findall(r"```yaml[^\n]*\n(.*?)```", guide.read_text(), re.S):
            try:
                docs.append(yaml.safe_load(block))
            except yaml.YAMLError:
                continue
    return docs


def _branches(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a node, nested anyOf flattened."""
    if "anyOf" not in node:
        return [node]
    return [leaf for branch in node["anyOf"] for leaf in _branches(branch)]


def _value(
    defs: dict[str, Any], key: str, node: dict[str, Any], owner: str, found: Found, depth: int = 0
) -> Any:
    """A value for the key: the one a project or guide gives it, else its default, its first allowed
    value, an object made of its own keys' values, or the smallest number it takes; None if none."""
    if (owner, key) in found:
        return found[(owner, key)]
    if node.get("default") not in (None, [], {}):
        return node["default"]
    branches = [b for b in _branches(node) if b.get("type") != "null"]
    if any("4h" in b.get("description", "") for b in branches):
        return "1h"  # a duration
    for branch in branches:
        if "enum" in branch:
            return branch["enum"][0]
    for branch in branches:
        ref = _ref(branch)
        if ref and depth < 3:
            spec = defs[ref]
            value = {}
            for name, inner in spec.get("properties", {}).items():
                wanted = name in spec.get("required", []) or (ref, name) in found
                inner_value = _value(defs, name, inner, ref, found, depth + 1) if wanted else None
                if inner_value is not None:
                    value[name] = inner_value
            if value:
                return value
        if branch.get("type") in ("integer", "number"):
            return branch.get("minimum", branch.get("exclusiveMinimum", node.get("ge", 1)))
    return None


def _example(defs: dict[str, Any], key: str, node: dict[str, Any], found: Found, owner: str) -> str:
    value = _value(defs, key, node, owner, found)
    if value is None:
        return ""
    flow = None if isinstance(value, dict | list) else False
    text = yaml.safe_dump(
        {key: value}, default_flow_style=flow, sort_keys=False, width=90, allow_unicode=True
    )
    return text.rstrip()


def _uses(defs: dict[str, Any]) -> dict[str, list[str]]:
    """Where each object is used: the keys (of which objects) that hold it."""
    uses: dict[str, list[str]] = {}

    def refs(node: Any) -> Iterable[str]:
        if isinstance(node, dict):
            if _ref(node):
                yield str(_ref(node))
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for owner, spec in defs.items():
        for key, node in spec.get("properties", {}).items():
            for target in refs(node):
                uses.setdefault(target, []).append(f"[`{key}`](#{owner.lower()}-{key.replace('_', '-')})")
    return uses


def _order(defs: dict[str, Any]) -> list[str]:
    """Objects in the order a reader meets them: breadth first from the project file."""
    seen, queue = [ROOT], [ROOT]
    while queue:
        text = json.dumps(defs[queue.pop(0)].get("properties", {}))
        for name in re.findall(r'"#/\$defs/([A-Za-z0-9_]+)"', text):
            if name not in seen:
                seen.append(name)
                queue.append(name)
    return seen + sorted(set(defs) - set(seen))


def _section(defs: dict[str, Any], name: str, found: Found, uses: list[str]) -> list[str]:
    spec = defs[name]
    out = [f"## {name} {{#{name.lower()}}}", ""]
    if spec.get("description"):
        out += [md(spec["description"]), ""]
    if uses:
        out += ["Used by: " + ", ".join(dict.fromkeys(uses)) + ".", ""]
    required = set(spec.get("required", []))
    for key, node in spec.get("properties", {}).items():
        anchor = f"{name.lower()}-{key.replace('_', '-')}"
        out += [f"### `{key}` {{#{anchor}}}", ""]
        facts = [f"**type**: {type_of(node)}"]
        if key in required:
            facts.append("**required**")
        elif "default" in node:
            facts.append(f"**default**: `{json.dumps(node['default'])}`")
        if allowed(node):
            facts.append("**allowed**: " + ", ".join(allowed(node)))
        out += ["- " + fact for fact in facts]
        out.append("")
        description = node.get("description")
        if description:
            end = "" if description[-1] in ".:!?)" else "."
            out += [md(description[0].upper() + description[1:] + end), ""]
        example = _example(defs, key, node, found, name)
        if example:
            out += ["```yaml", example, "```", ""]
    return out


def spec_reference(root: Path, guides: Iterable[Path]) -> str:
    schema = project_schema()
    defs: dict[str, Any] = dict(schema["$defs"])
    defs[ROOT] = {k: v for k, v in schema.items() if k not in ("$defs", "$schema")}
    defs[ROOT]["description"] = (
        "The project file, `config/sagestack.yaml`. An environment overlay (`config/envs/<env>.yaml`) "
        "has the same keys, none of them required."
    )
    found: dict[tuple[str, str], Any] = {}
    for doc in yaml_documents(root, guides):
        collect_examples(defs, doc, ROOT, found)
    uses = _uses(defs)
    lines = [
        "# Spec reference",
        "",
        "Every key of the project file and its overlays, generated from the JSON Schema "
        "(`sagestack schema` writes it to `schema/sagestack.schema.json`) on every build of this site. "
        "Each example is a value the example project, a guide or the broad test project gives the key, else its "
        "default. "
        "See [A tour of the spec](../guide/spec.md) for how the pieces fit.",
        "",
    ]
    for name in _order(defs):
        lines += _section(defs, name, found, uses.get(name, []))
    return "\n".join(lines) + "\n"
