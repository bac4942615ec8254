#!/usr/bin/env python3
"""CLI start-up, measured in fresh processes in one run:

- `sagestack --help` (goal <= 0.3 s);
- `sagestack plan --env dev` of the example project offline (no credentials: the quota snapshot or
  "not checked"), goal <= 1.5 s; the first run after a cache wipe is reported separately (it fills
  the DLC-URI disk cache, importing sagemaker-core once);
- the bare interpreter (`python -c pass`) as the baseline both include.

Each figure is the median (and best) of N runs, of the sagestack in this checkout. --smoke: one run
each (the tests run it so that the benchmark cannot rot; its figures mean little).
Usage: python bench/cli.py [--runs N] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAGESTACK = Path(sys.executable).parent / "sagestack"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 3):
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return elapsed


def series(cmd: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    times = [timed(cmd, env) for _ in range(runs)]
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="one run each (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    with tempfile.TemporaryDirectory() as home:
        # Offline: no AWS variables, and a HOME without ~/.aws.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(HOME=home, COLUMNS="200", XDG_CACHE_HOME=str(Path(home) / "cache"))
        # The sagestack of this checkout, whatever the venv's editable install points at.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
        cold = timed([str(SAGESTACK), "plan", "--env", "dev"], env)  # empty DLC-URI cache
        base = series([sys.executable, "-c", "pass"], env, args.runs)
        helps = series([str(SAGESTACK), "--help"], env, args.runs)
        plans = series([str(SAGESTACK), "plan", "--env", "dev"], env, args.runs)
    print(f"python -c pass (baseline): median {base[0]:.3f} s, best {base[1]:.3f} s")
    print(f"sagestack --help:          median {helps[0]:.3f} s, best {helps[1]:.3f} s (goal <= 0.3 s)")
    print(
        f"sagestack plan --env dev:  median {plans[0]:.3f} s, best {plans[1]:.3f} s (goal <= 1.5 s, offline)"
    )
    print(f"  first plan with an empty DLC-URI cache: {cold:.3f} s (sagemaker-core imported once)")
    print(f"  over the bare interpreter: --help x{helps[0] / base[0]:.1f}, plan x{plans[0] / base[0]:.1f}")


if __name__ == "__main__":
    main()
