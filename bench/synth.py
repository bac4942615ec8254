#!/usr/bin/env python3
"""Synth time of the example app (3 environments) against a hand-written aws-cdk-lib app with the
same resources (bench/handwritten_app.py), measured alternately in the same run, each in a fresh
process as `cdk synth` runs it (interpreter + jsii start-up included). Goal: ratio <= 1.15.

Usage: python bench/synth.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = {
    "sagestack": [sys.executable, str(ROOT / "app.py")],
    "hand-written": [sys.executable, str(ROOT / "bench" / "handwritten_app.py")],
}


def run(cmd: list[str], outdir: str) -> float:
    env = {**os.environ, "CDK_OUTDIR": outdir, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def resource_types(outdir: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for template in Path(outdir).glob("assembly-*/*.template.json"):
        for res in json.loads(template.read_text())["Resources"].values():
            counts[res["Type"]] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in APPS}
    outdirs = {name: tempfile.mkdtemp(prefix=f"bench-{name}-") for name in APPS}
    for name, cmd in APPS.items():  # warm-up: OS caches, and sagestack's DLC URI cache
        run(cmd, outdirs[name])
    for _ in range(args.repeats):
        for name, cmd in APPS.items():
            times[name].append(run(cmd, outdirs[name]))
    a, b = (resource_types(outdirs[n]) for n in APPS)
    print(
        f"resources per app (3 environments): sagestack {sum(a.values())}, hand-written {sum(b.values())}"
        + ("" if a == b else f"  (differ: {dict((a - b) + (b - a))})")
    )
    for name, ts in times.items():
        print(
            f"{name:>13}: median {statistics.median(ts):.2f} s  (min {min(ts):.2f}, max {max(ts):.2f}, n={len(ts)})"
        )
    ratio = statistics.median(times["sagestack"]) / statistics.median(times["hand-written"])
    print(
        f"ratio sagestack / hand-written: {ratio:.3f}  (goal <= 1.15: {'met' if ratio <= 1.15 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
