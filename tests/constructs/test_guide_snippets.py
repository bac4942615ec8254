"""Every ```python block of the constructs guide and the README runs as printed: each is written to
a fresh folder as app.py and run with this environment's Python, as `cdk synth` runs an app (the folder holds a copy of the
repository's training_src/ when the snippet names it, as the guide asks), synthesizing with cdk-nag
on and no unacknowledged finding. A block is skipped only when an HTML comment
`<!-- not run: <reason> -->` comes right before it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.synth

PAGES = ("docs/guide/constructs.md", "README.md")
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*\S.*?-->\s*$", re.S)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """(line, code, skipped) for each ```python block; skipped when `<!-- not run: … -->` (with a
    reason) is the last thing before the fence."""
    blocks = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip()
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((line, match.group(1), bool(_NOT_RUN.search(before[-300:]))))
    return blocks


def _snippets() -> list[object]:
    params = []
    for page in PAGES:
        for line, code, skipped in python_blocks((REPO / page).read_text()):
            marks = [pytest.mark.skip(reason="marked <!-- not run -->")] if skipped else []
            params.append(pytest.param(page, line, code, id=f"{page}:{line}", marks=marks))
    return params


def test_blocks_are_found_and_a_skip_needs_a_reason():
    text = "a\n<!-- not run: needs AWS credentials -->\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n", True), (7, "y = 2\n", False)]
    assert python_blocks("<!-- not run: -->\n```python\nx = 1\n```\n")[0][2] is False
    assert len(python_blocks((REPO / "docs/guide/constructs.md").read_text())) >= 2


@pytest.mark.parametrize(("page", "line", "code"), _snippets())
def test_each_python_block_runs_as_printed_with_cdk_nag_on(page, line, code, tmp_path):
    from sagestack.constructs.nag import unacknowledged_findings

    if "training_src" in code:
        shutil.copytree(REPO / "training_src", tmp_path / "training_src")
    (tmp_path / "app.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env["CDK_OUTDIR"] = str(tmp_path / "cdk.out")  # as `cdk synth` runs an app
    ran = subprocess.run(
        [sys.executable, "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    where = f"{page}:{line}"
    assert ran.returncode == 0, f"{where} failed as printed:\n{ran.stdout}{ran.stderr}"
    assembly = tmp_path / "cdk.out"
    assert (assembly / "manifest.json").exists(), f"{where} does not synthesize (app.synth())"
    assert "AwsSolutionsChecks" in code, f"{where} synthesizes without cdk-nag"
    assert unacknowledged_findings(assembly) == [], where
