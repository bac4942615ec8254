"""The guides' benchmark pictures: `sagestack local bench … --json` runs recorded on the example
project (docs/data/bench-<endpoint>.json, each read back by the command's own model, report.Sweep),
drawn at build time by the command's own chart function (chart.draw) into the site beside the guide
pages (guide/bench-<endpoint>.png), and printed as the command prints them (cli/local_bench.show)
where a page says `<!-- bench: <endpoint> -->`. Nothing is measured at build: the figures are the
recorded run's, so the table and the picture are of the same run."""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from sagestack.local.bench.report import Sweep

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data"
MARKER = re.compile(r"^<!-- bench: (?P<name>[\w-]+) -->$", re.M)


def recorded() -> dict[str, Sweep]:
    """Each recorded run by its name (docs/data/bench-<name>.json), read as `local bench` wrote it."""
    runs = {}
    for path in sorted(DATA.glob("bench-*.json")):
        try:
            runs[path.stem.removeprefix("bench-")] = Sweep.from_json(json.loads(path.read_text()))
        except ValueError as e:  # json's errors are ValueErrors too
            raise PluginError(
                f"{path.relative_to(REPO)}: {e}; record it again with `sagestack local bench … --json`"
            ) from None
    return runs


def chart_png(sweep: Sweep) -> bytes:
    """The PNG `local bench` writes for the run."""
    from sagestack.local.bench.chart import draw

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chart.png"
        draw(sweep, path)
        return path.read_bytes()


def chart_files(config: Any) -> list[File]:
    """guide/bench-<name>.png of every recorded run, as files of the site."""
    return [
        File.generated(config, f"guide/bench-{name}.png", content=chart_png(sweep))
        for name, sweep in recorded().items()
    ]


def screen(sweep: Sweep) -> str:
    """What the command printed for the run, in an 80-column terminal with no colour."""
    from rich.console import Console

    from sagestack.cli.local_bench import show

    out = io.StringIO()
    show(Console(file=out, width=80, no_color=True, color_system=None, highlight=False), sweep)
    return out.getvalue().rstrip()


def with_bench_screens(markdown: str) -> str:
    """The page with each `<!-- bench: <name> -->` line replaced by the recorded run's screen."""
    if not MARKER.search(markdown):
        return markdown
    runs = recorded()

    def block(match: re.Match[str]) -> str:
        if match["name"] not in runs:
            raise PluginError(f"<!-- bench: {match['name']} -->: no docs/data/bench-{match['name']}.json")
        return f"```text\n{screen(runs[match['name']])}\n```"

    return MARKER.sub(block, markdown)
