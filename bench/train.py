#!/usr/bin/env python3
"""Local training throughput of training_src on this machine, all figures measured in one run.

- samples/s for 1 and 2 processes (DDP over gloo) and the scaling efficiency T2 / (2 x T1);
- the machine's own ceiling for 2 processes: two independent 1-process runs at the same time,
  added up (on a 2-vCPU machine this is well under 2x), and the DDP run's share of it (goal >= 0.90);
- the launcher's overhead against a bare torchrun of the same script (goal <= 3%): the launcher's
  own work (interpreter start, reading the contract, building the torchrun command, up to the exec)
  timed alone (SAGESTACK_LAUNCHER_DRY_RUN), against the wall time of the bare torchrun run;
- the step-time cost of checkpointing every 50 steps (goal <= 5%): the time the trainer itself spent
  in checkpoints (its own clock) over its training time, and, as a cross-check, samples/s with and
  without checkpoints (noisier: the machine's other load moves it by several percent).

Throughput is the median of the per-window samples/s the trainer prints, first window (warm-up) dropped.
Usage: python bench/train.py [--steps N] [--repeats R]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = int(os.environ.get("BENCH_BATCH", "64"))
SRC = ROOT / "training_src"
sys.path.insert(0, str(SRC))
from metrics import parse_metrics  # noqa: E402


def base_env(workdir: Path, threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(
        SAGEMAKER_BASE_DIR=str(workdir),
        SM_HOSTS=json.dumps(["algo-1"]),
        SM_CURRENT_HOST="algo-1",
        SM_NUM_GPUS="0",
        SAGESTACK_MASTER_ADDR="127.0.0.1",
        OMP_NUM_THREADS=str(threads),
        PYTHONUNBUFFERED="1",
    )
    return env


def args_for(steps: int, checkpoint_every: int = 0) -> list[str]:
    return [
        "--epochs",
        "1000",
        "--max_steps",
        str(steps),
        "--log_every",
        "25",
        "--batch_size_per_device",
        str(BATCH),
        "--checkpoint_every_steps",
        str(checkpoint_every),
        "--lr_scaling",
        "none",
    ]


def launch(
    kind: str, procs: int, steps: int, threads: int, port: int, checkpoint_every: int = 0
) -> subprocess.Popen[str]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-train-"))
    env = base_env(workdir, threads)
    env["SAGESTACK_NPROC_PER_NODE"] = str(procs)
    env["SAGESTACK_MASTER_PORT"] = str(port)
    script_args = args_for(steps, checkpoint_every)
    if kind == "launcher":
        cmd = [sys.executable, str(SRC / "launcher.py"), *script_args]
    else:  # bare torchrun, the same arguments the launcher computes
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc_per_node",
            str(procs),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            "--node_rank",
            "0",
            str(SRC / "train.py"),
            *script_args,
        ]
    return subprocess.Popen(
        cmd, env=env, cwd=SRC, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


LAST_RUN: dict[str, float] = {}


def finish(proc: subprocess.Popen[str]) -> tuple[float, list[float]]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"training failed:\n{out[-3000:]}")
    parsed = [parse_metrics(line) for line in out.splitlines()]
    rates = [m["samples_per_sec"] for m in parsed if "samples_per_sec" in m]
    LAST_RUN.clear()
    LAST_RUN.update(next((m for m in reversed(parsed) if "checkpoint_seconds" in m), {}))
    return statistics.median(rates[1:] or rates), rates


def timed(
    kind: str, procs: int, steps: int, threads: int, port: int, checkpoint_every: int = 0
) -> tuple[float, float]:
    start = time.perf_counter()
    rate, _ = finish(launch(kind, procs, steps, threads, port, checkpoint_every))
    return time.perf_counter() - start, rate


def launcher_own_seconds(procs: int, threads: int) -> float:
    workdir = Path(tempfile.mkdtemp(prefix="bench-launcher-"))
    env = {
        **base_env(workdir, threads),
        "SAGESTACK_NPROC_PER_NODE": str(procs),
        "SAGESTACK_LAUNCHER_DRY_RUN": "1",
    }
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, str(SRC / "launcher.py"), *args_for(10)],
        env=env,
        cwd=SRC,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cpus = len(os.sched_getaffinity(0))
    per_proc = max(1, cpus // 2)
    port = 29600
    one, two, ceiling, ckpt_off, ckpt_on, t_bare, t_launcher, ckpt_share = [], [], [], [], [], [], [], []
    for r in range(args.repeats):
        p = port + 10 * r
        one.append(timed("launcher", 1, args.steps, per_proc, p)[1])
        two.append(timed("launcher", 2, args.steps, per_proc, p + 1)[1])
        a, b = (
            launch("launcher", 1, args.steps, per_proc, p + 2),
            launch("launcher", 1, args.steps, per_proc, p + 3),
        )
        ceiling.append(finish(a)[0] + finish(b)[0])
        t_bare.append(timed("bare", 2, args.steps, per_proc, p + 4)[0])
        t_launcher += [launcher_own_seconds(2, per_proc) for _ in range(5)]
        ckpt_off.append(timed("launcher", 1, args.steps, per_proc, p + 6)[1])
        ckpt_on.append(timed("launcher", 1, args.steps, per_proc, p + 7, checkpoint_every=50)[1])
        ckpt_share.append(LAST_RUN["checkpoint_seconds"] / LAST_RUN["train_seconds"])
    m = statistics.median
    t1, t2, c = m(one), m(two), m(ceiling)
    print(
        f"machine: {cpus} CPUs, {per_proc} thread(s) per process; {args.steps} steps of batch {BATCH} per process; "
        f"median of {args.repeats} runs"
    )
    print(
        f"samples/s: 1 process {t1:.0f}, 2 processes (DDP, gloo) {t2:.0f}; scaling efficiency T2/(2*T1) = {t2 / (2 * t1):.3f}"
    )
    print(
        f"ceiling for 2 processes (two independent 1-process runs at once): {c:.0f} samples/s = {c / t1:.2f}x one process"
    )
    share = t2 / c
    print(
        f"DDP run's share of that ceiling: {share:.3f}  (goal >= 0.90: {'met' if share >= 0.90 else 'NOT met'})"
    )
    overhead = m(t_launcher) / m(t_bare)
    print(
        f"launcher's own work {m(t_launcher) * 1000:.0f} ms against a bare 2-process torchrun run of {m(t_bare):.2f} s "
        f"-> {overhead * 100:.1f}%  (goal <= 3%: {'met' if overhead <= 0.03 else 'NOT met'})"
    )
    share_ckpt = m(ckpt_share)
    print(
        f"checkpoint every 50 steps: {share_ckpt * 100:.1f}% of the training time spent checkpointing "
        f"(goal <= 5%: {'met' if share_ckpt <= 0.05 else 'NOT met'}); cross-check: {m(ckpt_on):.0f} vs "
        f"{m(ckpt_off):.0f} samples/s with and without ({(1 - m(ckpt_on) / m(ckpt_off)) * 100:+.1f}%)"
    )


if __name__ == "__main__":
    main()
