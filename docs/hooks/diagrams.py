"""The site's diagrams: each ```mermaid fence of a page (pymdownx.superfences' custom fence, mkdocs.yml)
is drawn in the reader's browser by Mermaid, which Material for MkDocs runs when a page has one. The
script is the npm package @mermaid-js/tiny (package.json, installed by `make setup`), shipped inside the
site: nothing is fetched from elsewhere, so the diagrams draw offline and from the disk (file://)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "node_modules" / "@mermaid-js" / "tiny" / "dist" / "mermaid.tiny.js"
# where the site serves it: mkdocs.yml's extra_javascript names this path
SITE_PATH = "assets/javascripts/mermaid.tiny.js"


def mermaid_script(config: Any) -> File:
    """The Mermaid script as a file of the site (copied from node_modules on every build)."""
    if not SCRIPT.is_file():
        raise PluginError(
            f"{SCRIPT.relative_to(REPO)} is missing: the diagrams are drawn by the npm package "
            "@mermaid-js/tiny; run `make setup` (or `npm ci`) to install it"
        )
    return File.generated(config, SITE_PATH, abs_src_path=str(SCRIPT))
