"""The conventions every command keeps, applied in one place when the commands are registered (so
a module of commands needs nothing of its own): `-h`, help that reads well at 80 columns (plain
text wrapped at word boundaries, readable metavars, no cut default, the examples of cli/examples.py),
the invocation (--json, --root) its helpers read, and spec errors reported once with an excerpt."""

from __future__ import annotations

import functools
import platform
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import typer
from typer._click.formatting import HelpFormatter
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo, Context

from sagestack.cli.common import EXIT_INVALID_SPEC, INVOCATION, Invocation, report_issues
from sagestack.cli.examples import EXAMPLES

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
# What a value of each type is called in the help (`--hosts N`, not `--hosts <int>`).
METAVARS = {"int": "N", "float": "NUMBER", "path": "PATH", "str": "TEXT", "bool": "BOOL"}
# ... and what the value of an option of these names is, whatever its type.
OPTION_METAVARS = {
    "--env": "ENV",
    "--to": "ENV",
    "--from": "ENV",
    "--set": "KEY=VALUE",
    "--cluster": "CLUSTER",
    "--package": "ARN",
    "--region": "REGION",
    "--host": "HOST",
    "--quotas": "MODE",
    "--duration": "DURATION",
    "--start-after": "TIME",
    "--end-before": "TIME",
    "--dir": "DIR",
    "--workdir": "DIR",
}
NBSP = "\u00a0"  # textwrap breaks at ASCII whitespace only: `[default: 8080]` stays whole


def version_text() -> str:
    """`sagestack --version`: this distribution and what it runs with, as `cdk --version` and
    `aws --version` say (read from the installed metadata: nothing heavy is imported)."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"sagestack {of('sagestack')} (aws-cdk-lib {of('aws-cdk-lib')}, botocore {of('botocore')}, "
        f"Python {platform.python_version()})"
    )


def print_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit()


# ---------------------------------------------------------------- help at 80 columns


def wrap(text: str, width: int, indent: str = "") -> list[str]:
    """`text` wrapped at spaces only: a file name, a flag or a hyphenated word is never split."""
    return textwrap.wrap(
        text,
        width=max(width, 20),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [indent]


class Formatter(HelpFormatter):
    """click's plain formatter (what git, cdk and aws print), wrapping at spaces only."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
        blocks = ["\n".join(wrap(p, self.width, indent)) for p in paragraphs if p]
        self.write("\n\n".join(blocks) + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 26, col_spacing: int = 2) -> None:
        rows = list(rows)
        first = min(max((len(r[0]) for r in rows), default=0), col_max) + col_spacing
        pad = " " * (self.current_indent + first)
        for term, definition in rows:
            self.write(" " * self.current_indent + term)
            text = " ".join(definition.split()).replace("[default: ", "[default:" + NBSP)
            lines = [x.replace(NBSP, " ") for x in wrap(text, self.width - len(pad))] if definition else []
            if not lines:
                self.write("\n")
                continue
            if len(term) <= first - col_spacing:
                self.write(" " * (first - len(term)) + lines[0] + "\n")
                lines = lines[1:]
            else:
                self.write("\n")
            for line in lines:
                self.write(pad + line + "\n")


class HelpContext(Context):
    formatter_class = Formatter


def readable_metavars(params: Sequence[Any]) -> None:
    """`JOB` for an argument, `N` / `TEXT` / `PATH` for an option's value, none for a flag."""
    for param in params:
        if param.metavar is not None:
            continue
        if isinstance(param, TyperArgument):
            param.metavar = (param.name or "value").upper()
        elif isinstance(param, TyperOption) and not param.is_flag and not param.count:
            named = next((OPTION_METAVARS[o] for o in param.opts if o in OPTION_METAVARS), None)
            label = param.display_type(None).strip("<>")  # type: ignore[arg-type]
            label = label.removeprefix("list[").removesuffix("]")
            param.metavar = named or METAVARS.get(label, label.upper())


def format_parameters(cmd: Any, ctx: Any, formatter: Any) -> None:
    """Arguments (by their metavar, `JOB`) and options, each with its help wrapped beside it."""
    arguments, options = [], []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        if isinstance(param, TyperArgument):
            arguments.append((param.metavar or (param.name or "").upper(), record[1]))
        else:
            options.append(record)
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


def format_examples(rows: Sequence[tuple[str, str]], formatter: Any) -> None:
    with formatter.section("Examples"):
        for i, (line, what) in enumerate(rows):
            if i:
                formatter.write("\n")
            for comment in wrap(what, formatter.width - 2, " " * formatter.current_indent + "# "):
                formatter.write(comment + "\n")
            formatter.write(" " * formatter.current_indent + line + "\n")


class PlainHelp:
    """What commands and groups share: help as plain text (not rich's boxes), readable metavars,
    and the examples their help ends with (each class also sets `context_class = HelpContext`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["rich_markup_mode"] = None
        super().__init__(*args, **kwargs)
        readable_metavars(self.params)  # type: ignore[attr-defined]
        self.examples: Sequence[tuple[str, str]] = ()


class Command(PlainHelp, TyperCommand):
    """A command whose help is plain text wrapped at 80 columns, ending with its examples."""

    context_class = HelpContext

    def format_options(self, ctx: Any, formatter: Any) -> None:
        format_parameters(self, ctx, formatter)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        if self.examples:
            format_examples(self.examples, formatter)


class Group(PlainHelp, TyperGroup):
    """A group whose command list shows each command's summary whole (wrapped, never cut)."""

    context_class = HelpContext

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, summary(cmd)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        if self.examples:
            format_examples(self.examples, formatter)


def summary(cmd: Any) -> str:
    """A command's line in its group's list: its short_help, else its help's first paragraph."""
    text = cmd.short_help or (cmd.help or "").split("\n\n")[0]
    return " ".join(text.split())


# ---------------------------------------------------------------- registration


def conventional(callback: Callable[..., Any]) -> Callable[..., Any]:
    """The command's callback, run with its invocation known to the shared helpers (--json, --root)
    and a spec error escaping it reported as every command reports one (once, with an excerpt)."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        root = kwargs.get("root")
        asked = Invocation(as_json=bool(kwargs.get("as_json")), root=root if root else Path("."))
        token = INVOCATION.set(asked)
        try:
            return callback(*args, **kwargs)
        except Exception as e:
            if type(e).__name__ != "SpecError" or not hasattr(e, "issues"):
                raise
            report_issues([(None, e.issues)])
            raise typer.Exit(EXIT_INVALID_SPEC) from None
        finally:
            INVOCATION.reset(token)

    run.__conventional__ = True  # type: ignore[attr-defined]
    return run


def command_name(info: CommandInfo) -> str:
    assert info.callback is not None
    return info.name or info.callback.__name__.lower().replace("_", "-")


def walk(app: typer.Typer, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command (its CommandInfo) and group (its TyperInfo) under `app`, with its path."""
    for info in app.registered_commands:
        yield (*path, command_name(info)), info
    for group in app.registered_groups:
        name = group.name if isinstance(group.name, str) else ""
        yield (*path, name), group
        assert group.typer_instance is not None
        yield from walk(group.typer_instance, (*path, name))


def apply_conventions(app: typer.Typer) -> None:
    """Give every command under `app` the conventions: the classes, -h, the callback's wrapper,
    its examples and summary from cli/examples.py."""
    app.info.cls = RootGroup
    app.info.context_settings = CONTEXT_SETTINGS
    for path, info in walk(app):
        key = " ".join(path)
        if isinstance(info, CommandInfo):
            info.cls = Command
            if info.callback is not None and not hasattr(info.callback, "__conventional__"):
                info.callback = conventional(info.callback)
        else:
            info.cls = Group
        entry = EXAMPLES.get(key)
        if entry is not None:
            info.short_help = entry.summary


class RootGroup(Group):
    """The `sagestack` group: each command's examples are looked up by its path when its help is
    printed (a Typer builds its click commands afresh each run)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return _with_examples(super().get_command(ctx, cmd_name), cmd_name, (ctx.info_name or "sagestack",))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        entry = EXAMPLES.get("")
        if entry is not None:
            format_examples(entry.rows, formatter)


def _with_examples(cmd: Any, name: str, parents: tuple[str, ...]) -> Any:
    if cmd is None:
        return None
    path = (*parents[1:], name)
    entry = EXAMPLES.get(" ".join(path))
    if entry is not None and isinstance(cmd, (Command, Group)):
        cmd.examples = entry.rows
    if isinstance(cmd, Group):
        for sub_name, sub in cmd.commands.items():
            _with_examples(sub, sub_name, (*parents, name))
    return cmd
