"""What a command prints, captured at build time: a page's `<!-- screen: sagestack … -->` line becomes
the command and its output in an 80-column terminal, run in a project `sagestack init` has just
written (in a temporary folder), so the screens shown in Getting started are never out of date."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!-- screen: (?P<command>sagestack [^>]*?) -->$", re.M)
PROJECT = "digits"


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        AWS_EC2_METADATA_DISABLED="true",
        COLUMNS="80",
        NO_COLOR="1",
        TERM="dumb",
    )
    return env


def _run(command: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *shlex.split(command)[1:]],
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"`{command}` exited {done.returncode}: {done.stderr[-2000:]}")
    return (done.stdout + done.stderr).rstrip()


def with_screens(markdown: str) -> str:
    """The page with each screen marker replaced by the command and what it printed."""
    commands = [m["command"] for m in MARKER.finditer(markdown)]
    if not commands:
        return markdown
    with tempfile.TemporaryDirectory() as tmp:
        outputs: dict[str, str] = {}
        if not any(shlex.split(c)[1] == "init" for c in commands):
            _run(f"sagestack init {PROJECT}", Path(tmp))
        for command in commands:
            words = shlex.split(command)
            if words[1] == "init":  # the project folder is where the reader's would be: ./digits
                outputs[command] = _run(command, Path(tmp)).replace(tmp, "/home/you")
            else:
                outputs[command] = _run(command, Path(tmp) / PROJECT)

    def block(match: re.Match[str]) -> str:
        return f"```text\n$ {match['command']}\n{outputs[match['command']]}\n```"

    return MARKER.sub(block, markdown)
