#!/usr/bin/env python3
"""Loading a spec under hostile sizes (issue 26), in one run:

- an overlay of N tag keys merged onto the example project (2,000 keys took 2.1 s and 8,000 keys
  20 s when merging was quadratic): seconds per N, microseconds per key, and the ratio of the
  largest N's time to the smallest's beside the ratio of their key counts (linear: about equal);
- an overlay at the 1 MiB limit (goal: about a second);
- refusing a 5,000-deep `[[[…]]]` (was ~4 s per parse), once and as `sagestack validate` over three
  environments (was 12.8 s: one parse per environment).

Each figure is the best of --runs runs (the machine is shared: the best is the least disturbed).
--smoke: small inputs, one run (the tests run it so that the benchmark cannot rot).
Usage: python bench/load.py [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import gc
import io
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sagestack.core.errors import SpecError  # noqa: E402
from sagestack.core.yamldoc import MAX_SPEC_BYTES  # noqa: E402
from sagestack.project import load_project  # noqa: E402


def example_root(overlay: str, project: str | None = None) -> Path:
    root = Path(tempfile.mkdtemp(prefix="bench-load-"))
    for part in ("config", "containers", "training_src"):
        shutil.copytree(ROOT / part, root / part)
    if project is not None:
        (root / "config" / "sagestack.yaml").write_text(project)
    (root / "config" / "envs" / "dev.yaml").write_text(overlay)
    return root


def tags(n: int, width: int = 0) -> str:
    return "tags:\n" + "".join(f"  tag-{i:06d}: value-{i:06d}{'-' * width}\n" for i in range(n))


def best(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def load(root: Path, env: str | None = "dev") -> str:
    """Load (fresh: a new file each run defeats no cache, the parse memo is per content)."""
    from sagestack.core import yamldoc

    yamldoc._PARSED.clear()  # measure the parse, not the memo
    try:
        load_project(root, env)
        return "loaded"
    except SpecError as e:
        return e.issues[0].message[:60]


def validate(root: Path) -> int:
    from sagestack.cli import main
    from sagestack.core import yamldoc

    yamldoc._PARSED.clear()
    argv, sys.argv = sys.argv, ["sagestack", "validate", "--root", str(root)]
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            main()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sys.argv = argv
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="small inputs, one run (seconds)")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs
    sizes = [500, 2000] if args.smoke else [2000, 8000, 30000]

    empty = example_root("{}\n")
    outcome = load(empty)  # imports, schemas and rules once, outside the figures
    base = best(lambda: load(empty), runs)
    print(f"the example with an empty overlay: {base:.3f} s, {outcome} (what every figure below includes)")
    figures = []
    for n in sizes:
        root = example_root(tags(n))
        seconds = best(lambda root=root: load(root), runs)
        figures.append((n, seconds - base))
        print(f"overlay of {n:6d} tag keys: {seconds:6.2f} s, {(seconds - base) / n * 1e6:6.1f} µs per key")
    (n0, t0), (n1, t1) = figures[0], figures[-1]
    print(
        f"  {n1 / n0:.1f}x the keys took {t1 / t0:.1f}x the time over the empty overlay "
        f"(linear: about {n1 / n0:.1f}x; quadratic: {(n1 / n0) ** 2:.0f}x)"
    )
    # CPython's cyclic collector scans a heap that grows with the overlay: apart from it, the loader
    gc.disable()
    try:
        roots = [example_root(tags(n)) for n in (n0, n1)]
        bare = [best(lambda root=root: load(root), runs) - base for root in roots]
    finally:
        gc.enable()
    print(f"  the same with the cyclic garbage collector off: {bare[1] / bare[0]:.1f}x")

    n = 4000 if args.smoke else 0
    if not n:  # the largest overlay of tags that stays under the limit
        line = len(tags(1)) - len("tags:\n")
        n = (MAX_SPEC_BYTES - 64) // line
    root = example_root(tags(n))
    size = (root / "config" / "envs" / "dev.yaml").stat().st_size
    seconds = best(lambda: load(root), runs)
    print(f"overlay of {size / 1024:.0f} KiB ({n} keys, limit {MAX_SPEC_BYTES // 1024} KiB): {seconds:.2f} s")

    depth = 500 if args.smoke else 5000
    root = example_root("{}\n", "a: " + "[" * depth + "]" * depth + "\n")
    for env in ("prod", "staging"):
        (root / "config" / "envs" / f"{env}.yaml").write_text("{}\n")
    seconds = best(lambda: load(root, None), runs)
    print(f"refusing a {depth}-deep [[[...]]]: {seconds:.3f} s")
    seconds = best(lambda: validate(root), runs)
    print(f"  sagestack validate, three environments: {seconds:.3f} s (exit {validate(root)})")


if __name__ == "__main__":
    main()
