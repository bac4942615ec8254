"""`make mutate`: mutmut over the modules pyproject.toml's [tool.mutmut] names, each mutant run against
the fast unit tests that cover it, then the score: how many of the mutants that are not equivalent to
the original the tests kill.

    python -m tests.support.mutation            # every module (minutes to an hour; resumes where it stopped)
    python -m tests.support.mutation --smoke    # one small module in a scratch copy (seconds)

mutmut 3 copies the tree to mutants/ (git-ignored) and keeps each verdict there, so a second run
only tries mutants it has no verdict for; `rm -rf mutants` starts over. A mutant counts as killed when
a test failed, timed out or crashed under it; as not killed when every test passed ("survived") or no
selected test reaches its function ("no tests"). EQUIVALENT lists the survivors that behave exactly
as the original, each with the reason; they leave the score's denominator.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GOAL = 0.90

# mutmut's exit codes (mutmut/stats.py), folded into what the score needs
KILLED = {
    1: "killed",
    3: "killed",
    36: "timeout",
    24: "timeout",
    -24: "timeout",
    152: "timeout",
    255: "timeout",
}
KILLED |= {-11: "segfault", -9: "segfault", 37: "caught by type check"}
NOT_KILLED = {0: "survived", 5: "no tests", 33: "no tests", 35: "suspicious"}

# Survivors that no test can kill because the program behaves the same: name -> why.
EQUIVALENT: dict[str, str] = {
    "sagestack.core.catalog.suggest.x_closest__mutmut_15": (
        "drops cutoff=cutoff from difflib.get_close_matches, whose own default cutoff is 0.6, the value passed"
    ),
}

# The smoke run: one small module and the test file that covers it.
SMOKE_MODULE = "sagestack/core/catalog/suggest.py"
SMOKE_TESTS = ["tests/unit/test_catalog.py"]
COPIED = ["sagestack", "tests", "config", "training_src", "containers", "examples", "schema"]


def verdicts(root: Path) -> dict[str, int | None]:
    """Every mutant's exit code from mutmut's records under root/mutants (None: not tried yet)."""
    found: dict[str, int | None] = {}
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        found.update(json.loads(meta.read_text())["exit_code_by_key"])
    return found


def score(found: dict[str, int | None]) -> dict[str, object]:
    statuses = Counter()
    survivors = []
    for name, code in found.items():
        if code is None:
            statuses["not tried"] += 1
        elif code in KILLED:
            statuses["killed"] += 1
        elif name in EQUIVALENT:
            statuses["equivalent"] += 1
        else:
            statuses[NOT_KILLED.get(code, "suspicious")] += 1
            survivors.append(name)
    judged = sum(statuses[s] for s in ("killed", "survived", "no tests", "suspicious"))
    return {
        "total": len(found),
        **{
            s: statuses[s]
            for s in ("killed", "survived", "no tests", "suspicious", "equivalent", "not tried")
        },
        "rate": statuses["killed"] / judged if judged else 0.0,
        "survivors": sorted(survivors),
    }


def per_module(found: dict[str, int | None]) -> dict[str, str]:
    """module -> 'killed/judged' (equivalents left out), for the report."""
    tally: dict[str, Counter] = {}
    for name, code in found.items():
        module = name.split(".x_")[0].split(".xǁ")[0]
        c = tally.setdefault(module, Counter())
        if code is None or name in EQUIVALENT:
            continue
        c["judged"] += 1
        c["killed"] += code in KILLED
    return {m: f"{c['killed']}/{c['judged']}" for m, c in sorted(tally.items())}


def run_mutmut(root: Path, max_children: int) -> int:
    env = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    mutmut = Path(sys.executable).with_name("mutmut")
    done = subprocess.run(
        [str(mutmut), "run", "--max-children", str(max_children)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if done.returncode != 0:
        print(done.stdout[-4000:], file=sys.stderr)
    return done.returncode


def smoke_copy(into: Path) -> Path:
    """A scratch copy of the tree whose pyproject.toml mutates only SMOKE_MODULE against SMOKE_TESTS."""
    ignore = shutil.ignore_patterns("__pycache__", "mutants", ".hypothesis")
    for name in COPIED:
        shutil.copytree(REPO / name, into / name, ignore=ignore)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    mutmut = {**project["tool"]["mutmut"], "only_mutate": [SMOKE_MODULE]}
    mutmut["pytest_add_cli_args_test_selection"] = SMOKE_TESTS
    pytest_options = project["tool"]["pytest"]["ini_options"]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in pytest_options.items() if k != "testpaths"]
    lines += ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in mutmut.items()]
    (into / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one small module in a scratch copy")
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 below this kill rate (0-1)")
    parser.add_argument("--json", type=Path, help="write the score here as JSON")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sagestack-mutate-") as scratch:
        root = smoke_copy(Path(scratch)) if args.smoke else REPO
        code = run_mutmut(root, args.max_children)
        found = verdicts(root)
    if code != 0 or not found:
        print(f"mutmut exited {code} with {len(found)} verdicts", file=sys.stderr)
        return 2
    result = score(found)
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["modules"] = per_module(found)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'module':<52} killed/judged")
    for module, ratio in result["modules"].items():  # type: ignore[union-attr]
        print(f"  {module:<50} {ratio}")
    for name in result["survivors"]:  # type: ignore[union-attr]
        print(f"  survived: {name}  (mutmut show {name})")
    print(
        f"mutants {result['total']}: killed {result['killed']}, survived {result['survived']}, "
        f"no tests {result['no tests']}, suspicious {result['suspicious']}, equivalent {result['equivalent']}, "
        f"not tried {result['not tried']}; kill rate {result['rate']:.1%} of the non-equivalent "
        f"(goal {GOAL:.0%}); {result['wall_s']} s"
    )
    return 1 if result["rate"] < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
