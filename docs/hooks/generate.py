"""mkdocs hook (mkdocs.yml `hooks:`): the reference pages, generated from the code on every build
and handed to mkdocs as files in memory, so a build never writes into the repository; the script
that draws the pages' diagrams (diagrams.py); and the charts of recorded `local bench` runs, drawn by
the command's own code (bench_charts.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(Path(__file__).parent))

from bench_charts import chart_files, with_bench_screens
from code_reference import cli_reference, constructs_reference, rules_reference
from diagrams import mermaid_script
from props_tables import with_props_tables
from screens import with_screens
from spec_reference import spec_reference

REPO = Path(__file__).resolve().parents[2]


def pages() -> dict[str, str]:
    """Each generated page's path under docs/ and its Markdown."""
    guides = sorted((REPO / "docs" / "guide").glob("*.md"))
    return {
        "reference/spec.md": spec_reference(REPO, guides),
        "reference/rules.md": rules_reference(),
        "reference/cli.md": cli_reference(),
        "reference/constructs.md": constructs_reference(REPO / "sagestack" / "constructs"),
    }


def on_files(files: Files, config: Any) -> Files:
    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    files.append(mermaid_script(config))
    for chart in chart_files(config):
        files.append(chart)
    return files


TABLE = re.compile(r"<table>.*?</table>", re.S)
NAME = re.compile(r"<code>([^<\s]+)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Each code span of a table that holds no space (a variable's, a rule's, a file's name) is marked
    `name`: the site's CSS keeps it on one line, where Material would break it anywhere."""
    return TABLE.sub(lambda t: NAME.sub(r'<code class="name">\1</code>', t[0]), html)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Screens captured now (Getting started): the output of each `<!-- screen: … -->` command; and
    the constructs guide's props tables written from the code (`<!-- props: … -->`); a recorded
    `local bench` run as the command prints it (`<!-- bench: … -->`)."""
    return with_bench_screens(with_props_tables(with_screens(markdown)))
