"""`make mutate`: mutmut over the modules pyproject.toml's [tool.mutmut] names, each mutant run against
the fast unit tests that cover it, then the score: how many of the mutants that are not equivalent to
the original the tests kill.

    python -m tests.support.mutation            # every module (minutes to an hour; resumes where it stopped)
    python -m tests.support.mutation --smoke    # one small module in a scratch copy (seconds)
    python -m tests.support.mutation --module sagestack/llm/sizing.py --max-children 1
                                                # one module against its own tests (MODULE_TESTS), in a
                                                # scratch copy kept under $TMPDIR/sagestack-mutate/ (resumes)

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

# Survivors that no test can kill because the program behaves the same: name -> why. Checked by hand
# against `mutmut show NAME`; mutants are numbered per function, so a change to one renumbers its mutants
# (the smoke test notices for its module).
_UPPER = "sm_variables upper-cases every key (SM_{KEY}): a key written in capitals is the same variable"
_CALLERS = "render_training_request always sets the key, so the default of .get/.pop is never used"
EQUIVALENT: dict[str, str] = {
    "sagestack.core.catalog.suggest.x_closest__mutmut_15": (
        "drops cutoff=cutoff from difflib.get_close_matches, whose own default cutoff is 0.6, the value passed"
    ),
    **{
        f"sagestack.core.contract.x_sm_variables__mutmut_{n}": _UPPER
        for n in (
            6,
            10,
            14,
            18,
            22,
            26,
            30,
            34,
            38,
            43,
            47,
            51,
            55,
            59,
            63,
            67,
            71,
            75,
            79,
            83,
            87,
            91,
            95,
            99,
            103,
            107,
            111,
            115,
            119,
            122,
            125,
            132,
        )
    },
    "sagestack.core.contract.x_env_value__mutmut_3": "bytes.decode('LATIN1') is the same codec as 'latin1'",
    "sagestack.core.contract.x__arg_text__mutmut_5": "bytes.decode('LATIN1') is the same codec as 'latin1'",
    "sagestack.core.contract.x_env_value__mutmut_13": "drops ensure_ascii=True, json.dumps' default",
    **{
        f"sagestack.core.contract.x_training_environment__mutmut_{n}": (
            "framework.get(flag) for a truth test: a default of None (or none) is as false as False"
        )
        for n in (40, 42)
    },
    **{
        f"sagestack.local.training.launch.x_plan_launch__mutmut_{n}": (
            "framework.get(flag) for a truth test: a default of None (or none) is as false as False"
        )
        for n in (20, 22)
    },
    **{
        f"sagestack.core.contract.x_sagemaker_process_exports__mutmut_{n}": (
            "sm.get('sagemaker_region', '') or '': a default of None (or none) ends as '' all the same"
        )
        for n in (18, 20)
    },
    **{
        f"sagestack.core.catalog.instances.x__split__mutmut_{n}": (
            "split('.', 2) / rsplit('.', 2) / split('.', 3) / split('.') agree on every SageMaker instance type "
            "name (ml.FAMILY.SIZE: all 356 the catalog knows have exactly two dots)"
        )
        for n in (5, 6, 8)
    },
    "sagestack.core.catalog.images.x__cache_path__mutmut_16": (
        "importlib.metadata.version normalizes the distribution name: 'SAGEMAKER-CORE' is sagemaker-core"
    ),
    **{
        f"sagestack.core.catalog.images.x__store__mutmut_{n}": (
            "the cache file's indent and key order: it is only read back by json.loads"
        )
        for n in (25, 26, 29, 30, 31, 32)
    },
    **{
        f"sagestack.core.catalog.images.x__store__mutmut_{n}": (
            "the temporary file's name prefix: os.replace gives it the cache's name"
        )
        for n in (12, 14, 15, 16)
    },
    **{
        f"sagestack.endpoints.request.x_compile_digest__mutmut_{n}": (
            "model_dump in python mode (an unknown mode is python) dumps to the same JSON: every field of "
            "CompileSpec is a str, int, list or dict (checked for a target_device and a target_platform)"
        )
        for n in (8, 9, 10)
    },
    "sagestack.training.preferences.x_preferred_job__mutmut_9": (
        "the second candidate's request instead of the first: preferred_job runs only after "
        "preference_refusal found the requests equal but for the fields it then overwrites or removes"
    ),
    "sagestack.training.preferences.x_preferred_job__mutmut_42": _CALLERS,
    **{f"sagestack.tuning.request.x_render_tuning_request__mutmut_{n}": _CALLERS for n in (211, 213)},
    **{
        f"sagestack.tuning.request.x_grid_points__mutmut_{n}": (
            "zip(names, combo) of itertools.product over those names: always the same length, strict or not"
        )
        for n in (8, 11, 12)
    },
    "sagestack.training.rules_platform.x__version_tuple__mutmut_8": (
        "a 4th version part cannot change a comparison with (2, 0): the first three already decide it"
    ),
    **{
        f"sagestack.endpoints.components.xǁCapacityǁfits__mutmut_{n}": (
            "< for <= beside the 1e-9 tolerance: they differ only for a copy asking exactly 1e-9 more "
            "CPU (3) or MB (6) than is free, which no spec can write (cores in steps a float can hold, MB whole)"
        )
        for n in (3, 6)
    },
    **{
        f"sagestack.core.drivers.x__installed_version__mutmut_{n}": (
            "the path _site is asked for (3: None, 6: 'XXXX') is never used: metadata.version found no "
            "distribution, so _site's own lookup of the same name raises first"
        )
        for n in (3, 6)
    },
    **{
        f"sagestack.core.drivers.x__installed_version__mutmut_{n}": (
            "the AssertionError's message: unreachable, _site raises DriversUnavailable for the same missing "
            "distribution on the line before"
        )
        for n in (7, 8, 9)
    },
    "sagestack.core.drivers.x_pack_drivers__mutmut_16": (
        "b'XX\\0XX' for b'\\0' between a path and its file's sha256: the digest still names each path and "
        "its bytes unambiguously (no path holds a NUL, the sha256 is 32 bytes); it is an address compared "
        "only with itself"
    ),
    "sagestack.llm.sizing.x_devices__mutmut_16": (
        "'if acc.memory_gib or True': every Neuron accelerator in the catalog states its memory_gib "
        "(inf1, inf2, trn1, trn1n, trn2: checked over all 356 types), so the guard is always true"
    ),
    "sagestack.llm.sizing.x_kv_cache__mutmut_17": (
        "environment.get(kv_dtype, 'XXXX') for '': the default only feeds .startswith('fp8'), false for both"
    ),
    "sagestack.core.sourcedir.x__translate__mutmut_44": (
        "i += 3 for i += 2 after a trailing '**': that branch runs only when i + 2 == n, so the loop ends either way"
    ),
    **{
        f"sagestack.core.sourcedir.x__translate__mutmut_{n}": (
            "_class_end(...) <= 0 / < 1 for < 0: it returns -1 or the index of a ']' at least two past the '[' "
            "(so never 0)"
        )
        for n in (82, 83)
    },
    "sagestack.core.sourcedir.x__translate__mutmut_97": (
        "a class opened with '^' is not rewritten: '^' + inner[1:] is inner itself, the same expression"
    ),
    **{
        f"sagestack.core.sourcedir.x_select_source_files__mutmut_{n}": (
            "DirEntry.is_dir/is_file(follow_symlinks=None) is false like False (a predicate argument)"
        )
        for n in (16, 48)
    },
    "sagestack.core.sourcedir.x_select_source_files__mutmut_17": (
        "is_dir following links: a link is handled by the `if link` branch before `elif is_dir`, and the "
        "ignore check already ORs in `link and path.is_dir()`"
    ),
    "sagestack.core.sourcedir.x_select_source_files__mutmut_49": (
        "is_file following links: the branch is reached only by an entry that is not a link"
    ),
    "sagestack.core.sourcedir.x_select_source_files__mutmut_52": (
        "members sorted as whole tuples instead of by path: the paths are unique, so the first element decides"
    ),
    "sagestack.core.sourcedir.x_parse_ignore__mutmut_4": (
        "lstrip('\\n') for rstrip('\\n'): no line holds a newline (both callers pass DEFAULT_IGNORED or "
        "str.splitlines())"
    ),
    "sagestack.core.sourcedir.x_parse_ignore__mutmut_47": (
        "body.startswith('XX**/XX') for '**/': the test is dead, a body starting with '**/' holds a '/', so "
        "`anchored` is already true"
    ),
    "sagestack.core.sourcedir.xǁSourceSelectionǁexcluded__mutmut_10": (
        "range(1, len + 2): the extra depth slices parts[:len + 1], the whole path again, judged as a file "
        "as the last depth was"
    ),
    **{
        f"sagestack.core.sourcedir.xǁSourceSelectionǁsecret_files__mutmut_{n}": (
            "rsplit('/') or rsplit('/', 2) for rsplit('/', 1): the last part, [-1], is the same"
        )
        for n in (6, 9)
    },
    **{
        f"sagestack.core.sourcedir.x_pack_source_dir__mutmut_{n}": (
            "tarfile.open's format left to its default: tarfile.DEFAULT_FORMAT is PAX_FORMAT (Python >= 3.8)"
        )
        for n in (10, 13)
    },
    **{
        f"sagestack.core.sourcedir.x_pack_source_dir__mutmut_{n}": (
            "GzipFile's filename None or left out: it takes fileobj's name, and a BytesIO has none, so ''"
        )
        for n in (42, 47)
    },
    "sagestack.core.sourcedir.x_pack_source_dir__mutmut_51": "drops compresslevel=9, GzipFile's default",
    **{
        f"sagestack.core.sourcedir.x_dockerfile_fingerprint__mutmut_{n}": (
            "a constant of the hashed text (the separator after a path, the JSON's key names): every "
            "fingerprint changes value once, as any change of sagestack's hashing does, but it still "
            "follows exactly the same inputs (the tests change each one), and two build folders share one "
            "only as before"
        )
        for n in (18, 25, 26, 27, 28)
    },
    **{
        f"sagestack.core.names.xǁNamesǁ{fn}__mutmut_{n}": (
            "rstrip('XX-XX') for rstrip('-'): a name holds no capital X (Names refuses capitals in the "
            "project and environment, entry names are lowercase), so both strip the same '-'"
        )
        for fn, n in (
            ("training_job", 7),
            ("preference_job", 7),
            ("optimization_job", 7),
            ("tuning_job", 7),
            ("compilation_prefix", 4),
            ("transform_prefix", 3),
            ("retrain_schedule", 9),
        )
    },
}

# The smoke run: one small module and the test file that covers it.
SMOKE_MODULE = "sagestack/core/catalog/suggest.py"
SMOKE_TESTS = ["tests/unit/test_catalog.py"]
COPIED = ["sagestack", "tests", "config", "training_src", "containers", "examples", "schema"]

# `--module`: the fast unit tests that judge each module run by itself (every module here is also in
# pyproject's only_mutate, and these files in its selection, for the full run). A mutant survives when
# the test file that would kill it is not in the run's selection: list each file that exercises the
# module. The constructs (sagestack/constructs/) are judged by synthesized templates, minutes per run:
# they are not mutated; their boundaries are pinned by template assertions (tests/constructs).
MODULE_TESTS: dict[str, list[str]] = {
    "sagestack/core/drivers.py": [
        "tests/unit/test_drivers_request.py",
        "tests/unit/test_rules_launcher.py",
        "tests/unit/test_lock_diff.py",
    ],
    "sagestack/training/launch_files.py": [
        "tests/unit/test_drivers_request.py",
        "tests/unit/test_lock_diff.py",
    ],
    "sagestack/core/sourcedir.py": [
        "tests/unit/test_source_packing.py",
        "tests/unit/test_source_rules.py",
    ],
    "sagestack/llm/environment.py": [
        "tests/unit/test_llm_core.py",
        "tests/unit/test_llm_rules.py",
        "tests/unit/test_llm_kv_cache.py",
    ],
    "sagestack/llm/sizing.py": [
        "tests/unit/test_llm_core.py",
        "tests/unit/test_llm_rules.py",
        "tests/unit/test_llm_kv_cache.py",
        "tests/unit/test_endpoint_capacity.py",
    ],
    "sagestack/core/names.py": [
        "tests/unit/test_names_limits.py",
        "tests/unit/test_name_scoping.py",
        "tests/unit/test_job_identity.py",
        "tests/unit/test_environment_names.py",
        "tests/unit/test_training_requests.py",
        "tests/unit/test_tuning_requests.py",
        "tests/unit/test_llm_optimization.py",
        "tests/unit/test_serving_rules.py",
    ],
    "sagestack/endpoints/components.py": [
        "tests/unit/test_serving_mode_rules.py",
        "tests/unit/test_endpoint_capacity.py",
    ],
    "sagestack/capacity/endpoints.py": ["tests/unit/test_endpoint_capacity.py"],
}
# Not here: local/serving/batching.py (and the rest of local serve). Its mutants that stretch a wait (the
# batch delay, a queue read) hang without using CPU, and mutmut stops a mutant only on CPU time;
# its boundaries are pinned by tests/unit/test_local_serving_edges.py instead.


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
    return {
        m: f"{c['killed']}/{c['judged']}" + (f" ({c['killed'] / c['judged']:.0%})" if c["judged"] else "")
        for m, c in sorted(tally.items())
    }


def run_mutmut(root: Path, max_children: int, names: list[str] | None = None) -> int:
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    mutmut = Path(sys.executable).with_name("mutmut")
    done = subprocess.run(
        [str(mutmut), "run", "--max-children", str(max_children), *(names or [])],
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
    return scratch_copy(into, [SMOKE_MODULE], SMOKE_TESTS)


def module_copy(module: str) -> Path:
    """A scratch copy that mutates `module` against MODULE_TESTS[module], kept between runs (its
    mutants/ holds the verdicts; the sources are copied afresh, so mutmut retries what changed)."""
    into = Path(tempfile.gettempdir()) / "sagestack-mutate" / module.removesuffix(".py").replace("/", ".")
    into.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.rmtree(into / name, ignore_errors=True)
    return scratch_copy(into, [module], MODULE_TESTS[module])


def scratch_copy(into: Path, modules: list[str], tests: list[str]) -> Path:
    """A copy of the tree under `into` whose pyproject.toml mutates only `modules` against `tests`."""
    ignore = shutil.ignore_patterns("__pycache__", "mutants", ".hypothesis")
    for name in COPIED:
        shutil.copytree(REPO / name, into / name, ignore=ignore)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    mutmut = {**project["tool"]["mutmut"], "only_mutate": modules}
    mutmut["pytest_add_cli_args_test_selection"] = tests
    pytest_options = project["tool"]["pytest"]["ini_options"]
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in pytest_options.items() if k != "testpaths"]
    lines += ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in mutmut.items()]
    (into / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one small module in a scratch copy")
    parser.add_argument(
        "--module",
        choices=sorted(MODULE_TESTS),
        help="one module against its own tests (MODULE_TESTS), in a scratch copy kept between runs",
    )
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--retry",
        action="store_true",
        help="run again the mutants not killed last time (mutmut keeps a verdict until its function changes); mutmut then forgets the other verdicts of the functions whose tests changed: run once more without --retry",
    )
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 below this kill rate (0-1)")
    parser.add_argument("--json", type=Path, help="write the score here as JSON")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sagestack-mutate-") as scratch:
        if args.smoke:
            root = smoke_copy(Path(scratch))
        elif args.module:
            root = module_copy(args.module)
        else:
            root = REPO
        retry = [n for n, c in verdicts(root).items() if c not in KILLED and n not in EQUIVALENT]
        code = run_mutmut(root, args.max_children, retry if args.retry else None)
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
