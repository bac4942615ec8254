"""The reference pages generated from the code on every build: the rules (from the registry), the
command line (from the typer app's click commands) and the construct API (mkdocstrings directives
for every public name of sagestack.constructs)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from plain_docstrings import escape_outside_code as md

from sagestack.cli import app
from sagestack.cli.examples import EXAMPLES
from sagestack.project.rules import RULES


def rules_reference() -> str:
    lines = [
        "# Rules",
        "",
        "Every rule `sagestack validate` (and every command that loads a spec) runs after the schema, "
        "generated from the registry (`sagestack.project.rules.RULES`). An error stops the command "
        "(exit 2); a warning is printed and the command goes on; an info is advice `sagestack validate` "
        "prints on one line (and `validate --json` lists under `infos`). `sagestack rules` lists them in a "
        "terminal, `sagestack rules --explain ID` prints one.",
        "",
        "| rule | severity | checks |",
        "|---|---|---|",
    ]
    lines += [f"| [`{r.id}`](#{r.id}) | {r.severity} | {md(r.summary)} |" for r in RULES.values()]
    lines.append("")
    for r in RULES.values():
        lines += [
            f"## {r.id} {{#{r.id}}}",
            "",
            f"**{r.severity}**: {md(r.summary)}",
            "",
            f"**Why.** {md(r.why)}",
            "",
            f"**What to do.** {md(r.fix)}",
            "",
        ]
    return "\n".join(lines)


def commands(group: Any, path: tuple[str, ...] = ("sagestack",)) -> Iterator[tuple[str, Any]]:
    """Every command of the tree, groups first, in the order `--help` lists them."""
    yield " ".join(path), group
    if hasattr(group, "commands"):  # typer carries its own click: known by what it has
        for name, command in group.commands.items():
            if not command.hidden:
                yield from commands(command, (*path, name))


def _default(param: Any) -> str:
    if param.param_type_name == "option" and param.is_flag and not param.secondary_opts:
        return ""
    value = param.default
    if value is None or callable(value) or value == ():
        return ""
    if isinstance(value, Path):
        value = str(value)
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def _param_row(param: Any, context: Any) -> str:
    """One row: the option's spellings with its metavar, argument or flag, default, help."""
    if param.param_type_name == "argument":
        name = f"`{(param.metavar or param.name or '').upper()}`"
        kind = "argument" + (" (required)" if param.required else "")
        help_text = ""
    else:
        record = param.get_help_record(context)
        name = f"`{record[0]}`" if record else ", ".join(f"`{o}`" for o in param.opts)
        kind = "flag" if param.is_flag else "option"
        help_text = param.help or ""
    text = md(help_text.replace("\n", " ")).replace("|", "\\|")
    return f"| {name} | {kind} | {_default(param)} | {text} |"


def _example_lines(rows: tuple[tuple[str, str], ...]) -> list[str]:
    """The examples `--help` ends with, as a shell block: each command with what it does as a comment."""
    width = max(len(command) for command, _ in rows)
    return [f"{command.ljust(width)}   # {what}" for command, what in rows]


def cli_reference() -> str:
    root = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "Every command of `sagestack`, its arguments and options with their defaults, generated from "
        "the commands themselves on every build of this site (`sagestack COMMAND --help` prints the "
        "same in a terminal). The [command-line guide](../guide/cli.md) describes the conventions.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    tree = list(commands(root))
    for name, command in tree[1:]:
        anchor = name.replace(" ", "-")
        summary = md(command.get_short_help_str(limit=200) or "").replace("|", "\\|")
        lines.append(f"| [`{name}`](#{anchor}) | {summary} |")
    lines.append("")
    for name, command in tree:
        anchor = name.replace(" ", "-")
        context = command.context_class(command, info_name=name)
        usage = " ".join([name, *command.collect_usage_pieces(context)])
        lines += [f"## {name} {{#{anchor}}}", "", f"```text\n{usage}\n```"]
        lines += ["", md((command.help or "").strip()), ""]
        examples = EXAMPLES.get(name.removeprefix("sagestack").strip())
        if examples and examples.rows:
            lines += ["```sh", *_example_lines(examples.rows), "```", ""]
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            lines += ["| name | kind | default | help |", "|---|---|---|---|"]
            lines += [_param_row(p, context) for p in params]
            lines.append("")
        if hasattr(command, "commands"):
            subs = [
                f"[`{name} {sub}`](#{anchor}-{sub})" for sub, c in command.commands.items() if not c.hidden
            ]
            lines += ["Commands: " + ", ".join(subs) + ".", ""]
    return "\n".join(lines)


def construct_names(package: Path) -> list[str]:
    """The public names of sagestack.constructs, read from its `__all__` (importing it would start jsii)."""
    tree = ast.parse((package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return [str(ast.literal_eval(e)) for e in node.value.elts]  # type: ignore[attr-defined]
    raise ValueError("sagestack/constructs/__init__.py has no __all__")


def constructs_reference(package: Path) -> str:
    names = construct_names(package)
    lines = [
        "# Construct API",
        "",
        "The public names of `sagestack.constructs`, from their docstrings and signatures, generated on "
        "every build of this site. [Using the constructs](../guide/constructs.md) shows them in an app.",
        "",
    ]
    for name in names:
        lines += [f"::: sagestack.constructs.{name}", ""]
    return "\n".join(lines)
