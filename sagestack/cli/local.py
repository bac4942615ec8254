"""`sagestack local …`: the spec's work on this machine (no AWS account), one module per kind of
work: training (train, tune), serving (compile, serve, bench), transform, monitor."""

from __future__ import annotations

import typer

from sagestack.cli import local_bench, local_monitor, local_serving, local_training, local_transform

local_app = typer.Typer(help="Run the spec's work on this machine (no AWS account).", no_args_is_help=True)
for module in (local_training, local_serving, local_bench, local_transform, local_monitor):
    local_app.registered_commands += module.app.registered_commands
