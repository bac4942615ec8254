#!/usr/bin/env python3
"""Synth-time benchmark, each app in a fresh process as `cdk synth` runs it (interpreter and jsii
start-up included), measured alternately in the same run.

1. The foundation of the example project (3 environments, its jobs removed so both apps hold the
   same resources) against a hand-written aws-cdk-lib app (bench/handwritten_app.py). Goal <= 1.15.
2. The cost of each extra training job: dev with 1 job against dev with 51 jobs. Goal <= 60 ms/job.
3. 1,000 jobs in one environment: the pipelines spread over shard stacks; resources per stack
   against CloudFormation's 500 limit, and synth time per job.

Usage: python bench/synth.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent


def make_project(jobs: int | None) -> Path:
    """A copy of the example project; jobs=None keeps its jobs, else N copies of 'classifier'."""
    dest = Path(tempfile.mkdtemp(prefix="bench-project-"))
    for name in ("app.py", "cdk.json"):
        shutil.copy(ROOT / name, dest / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(ROOT / folder, dest / folder)
    if jobs is not None:
        yaml = YAML()
        spec_path = dest / "config/sagestack.yaml"
        spec = yaml.load(spec_path.read_text())
        template = spec["jobs"]["classifier"]
        spec["jobs"] = {f"job{i}": template for i in range(jobs)}
        # Searches and endpoints name the example's jobs; these projects measure jobs alone.
        spec.pop("tuning", None)
        spec.pop("endpoints", None)
        with spec_path.open("w") as f:
            yaml.dump(spec, f)
        for overlay in (dest / "config/envs").glob("*.yaml"):
            data = yaml.load(overlay.read_text()) or {}
            data.pop("jobs", None)
            data.pop("endpoints", None)
            with overlay.open("w") as f:
                yaml.dump(data, f)
    return dest


def run(cmd: list[str], cwd: Path, outdir: str, envs: str | None = None) -> float:
    env = {**os.environ, "CDK_OUTDIR": outdir, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    if envs:
        env["CDK_CONTEXT_JSON"] = json.dumps({"sagestack:environments": envs})
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def resources(outdir: str) -> dict[str, Counter[str]]:
    out = {}
    for template in sorted(Path(outdir).glob("assembly-*/*.template.json")):
        out[template.name] = Counter(
            r["Type"] for r in json.loads(template.read_text())["Resources"].values()
        )
    return out


def median(ts: list[float]) -> float:
    return statistics.median(ts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable

    # 1. foundation vs hand-written
    foundation_only = make_project(jobs=0)
    apps = {
        "sagestack": ([py, "app.py"], foundation_only),
        "hand-written": ([py, str(ROOT / "bench" / "handwritten_app.py")], ROOT),
    }
    outdirs = {name: tempfile.mkdtemp(prefix=f"bench-{name}-") for name in apps}
    times: dict[str, list[float]] = {name: [] for name in apps}
    for name, (cmd, cwd) in apps.items():  # warm-up: OS caches and sagestack's DLC URI cache
        run(cmd, cwd, outdirs[name])
    for _ in range(args.repeats):
        for name, (cmd, cwd) in apps.items():
            times[name].append(run(cmd, cwd, outdirs[name]))
    a = sum(resources(outdirs["sagestack"]).values(), Counter())
    b = sum(resources(outdirs["hand-written"]).values(), Counter())
    print("1. foundation, 3 environments (example project without jobs) vs hand-written aws-cdk-lib")
    print(
        f"   resources: sagestack {sum(a.values())}, hand-written {sum(b.values())}"
        + ("" if a == b else f" (differ: {dict((a - b) + (b - a))})")
    )
    for name, ts in times.items():
        print(
            f"   {name:>13}: median {median(ts):.2f} s  (min {min(ts):.2f}, max {max(ts):.2f}, n={len(ts)})"
        )
    ratio = median(times["sagestack"]) / median(times["hand-written"])
    print(
        f"   ratio sagestack / hand-written: {ratio:.3f}  (goal <= 1.15: {'met' if ratio <= 1.15 else 'NOT met'})"
    )

    # 2. per-job cost
    small, large = make_project(jobs=1), make_project(jobs=51)
    job_times: dict[int, list[float]] = {1: [], 51: []}
    out_small, out_large = tempfile.mkdtemp(), tempfile.mkdtemp()
    run([py, "app.py"], small, out_small, "dev")
    run([py, "app.py"], large, out_large, "dev")
    for _ in range(args.repeats):
        job_times[1].append(run([py, "app.py"], small, out_small, "dev"))
        job_times[51].append(run([py, "app.py"], large, out_large, "dev"))
    per_job_ms = (median(job_times[51]) - median(job_times[1])) / 50 * 1000
    print("2. cost of each extra training job (dev: 1 job vs 51 jobs)")
    print(
        f"   1 job: {median(job_times[1]):.2f} s, 51 jobs: {median(job_times[51]):.2f} s "
        f"-> {per_job_ms:.0f} ms per job  (goal <= 60 ms: {'met' if per_job_ms <= 60 else 'NOT met'})"
    )

    # 3. 1,000 jobs
    thousand, out_thousand = make_project(jobs=1000), tempfile.mkdtemp()
    t = run([py, "app.py"], thousand, out_thousand, "dev")
    small_t = median(job_times[1])
    print(
        f"3. 1,000 jobs in dev: synthesized in {t:.1f} s "
        f"({(t - small_t) / 999 * 1000:.0f} ms per job over the 1-job app)"
    )
    totals = {name: sum(c.values()) for name, c in resources(out_thousand).items()}
    pipelines = {n: v for n, v in totals.items() if "Training" in n}
    print(
        f"   {len(totals)} stacks; training stacks: {len(pipelines)}, resources per stack "
        f"min {min(pipelines.values())}, median {median(list(pipelines.values())):.0f}, "
        f"max {max(pipelines.values())} (CloudFormation limit 500: "
        f"{'all under' if max(totals.values()) < 500 else 'OVER'})"
    )


if __name__ == "__main__":
    main()
