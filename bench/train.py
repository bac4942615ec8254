#!/usr/bin/env python3
"""Local training throughput of training_src on this machine, all figures measured in one run.

- samples/s for 1 and 2 processes (DDP over gloo) and the scaling efficiency T2 / (2 x T1);
- the machine's own ceiling for 2 processes: two independent 1-process runs at the same time,
  added up (on a 2-vCPU machine this is well under 2x), and the DDP run's share of it (goal >= 0.90);
- the local emulation's overhead against a bare torchrun of the same script (goal <= 3%): the work
  `sagestack local train` does before the script starts (rendering the request, packing and
  unpacking the code, laying out the host, its SM_* environment and launch plan), timed alone,
  against the wall time of the bare torchrun run;
- the step-time cost of checkpointing every 50 steps (goal <= 5%): the time the trainer itself spent
  in checkpoints (its own clock) over its training time, and, as a cross-check, samples/s with and
  without checkpoints (noisier: the machine's other load moves it by several percent).

- the trainer against a minimal hand-written DDP loop (bench/ddp_loop.py: the same model, data,
  sampler, batch, optimizer and threads, nothing else), run alternately, at 1 and 2 processes
  (goal: trainer/loop >= 0.97 at both);

Throughput is the median of the per-window samples/s the trainer prints, first window (warm-up) dropped.
--smoke: every measurement once on a few steps (the tests run it so that the benchmark cannot rot;
its figures mean nothing), in five torchrun launches instead of seven: the 1-process run checkpoints
(it stands for the runs with and without checkpoints) and the 2-process run stands for the trainer
beside the hand-written loop — each launch's start-up (torch imported by the agent and every
worker) is most of a smoke run's time, and every code path still runs.
Usage: python bench/train.py [--steps N] [--repeats R] [--smoke]
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


LOOP = ROOT / "bench" / "ddp_loop.py"


def launch(
    procs: int,
    steps: int,
    threads: int,
    port: int,
    checkpoint_every: int = 0,
    script: Path = SRC / "train.py",
) -> subprocess.Popen[str]:
    """torchrun on one host, as the SageMaker PyTorch container starts it for torch_distributed."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-train-"))
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
        str(script),
        *args_for(steps, checkpoint_every),
    ]
    return subprocess.Popen(
        cmd,
        env=base_env(workdir, threads),
        cwd=SRC,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
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


def timed(procs: int, steps: int, threads: int, port: int, checkpoint_every: int = 0) -> tuple[float, float]:
    start = time.perf_counter()
    rate, _ = finish(launch(procs, steps, threads, port, checkpoint_every))
    return time.perf_counter() - start, rate


def emulation_own_seconds(procs: int) -> float:
    """What `sagestack local train` does before the script starts, for one host of `procs`."""
    from sagestack.local.training.hosts import prepare_hosts
    from sagestack.local.training.job import LocalTrainOptions, local_training_request
    from sagestack.project import load_project

    loaded = load_project(ROOT, "dev")
    workdir = Path(tempfile.mkdtemp(prefix="bench-emulation-"))
    start = time.perf_counter()
    local = local_training_request(loaded, "classifier", {})
    prepare_hosts(
        loaded,
        "classifier",
        local,
        workdir,
        LocalTrainOptions(hosts=1, procs=procs),
        master_port=0,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="every measurement once, 60 steps (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.repeats = 60, 1  # 2 windows of 25 steps, a checkpoint at step 50
    emulation_runs = 1 if args.smoke else 5
    versus_procs = (2,) if args.smoke else (1, 2)  # the smoke run keeps every code path, not every figure
    cpus = len(os.sched_getaffinity(0))
    per_proc = max(1, cpus // 2)
    port = 29600
    versus: dict[int, tuple[list[float], list[float]]] = {procs: ([], []) for procs in versus_procs}
    one, two, ceiling, ckpt_off, ckpt_on, t_bare, t_emulation, ckpt_share = [], [], [], [], [], [], [], []
    emulation_own_seconds(2)  # imports and the DLC-URI cache once, outside the figure
    for r in range(args.repeats):
        p = port + 10 * r
        if args.smoke:  # one 1-process run, checkpointing: it is `one`, ckpt_off and ckpt_on at once
            ckpt_on.append(timed(1, args.steps, per_proc, p, checkpoint_every=50)[1])
            ckpt_share.append(LAST_RUN["checkpoint_seconds"] / LAST_RUN["train_seconds"])
            one.append(ckpt_on[-1])
        else:
            one.append(timed(1, args.steps, per_proc, p)[1])
        two_seconds, two_rate = timed(2, args.steps, per_proc, p + 1)
        two.append(two_rate)
        t_bare.append(two_seconds)
        a, b = launch(1, args.steps, per_proc, p + 2), launch(1, args.steps, per_proc, p + 3)
        ceiling.append(finish(a)[0] + finish(b)[0])
        t_emulation += [emulation_own_seconds(2) for _ in range(emulation_runs)]
        ckpt_off.append(one[-1] if args.smoke else timed(1, args.steps, per_proc, p + 6)[1])
        if not args.smoke:
            ckpt_on.append(timed(1, args.steps, per_proc, p + 7, checkpoint_every=50)[1])
            ckpt_share.append(LAST_RUN["checkpoint_seconds"] / LAST_RUN["train_seconds"])
        for procs in versus_procs:  # the trainer and the hand-written loop back to back, order alternating
            order = [False, True] if r % 2 == 0 else [True, False]
            for k, is_loop in enumerate(order):
                if args.smoke and not is_loop:  # the 2-process run above is this very launch
                    versus[procs][0].append(two_rate)
                    continue
                proc = launch(
                    procs,
                    args.steps,
                    per_proc,
                    p + 8 + procs * 2 + k,
                    script=LOOP if is_loop else SRC / "train.py",
                )
                versus[procs][int(is_loop)].append(finish(proc)[0])
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
    overhead = m(t_emulation) / m(t_bare)
    print(
        f"local emulation's own work {m(t_emulation) * 1000:.0f} ms against a bare 2-process torchrun run of {m(t_bare):.2f} s "
        f"-> {overhead * 100:.1f}%  (goal <= 3%: {'met' if overhead <= 0.03 else 'NOT met'})"
    )
    for procs, (trainer, loop) in versus.items():
        ratio = m(trainer) / m(loop)
        print(
            f"{procs} process{'es' if procs > 1 else ''}: trainer {m(trainer):.0f} vs hand-written DDP loop {m(loop):.0f} samples/s "
            f"-> {ratio:.3f}  (goal >= 0.97: {'met' if ratio >= 0.97 else 'NOT met'})"
        )
    share_ckpt = m(ckpt_share)
    print(
        f"checkpoint every 50 steps: {share_ckpt * 100:.1f}% of the training time spent checkpointing "
        f"(goal <= 5%: {'met' if share_ckpt <= 0.05 else 'NOT met'}); cross-check: {m(ckpt_on):.0f} vs "
        f"{m(ckpt_off):.0f} samples/s with and without ({(1 - m(ckpt_on) / m(ckpt_off)) * 100:+.1f}%)"
    )


if __name__ == "__main__":
    main()
