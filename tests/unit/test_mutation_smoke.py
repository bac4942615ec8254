"""`make mutate-smoke`: mutmut over one small module in a scratch copy of the tree, so that the
`make mutate` harness (its [tool.mutmut] configuration, the copy mutmut runs the tests in, the score)
cannot rot unnoticed. The kill rate itself is not asserted here: `make mutate` reports it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.mutation import EQUIVALENT, SMOKE_MODULE

pytest.importorskip("mutmut", reason="make setup installs mutmut (the dev extra)")


def test_mutate_smoke_runs_every_mutant_of_its_module_and_scores_it(tmp_path):
    out = tmp_path / "score.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.mutation",
            "--smoke",
            "--max-children",
            "2",
            "--json",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    score = json.loads(out.read_text())
    module = SMOKE_MODULE.removesuffix(".py").replace("/", ".")
    assert list(score["modules"]) == [module]
    assert score["total"] > 0 and score["not tried"] == 0 and score["suspicious"] == 0
    # the tests ran under the mutants: some die (a harness that runs no test kills nothing)
    assert score["killed"] > 0
    # each equivalent mutant listed for this module is still one that mutmut makes
    listed = [name for name in EQUIVALENT if name.startswith(module + ".")]
    assert score["equivalent"] == len(listed)
    assert f"kill rate {score['rate']:.1%}" in done.stdout
