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


def test_each_module_run_by_itself_is_in_the_full_run_with_its_tests():
    """`--module` runs a module against MODULE_TESTS; `make mutate` must mutate the same module and
    select the same files, or a mutant the module's own tests kill would survive the full run."""
    import tomllib
    from fnmatch import fnmatch

    from tests.support.mutation import MODULE_TESTS

    mutmut = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    for module, tests in MODULE_TESTS.items():
        assert any(fnmatch(module, pattern) for pattern in mutmut["only_mutate"]), module
        assert set(tests) <= set(mutmut["pytest_add_cli_args_test_selection"]), module
        assert all((REPO / t).is_file() for t in tests), module
