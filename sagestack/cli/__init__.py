"""The `sagestack` command: a thin layer over the library, one module per kind of command (spec,
local, account, deploy, lifecycle, status, cost) sharing options and loaders (common). Heavy modules (aws_cdk, torch, boto3,
sagemaker.core) are imported inside the commands that need them, so `sagestack --help` is fast."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from sagestack.cli import account, cost, day2, deploy, lifecycle, local, recommend, spec, status
from sagestack.cli.common import EXIT_INVALID_SPEC, UserError, report_issues, terminal_lines
from sagestack.cli.conventions import apply_conventions, print_version

app = typer.Typer(
    name="sagestack",
    help="Declarative deep-learning infrastructure on Amazon SageMaker, runnable locally.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def sagestack(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="sagestack's version and those of aws-cdk-lib and botocore it runs with",
            is_eager=True,
            callback=print_version,
        ),
    ] = False,
) -> None:
    """Declarative deep-learning infrastructure on Amazon SageMaker, runnable locally."""


for module in (spec, deploy, lifecycle, recommend, account, status, day2, cost):
    for command in module.app.registered_commands:
        app.registered_commands.append(command)
    for group in module.app.registered_groups:
        app.registered_groups.append(group)
app.add_typer(local.local_app, name="local")
apply_conventions(app)


def main() -> None:
    """Entry point: never a traceback for a user's mistake; SAGESTACK_DEBUG=1 shows one for ours."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except UserError as e:
        for line in terminal_lines(f"sagestack: {e}"):
            print(line, file=sys.stderr)
        sys.exit(e.code)
    except Exception as e:
        # A spec problem found by any command: the report, exit 2. (A SpecError can only come from
        # a loaded sagestack.project, so it is looked up there: importing it here would slow --help.)
        spec_errors = sys.modules.get("sagestack.core.errors")
        if spec_errors is not None and isinstance(e, spec_errors.SpecError):
            report_issues([(None, e.issues)])
            sys.exit(EXIT_INVALID_SPEC)
        if os.environ.get("SAGESTACK_DEBUG"):
            raise
        print(f"sagestack: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        print("Run again with SAGESTACK_DEBUG=1 for the traceback, and report it.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
