#!/usr/bin/env python3
"""Synth-time benchmark, each app in a fresh process as `cdk synth` runs it (interpreter and jsii
start-up included), measured alternately in the same run, with the sagestack of this checkout.

1. The foundation of the example project (3 environments, its jobs and everything that names them
   removed, so both apps hold the same resources) against a hand-written aws-cdk-lib app
   (bench/handwritten_app.py): the ratio of the medians. Goal <= 1.15.
2. The cost of each extra training job: dev with 1 job against dev with 51 jobs. Goal <= 25 ms/job.
3. 1,000 jobs in one environment: the time to synthesize it (goal < 25 s), and the pipelines spread
   over shard stacks: resources per stack against CloudFormation's 500 limit.

Each figure is wall-clock time (what the goals are about) with the CPU time the app and its jsii
node process spent beside it: on a busy machine the wall time grows with the load (each call into
jsii waits for the other process to be scheduled) while the CPU time stays put, so the two together
say whether a change helped. The first line prints the load the run saw.

--smoke runs every step once on small projects (the foundation of dev alone; 1, 2 and 3 jobs), so
that a change which breaks the benchmark shows in the tests; its figures mean nothing.

Usage: python bench/synth.py [--repeats N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
# What a project of N jobs keeps of the example's spec: sections that name no job (a search, an
# endpoint, a transform or a cluster names one, or needs what the jobs are removed to leave out).
KEPT_SECTIONS = (
    "project",
    "region",
    "account",
    "retain_data",
    "tags",
    "tracking",
    "images",
    "bucket",
    "pipeline",
)
KEPT_OVERLAY_SECTIONS = ("account", "region", "retain_data", "tags", "tracking", "bucket", "pipeline")


def make_project(jobs: int) -> Path:
    """A copy of the example project with N copies of its job 'classifier' and nothing that names a
    job (jobs=0: the foundation alone)."""
    dest = Path(tempfile.mkdtemp(prefix="bench-project-"))
    for name in ("app.py", "cdk.json"):
        shutil.copy(ROOT / name, dest / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(ROOT / folder, dest / folder)
    for stale in (dest / "config/envs").glob("*.json"):  # locks and snapshots of the example's jobs
        stale.unlink()
    yaml = YAML()
    spec_path = dest / "config/sagestack.yaml"
    spec = yaml.load(spec_path.read_text())
    template = spec["jobs"]["classifier"]
    kept = {k: v for k, v in spec.items() if k in KEPT_SECTIONS}
    if jobs:
        kept["jobs"] = {f"job{i}": template for i in range(jobs)}
    with spec_path.open("w") as f:
        yaml.dump(kept, f)
    for overlay in (dest / "config/envs").glob("*.yaml"):
        data = yaml.load(overlay.read_text()) or {}
        with overlay.open("w") as f:
            yaml.dump({k: v for k, v in data.items() if k in KEPT_OVERLAY_SECTIONS}, f)
    return dest


def children_cpu() -> float:
    """CPU seconds (user + system) of the waited-for children so far: an app and its node process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timed(NamedTuple):
    wall: float  # seconds
    cpu: float  # CPU seconds of the app and its node process


# Compiled bytecode for every app, kept for the run (the warm-up writes it): an installed sagestack
# has its .pyc files as the venv's aws-cdk-lib has, while a checkout run under
# PYTHONDONTWRITEBYTECODE=1 would compile its ~130 modules again at every synth (~0.3 s) and the
# baseline, all of whose imports are compiled already, would not.
PYCACHE = tempfile.mkdtemp(prefix="bench-pycache-")


def run(cmd: list[str], cwd: Path, outdir: str, envs: str | None = None) -> Timed:
    env = {
        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        "CDK_OUTDIR": outdir,
        "PYTHONPYCACHEPREFIX": PYCACHE,
        # The sagestack of this checkout, whatever the venv's editable install points at.
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    if envs:
        env["CDK_CONTEXT_JSON"] = json.dumps({"sagestack:environments": envs})
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    cpu = children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return Timed(elapsed, cpu)


def resources(outdir: str) -> dict[str, Counter[str]]:
    out = {}
    for template in sorted(Path(outdir).glob("assembly-*/*.template.json")):
        out[template.name] = Counter(
            r["Type"] for r in json.loads(template.read_text())["Resources"].values()
        )
    return out


def assets(outdir: str) -> Counter[str]:
    """The assets each app stages (Docker images by their content hash, file assets by packaging),
    which the CDK hashes and copies at synth like any work the app asks for."""
    out: Counter[str] = Counter()
    for manifest in Path(outdir).glob("assembly-*/*.assets.json"):
        data = json.loads(manifest.read_text())
        for image in data.get("dockerImages", {}).values():
            out[f"docker:{Path(image['source']['directory']).name}"] += 1
        for file in data.get("files", {}).values():
            if not file["source"]["path"].endswith(".template.json"):
                out[f"file:{file['source'].get('packaging', 'file')}"] += 1
    return out


def median(ts: list[float]) -> float:
    return statistics.median(ts)


def medians(runs: list[Timed]) -> Timed:
    return Timed(median([r.wall for r in runs]), median([r.cpu for r in runs]))


def machine() -> str:
    """The load the run saw: wall times grow with it, CPU times hardly."""
    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    busy = "a busy machine: wall times are inflated, compare the CPU times" if load > cpus / 2 else "quiet"
    return f"machine: {cpus} CPUs, load average {load:.1f} ({busy})"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def foundation_vs_handwritten(repeats: int, warm_up: bool, envs: str | None) -> None:
    py = sys.executable
    apps = {
        "sagestack": ([py, "app.py"], make_project(jobs=0)),
        "hand-written": ([py, str(ROOT / "bench" / "handwritten_app.py")], ROOT),
    }
    outdirs = {name: tempfile.mkdtemp(prefix=f"bench-{name}-") for name in apps}
    times: dict[str, list[Timed]] = {name: [] for name in apps}
    if warm_up:  # OS caches and sagestack's DLC URI cache
        for name, (cmd, cwd) in apps.items():
            run(cmd, cwd, outdirs[name], envs)
    for i in range(repeats):
        order = list(apps.items()) if i % 2 == 0 else list(apps.items())[::-1]
        for name, (cmd, cwd) in order:
            times[name].append(run(cmd, cwd, outdirs[name], envs))
    a = sum(resources(outdirs["sagestack"]).values(), Counter())
    b = sum(resources(outdirs["hand-written"]).values(), Counter())
    which = envs or "3 environments"
    print(f"1. foundation, {which} (example project without jobs) vs hand-written aws-cdk-lib")
    print(
        f"   resources: sagestack {sum(a.values())}, hand-written {sum(b.values())}"
        + (" (the same types)" if a == b else f" (differ: {dict((a - b) + (b - a))})")
    )
    ours_assets, theirs_assets = assets(outdirs["sagestack"]), assets(outdirs["hand-written"])
    print(
        f"   staged assets: sagestack {sum(ours_assets.values())}, hand-written {sum(theirs_assets.values())}"
        + (
            " (the same)"
            if ours_assets == theirs_assets
            else f" (differ: {dict((ours_assets - theirs_assets) + (theirs_assets - ours_assets))})"
        )
    )
    for name, ts in times.items():
        walls = [t.wall for t in ts]
        print(
            f"   {name:>13}: median {median(walls):.2f} s  (min {min(walls):.2f}, max {max(walls):.2f}, "
            f"n={len(ts)}; CPU {medians(ts).cpu:.2f} s)"
        )
    ours, theirs = medians(times["sagestack"]), medians(times["hand-written"])
    ratio = ours.wall / theirs.wall
    print(
        f"   ratio sagestack / hand-written: {ratio:.3f}  (goal <= 1.15: {verdict(ratio <= 1.15)}; "
        f"CPU {ours.cpu / theirs.cpu:.3f})"
    )


def per_job(repeats: int, warm_up: bool, few: int, many: int) -> Timed:
    """ms per extra job (dev: `few` jobs against `many`); returns the median times of `few`."""
    py = sys.executable
    small, large = make_project(jobs=few), make_project(jobs=many)
    job_times: dict[int, list[Timed]] = {few: [], many: []}
    out_small, out_large = tempfile.mkdtemp(), tempfile.mkdtemp()
    if warm_up:
        run([py, "app.py"], small, out_small, "dev")
        run([py, "app.py"], large, out_large, "dev")
    for i in range(repeats):
        pair = [(few, small, out_small), (many, large, out_large)]
        for n, project, outdir in pair if i % 2 == 0 else pair[::-1]:
            job_times[n].append(run([py, "app.py"], project, outdir, "dev"))
    small_t, large_t = medians(job_times[few]), medians(job_times[many])
    per_job_ms = (large_t.wall - small_t.wall) / (many - few) * 1000
    per_job_cpu_ms = (large_t.cpu - small_t.cpu) / (many - few) * 1000
    print(f"2. cost of each extra training job (dev: {few} job(s) vs {many} jobs)")
    print(
        f"   {few} job(s): {small_t.wall:.2f} s, {many} jobs: {large_t.wall:.2f} s "
        f"-> {per_job_ms:.0f} ms per job  (goal <= 25 ms: {verdict(per_job_ms <= 25)}; "
        f"CPU {per_job_cpu_ms:.0f} ms per job)"
    )
    return small_t


def thousand_jobs(jobs: int, few: int, few_times: Timed) -> None:
    project, outdir = make_project(jobs=jobs), tempfile.mkdtemp()
    t = run([sys.executable, "app.py"], project, outdir, "dev")
    goal = f"  (goal < 25 s: {verdict(t.wall < 25)})" if jobs == 1000 else ""
    print(
        f"3. {jobs:,} jobs in dev: synthesized in {t.wall:.1f} s{goal}; "
        f"{(t.wall - few_times.wall) / (jobs - few) * 1000:.0f} ms per job over the {few}-job app "
        f"(CPU {t.cpu:.1f} s; {(t.cpu - few_times.cpu) / (jobs - few) * 1000:.0f} ms per job)"
    )
    totals = {name: sum(c.values()) for name, c in resources(outdir).items()}
    pipelines = {n: v for n, v in totals.items() if "Training" in n}
    print(
        f"   {len(totals)} stacks; training stacks: {len(pipelines)}, resources per stack "
        f"min {min(pipelines.values())}, median {median(list(pipelines.values())):.0f}, "
        f"max {max(pipelines.values())} (CloudFormation limit 500: "
        f"{'all under' if max(totals.values()) < 500 else 'OVER'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="every step once, small projects (seconds)")
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    few, many, thousand = (1, 2, 3) if args.smoke else (1, 51, 1000)
    if args.smoke:
        print("smoke run: every step once on small projects (the figures mean nothing)")
    print(machine())
    foundation_vs_handwritten(repeats, warm_up=not args.smoke, envs="dev" if args.smoke else None)
    few_times = per_job(repeats, warm_up=not args.smoke, few=few, many=many)
    thousand_jobs(thousand, few, few_times)
    print(machine())


if __name__ == "__main__":
    main()
