"""`sagestack plan` of the example project as a terminal shows it (COLUMNS=80 and 120, not a
terminal: a pipe): no line wider than the screen, no name folded mid-word, every `sagestack …`
command whole on one line, a header over every column, one cost format per column."""

from __future__ import annotations

import itertools
import re

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.project import load_project
from tests.conftest import REPO

ENVS = ("dev", "staging", "prod")
MONEY = re.compile(r"^\$[\d,]+(\.\d+)?$")


def _plan(env: str, columns: int) -> list[str]:
    result = CliRunner().invoke(
        app, ["plan", "--env", env, "--root", str(REPO)], env={"COLUMNS": str(columns), "TERM": "dumb"}
    )
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _names(env: str) -> set[str]:
    spec = load_project(REPO, env).spec
    return {*spec.jobs, *spec.tuning, *spec.endpoints, *spec.transforms}


def _tables(lines: list[str]) -> list[list[str]]:
    """Each table: its header line, then its rows (up to the blank line that closes it)."""
    found = []
    for i, line in enumerate(lines):
        if i and set(line.strip()) == {"─"}:
            rows = []
            for row in lines[i + 1 :]:
                if not row.strip():
                    break
                rows.append(row)
            found.append([lines[i - 1], *rows])
    return found


def _columns(table: list[str]) -> list[tuple[int, int]]:
    """Column spans: runs of positions that are not blank in every line of the table."""
    width = max(map(len, table))
    used = [any(i < len(line) and line[i] != " " for line in table) for i in range(width)]
    spans, start = [], None
    for i, u in enumerate([*used, False]):
        if u and start is None:
            start = i
        elif not u and start is not None:
            if i - start > 0:
                spans.append((start, i))
            start = None
    # cells are padded by two blanks at least; a single blank inside a cell joins its halves
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s - merged[-1][1] < 2:
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("env", ENVS)
def test_plan_fits_the_screen_and_keeps_words_whole(env: str, columns: int) -> None:
    lines = _plan(env, columns)
    too_wide = [line for line in lines if len(line) > columns]
    assert not too_wide, "\n".join(too_wide)

    names = _names(env)
    for name in names:
        assert any(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", line) for line in lines), name
    words = [{t.strip("():,→") for t in line.split()} for line in lines]
    for above, below in itertools.pairwise(words):  # a name folded: its head ends a line, its tail below
        folded = [n for n in names for k in range(1, len(n)) if n[:k] in above and n[k:] in below]
        assert not folded, folded

    for line in lines:  # a command is quoted `…`, and the quotes close on the line they open
        assert line.count("`") % 2 == 0, line
        assert not re.search(r"sagestack [a-z]+", line.replace("`sagestack", "")), line
    assert any(f"`sagestack quota snapshot --env {env}`" in line for line in lines)

    tables = _tables(lines)
    assert len(tables) >= 3
    for table in tables:
        header = table[0]
        for start, end in _columns(table):
            assert header[start:end].strip(), "a column with no header:\n" + "\n".join(table)
            cells = {line[start:end].strip() for line in table[1:]}
            money = {c for c in cells if MONEY.match(c)}
            formats = {len(c.partition(".")[2]) for c in money}
            assert len(formats) <= 1, f"{header[start:end].strip()}: {sorted(money)}"
        assert "…" not in header, header


def test_a_command_longer_than_the_screen_is_continued_as_bash_reads_it() -> None:
    """The quota increase a shortfall suggests is 109 characters: at 80 columns it gets lines of its
    own, continued with ` \\`; pasted into bash, it is the same command."""
    import shlex
    import subprocess

    from sagestack.ops.screen import fit, quote_commands

    command = (
        "aws service-quotas request-service-quota-increase --service-code sagemaker "
        "--quota-code L-P5 --desired-value 5"
    )
    lines = fit(quote_commands(f"✗ job 'big' is short. To fix: ask for more: {command}"), 80)
    assert all(len(line) <= 80 for line in lines), lines
    pasted = "\n".join(line for line in lines if line.lstrip().startswith(("aws", "--")))
    assert pasted.count(" \\\n") >= 1, lines
    argv = subprocess.run(
        ["bash", "-c", "printf '%s\\n' " + pasted.strip()], capture_output=True, text=True, check=True
    ).stdout.split("\n")[:-1]
    assert argv == shlex.split(command)
