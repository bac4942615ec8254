"""The `sagestack logs` screen the command-line guide shows is what the command prints today: the
guide's block against the finished two-host job of the logs tests' account (a moto server with the
job's CloudWatch streams), character for character."""

from __future__ import annotations

from typer.testing import CliRunner

from sagestack.cli import app
from tests.docs.test_screens_status import shown
from tests.unit.test_day2 import DONE, aws, moto, world

__all__ = ["aws", "moto", "world"]


def test_the_guides_logs_screen_is_what_logs_prints(aws) -> None:
    done = CliRunner().invoke(
        app, ["logs", DONE, "--env", "dev", "--root", str(aws.root)], env={"COLUMNS": "80"}
    )
    assert done.exit_code == 0, done.output
    printed = done.output.rstrip()
    assert shown("A job's logs: `sagestack logs`") == printed, (
        f"docs/guide/cli.md's logs screen differs from what `sagestack logs` prints now; paste this:\n{printed}"
    )
