"""What every command shares: the consoles, the --root / --env / --set options, loading a spec
or a plan with every error reported (exit 2), and the one handler for a user's mistakes."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

EXIT_INVALID_SPEC = 2
EXIT_QUOTA_SHORT = 3

RootOption = Annotated[
    Path,
    typer.Option(
        "--root", metavar="DIR", help="project root (holds config/sagestack.yaml)", show_default=False
    ),
]
EnvOption = Annotated[
    str | None, typer.Option("--env", "-e", metavar="ENV", help="environment (default: dev)")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY=VALUE", help="override a hyperparameter (repeatable)"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="one JSON document on stdout")]


@dataclass(frozen=True)
class Invocation:
    """What the running command was asked for that its helpers need: JSON output, the root."""

    as_json: bool = False
    root: Path = Path(".")


INVOCATION: ContextVar[Invocation | None] = ContextVar("invocation", default=None)


def invocation() -> Invocation:
    return INVOCATION.get() or Invocation()


class UserError(Exception):
    """A mistake the user can fix: printed as is (no traceback), with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def spec_errors(e: Any, root: Path | None = None) -> typer.Exit:
    """Print every issue of a SpecError (as JSON on stdout under --json); the exit to raise."""
    report_issues([(None, e.issues)], root)
    return typer.Exit(EXIT_INVALID_SPEC)


def report_issues(found: Iterable[tuple[str | None, Sequence[Any]]], root: Path | None = None) -> None:
    """Each distinct issue once (naming the environments it was found in, when more than one
    environment was loaded), with a source excerpt: the one report of spec problems every command
    prints. Under --json: {"ok": false, "issues": [...]} on stdout."""
    from sagestack.core.errors import as_json, headline, merge_issues

    asked = invocation()
    merged = merge_issues(found)
    if asked.as_json:
        document = {"ok": False, "issues": [as_json(i, envs) for i, envs in merged]}
        typer.echo(json.dumps(document, indent=1))
        return
    for issue, envs in merged:
        for line in terminal_lines(headline(issue, envs)):
            print(line, file=sys.stderr)
        if issue.severity == "info":
            continue  # advice, one line: the excerpt is for what must change
        for line in excerpt(issue, root or asked.root):
            print(line, file=sys.stderr)


def terminal_lines(line: str, stream: Any = None, hang: str = "    ") -> list[str]:
    """A long line as a terminal shows it: wrapped at spaces to its width (the terminal would cut
    words), continuation lines indented by `hang`; in a pipe, the one line editors and CI logs
    parse. `stream`: where it goes (default: stderr), the terminal whose width counts."""
    from sagestack.ops.screen import fit

    width = terminal_width(stream)
    return [line] if width is None else fit(line, width, "", hang)


def terminal_width(stream: Any = None) -> int | None:
    """The width of the terminal `stream` (default: stderr) shows, or None in a pipe."""
    import shutil

    if not (stream or sys.stderr).isatty():
        return None
    return max(shutil.get_terminal_size().columns, 40)


def print_lines(out: Any, text: str, mark: str = "", hang: str = "    ") -> None:
    """`text` on the rich console `out`, wrapped at spaces as terminal_lines does for its stream;
    `mark`: rich markup printed before it (a coloured ✓), counted as two columns; the text's own
    leading blanks are its indent (fit drops a line's leading blanks, and the mark's with them)."""
    from sagestack.ops.screen import broken, fit

    width = terminal_width(out.file)
    body = text.lstrip(" ")
    lead = ("  " if mark else "") + text[: len(text) - len(body)]
    lines = [lead + body] if width is None else fit(body, width, lead, hang)
    if width is not None:  # a path or ARN longer than a line: broken after a separator, marked
        lines = [part for line in lines for part in broken(line, width, hang)]
    for i, line in enumerate(lines):
        if i == 0 and mark:
            out.print(mark + " ", end="", highlight=False)
            line = line[2:]
        out.print(line, markup=False, highlight=False)


MAX_EXCERPT_BYTES = 2 * 1024 * 1024  # a spec is at most 1 MiB (core/yamldoc)


def excerpt(issue: Any, root: Path) -> list[str]:
    """The issue's source line with a caret under the value: read from a regular file inside the
    project only (a FIFO would block; a link to /proc/self/environ or a credentials file must not
    be shown), of a spec's size, and only when it is text: no line of a binary or non-UTF-8 file,
    none holding a control character (a terminal would act on it), is echoed."""
    from sagestack.core.errors import source_excerpt
    from sagestack.core.yamldoc import inside_project

    if issue.location is None:
        return []
    path = root / issue.location.file
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_EXCERPT_BYTES:
            return []
        if not inside_project(path, issue.location.file):
            return []
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    if "\x00" in text:
        return []
    lines = source_excerpt(issue, text)
    if any(not (c.isprintable() or c in " \t") for line in lines for c in line):
        return []
    width = terminal_width()
    return lines if width is None or not lines else _within(lines, width)


def _within(lines: list[str], width: int) -> list[str]:
    """The excerpt's source line no wider than the terminal (it would fold the line and leave the
    caret under nothing): what does not fit is elided with `…`, on the left when the caret would
    be past the edge."""
    gutter, source, caret = lines
    if len(source) <= width:
        return lines
    bar = source.index("| ") + 2
    end = len(caret.rstrip())
    if end > width - 1:  # the caret past the edge: elide the start of the line instead
        drop = end - (width - 1) + 1
        source = source[:bar] + "…" + source[bar + drop :]
        caret = caret[:bar] + " " + caret[bar + drop :]
    return [gutter, source[: width - 1] + "…" if len(source) > width else source, caret[:width]]


def checked_env(root: Path, env: str | None, flag: str = "--env") -> str | None:
    """`env` if the project has it (or None): else a CLI error naming the flag, exit 2 (a typo in a
    command line is not a mistake in config/sagestack.yaml)."""
    from sagestack.core.catalog.suggest import closest
    from sagestack.project import list_environments

    if env is None:
        return None
    known = list_environments(root)
    if env in known or not (root / "config" / "sagestack.yaml").exists():
        return env  # (no project: the loader says what is missing)
    hits = closest(env, known)
    hint = f" (did you mean '{hits[0]}'?)" if hits else ""
    has = f"config/envs/ has {', '.join(known)}" if known else "config/envs/ has no environment"
    raise UserError(f"{flag} {env}: no environment '{env}'{hint}; {has}", EXIT_INVALID_SPEC)


def load_entry(
    root: Path, env: str | None, name: str, entries: Callable[[Any], Iterable[str]], what: str
) -> Any:
    """The spec as `env` sees it, with `name` among `entries(spec)`; else every problem, and exit 2."""
    from sagestack.core.catalog.suggest import did_you_mean
    from sagestack.core.errors import SpecError
    from sagestack.project import load_project

    err = console(stderr=True)
    try:
        loaded = load_project(root, checked_env(root, env))
    except SpecError as e:
        raise spec_errors(e, root) from None
    known = list(entries(loaded.spec))
    if name not in known:
        hint, *snippet = how_to_add(what, name, loaded.spec) or [""]
        headline = f"no {what} '{name}'{did_you_mean(name, known)} (defined: {', '.join(known) or 'none'})"
        for line in [*terminal_lines(headline + hint), *snippet]:  # the YAML as it is to be pasted
            err.print(line, markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    return loaded


# Where each kind of entry is declared in config/sagestack.yaml, for the hint that says how to add one.
SECTIONS = {"job": "jobs", "endpoint": "endpoints", "transform": "transforms", "tuning entry": "tuning"}


def how_to_add(what: str, name: str, spec: Any) -> list[str]:
    """The hint after an unknown entry's name, when none of its kind is defined: where such entries
    are declared (the rest of the headline); for an endpoint, the lines that serve a job's model
    (the spec's own job, as `init` writes them), to paste as they are."""
    section = SECTIONS.get(what)
    if section is None or getattr(spec, section, None):
        return []  # some are defined: the list, and its did-you-mean, are the hint
    if what != "endpoint":
        return [f"; declare one under {section}: in config/sagestack.yaml"]
    job = next(iter(spec.jobs), "JOB")
    return [
        "; an endpoint serves a job's trained model. Add to config/sagestack.yaml:",
        "endpoints:",
        f"  {name}:",
        f"    model: {{from: {job}}}",
        "    serverless: {memory_mb: 2048}",
    ]


def parse_overrides(values: list[str]) -> dict[str, object]:
    import json

    out: dict[str, object] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def default_env(root: Path, env: str | None) -> str | None:
    from sagestack.project import list_environments

    if env is not None:
        return env
    envs = list_environments(root)
    return "dev" if "dev" in envs else (envs[0] if envs else None)


def resolve_for(root: Path, env: str | None) -> Any:
    """The resolved plan of one environment, or every spec error and exit 2."""
    from sagestack.core.errors import SpecError
    from sagestack.project import load_project, resolve_environment

    err = console(stderr=True)
    name = default_env(root, env)
    if name is None:
        err.print("no environment: add config/envs/<env>.yaml or pass --env", markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    try:
        return resolve_environment(load_project(root, checked_env(root, name)))
    except SpecError as e:
        raise spec_errors(e, root) from None
