"""What every command shares: the consoles, the --root / --env / --set options, loading a spec
or a plan with every error reported (exit 2), and the one handler for a user's mistakes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

EXIT_INVALID_SPEC = 2
EXIT_QUOTA_SHORT = 3

RootOption = Annotated[
    Path, typer.Option("--root", help="project root (holds config/sagestack.yaml)", show_default=False)
]
EnvOption = Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")]
SetOption = Annotated[list[str] | None, typer.Option("--set", help="override a hyperparameter: KEY=VALUE")]


class UserError(Exception):
    """A mistake the user can fix: printed as is (no traceback), with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def spec_errors(e: Any) -> typer.Exit:
    """Print every issue of a SpecError; the exit to raise."""
    err = console(stderr=True)
    for issue in e.issues:
        err.print(issue.format(), markup=False)
    return typer.Exit(EXIT_INVALID_SPEC)


def load_entry(
    root: Path, env: str | None, name: str, entries: Callable[[Any], Iterable[str]], what: str
) -> Any:
    """The spec as `env` sees it, with `name` among `entries(spec)`; else every problem, and exit 2."""
    from sagestack.core.catalog.suggest import did_you_mean
    from sagestack.core.errors import SpecError
    from sagestack.project import load_project

    err = console(stderr=True)
    try:
        loaded = load_project(root, env)
    except SpecError as e:
        raise spec_errors(e) from None
    known = list(entries(loaded.spec))
    if name not in known:
        err.print(
            f"no {what} '{name}'{did_you_mean(name, known)} (defined: {', '.join(known) or 'none'})",
            markup=False,
        )
        raise typer.Exit(EXIT_INVALID_SPEC)
    return loaded


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
        return resolve_environment(load_project(root, name))
    except SpecError as e:
        raise spec_errors(e) from None
