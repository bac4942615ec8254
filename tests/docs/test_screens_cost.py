"""The `sagestack cost` screens the command-line guide shows are what the command prints today: the
guide's blocks against the screens of the cost tests' account (tests/unit/test_cost.py: Cost
Explorer answered by moto with posted results, the tags' state validated against botocore's model),
the clock's readings and the days (the read time, the period, the backfill month) left out."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from sagestack.cli import app
from tests.docs.site import REPO
from tests.support.answered import with_answers
from tests.unit.test_cost import REST, SECOND, TAGS, _spend, _tags, _two_endpoints, aws, moto

__all__ = ["aws", "moto"]

GUIDE = REPO / "docs" / "guide" / "cli.md"
SECTION = "What it costs: `sagestack cost`"
CLOCK = re.compile(r"\b\d{4}-\d\d-\d\d(?:T[\d:]+Z| \d\d:\d\d)?\b|\b\d\d-\d\d\b|\b\d\d:\d\d\b")


def shown() -> list[str]:
    """The ```text blocks under the guide's cost heading, up to the next heading."""
    text = GUIDE.read_text()
    start = text.index(f"\n## {SECTION}")
    end = text.index("\n## ", start + 1)
    return [b.rstrip() for b in re.findall(r"^```text\n(.*?)^```", text[start:end], re.S | re.M)]


def _printed(project, *args: str) -> str:  # type: ignore[no-untyped-def]
    done = CliRunner().invoke(
        app, ["cost", "--env", "dev", "--root", str(project.root), *args], env={"COLUMNS": "80"}
    )
    assert done.exit_code == 0, done.output
    return done.output.rstrip()


def _same(guide: str, printed: str, what: str) -> None:
    assert CLOCK.sub("<date>", guide) == CLOCK.sub("<date>", printed), (
        f"docs/guide/cli.md's cost screen ({what}) differs from what `sagestack cost` prints now; "
        f"paste this:\n{printed}"
    )


def test_the_guides_cost_screen_is_what_cost_prints(aws, moto, monkeypatch) -> None:
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _spend(moto)
    _same(shown()[0], _printed(aws, "--days", "2"), "the spend by tag")


def test_the_guides_tags_screen_is_what_cost_prints(aws, moto, monkeypatch) -> None:
    states = {"sagestack:project": "Inactive", "sagestack:environment": "Inactive"}
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(states)}})
    printed = _printed(aws)
    cut = printed.index("\n", printed.index("are active"))  # the guide: the tags and the spend's line
    _same(shown()[2], printed[printed.index("\n") + 1 : cut], "the tags not active")


def test_the_guides_older_deployment_screen_is_what_cost_prints(aws, moto, monkeypatch) -> None:
    with_answers(monkeypatch, {"ce": {"ListCostAllocationTags": _tags(dict.fromkeys(TAGS, "Active"))}})
    _two_endpoints(aws)
    host = (["Amazon SageMaker", "USE1-Host:ml.c5.xlarge"], "18.00")
    _spend(
        moto, [(["sagestack:endpoint$digits"], "20.00"), (["sagestack:endpoint$"], "20.00")], [host, *REST]
    )
    printed = _printed(aws, "--days", "2")
    lines = printed.splitlines()
    # the guide shows the endpoints' rows and the note: from the first endpoint to the services
    first = next(i for i, line in enumerate(lines) if line.startswith("  endpoint "))
    shown_lines = lines[first : next(i for i, line in enumerate(lines) if line.startswith("  other:"))]
    assert SECOND in printed
    _same(shown()[1], "\n".join(shown_lines), "an older deployment")
