"""The documentation site built once per test session into a temporary folder (never site/, never the
repository): `mkdocs build --strict`, which fails on a broken link, a missing nav page or an anchor
that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def build(site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def nav_pages() -> Iterator[tuple[str, str]]:
    """(title, source path under docs/) of every page in mkdocs.yml's nav."""

    def walk(items: list[Any]) -> Iterator[tuple[str, str]]:
        for item in items:
            ((title, value),) = item.items()
            if isinstance(value, list):
                yield from walk(value)
            else:
                yield title, value

    yield from walk(yaml.load((REPO / "mkdocs.yml").read_text(), _MkdocsYaml)["nav"])


class _MkdocsYaml(yaml.SafeLoader):
    """mkdocs.yml as data: a `!!python/name:` tag (the Mermaid fence's formatter) is read as its name."""


_MkdocsYaml.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: suffix)


def url_of(source: str) -> str:
    """The file mkdocs writes a page to (use_directory_urls: false, so the site browses from the disk)."""
    return source.removesuffix(".md") + ".html"
