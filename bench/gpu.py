#!/usr/bin/env python3
"""Training on GPUs, for when a machine with them is lent (skipped, saying so, without CUDA).

- MFU of bf16 + torch.compile training with training_src/train.py itself on one GPU: a wide MLP
  (--model mlp --width W over F synthetic features, so that the step is a few large matmuls like a
  transformer block's) at a large batch; model FLOPs per sample = 6 x the weights' parameters
  (forward 2, backward 4), MFU = achieved FLOP/s / the GPU's dense bf16 peak;
- NCCL DDP on all GPUs of the machine: samples/s on N GPUs against N x one GPU (scaling efficiency).
Throughput is the median of the trainer's per-window samples/s, first window (compilation) dropped.
--smoke: a small MLP for 60 steps (the tests run it so that the benchmark cannot rot; its figures
mean nothing).
Usage: python bench/gpu.py [--width 8192] [--features 1024] [--batch 4096] [--steps 300] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "training_src"
sys.path.insert(0, str(SRC))

# Dense bf16 tensor-core peaks (no sparsity), FLOP/s per GPU, from the vendors' data sheets.
PEAK_BF16 = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12, "A10G": 70e12}


def peak_flops(name: str) -> float | None:
    override = os.environ.get("BENCH_PEAK_TFLOPS")
    if override:
        return float(override) * 1e12
    return next((v for k, v in PEAK_BF16.items() if k in name), None)


def run(procs: int, args: argparse.Namespace, data_dir: Path, port: int) -> float:
    from metrics import parse_metrics

    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(procs),
        "--master_addr", "127.0.0.1", "--master_port", str(port), str(SRC / "train.py"),
        "--model", "mlp", "--width", str(args.width), "--precision", "bf16", "--compile", "true",
        "--batch_size_per_device", str(args.batch), "--lr_scaling", "none", "--epochs", "1000",
        "--max_steps", str(args.steps), "--log_every", "20", "--val_every_steps", str(args.steps),
    ]  # fmt: skip
    env = {
        **os.environ,
        "SAGEMAKER_BASE_DIR": str(work),
        "SM_CHANNEL_TRAIN": str(data_dir),
        "PYTHONUNBUFFERED": "1",
    }
    done = subprocess.run(cmd, env=env, cwd=SRC, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"training on {procs} GPU(s) failed:\n{(done.stdout + done.stderr)[-3000:]}")
    rates = [
        m["samples_per_sec"] for m in map(parse_metrics, done.stdout.splitlines()) if "samples_per_sec" in m
    ]
    return statistics.median(rates[1:] or rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4096, help="per GPU")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="a small MLP, 60 steps (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.width, args.features, args.batch, args.steps = 512, 64, 256, 60

    import numpy as np
    import torch

    if not torch.cuda.is_available():
        print("bench/gpu.py: skipped (no CUDA device on this machine)")
        return
    gpus = torch.cuda.device_count()
    name = torch.cuda.get_device_name(0)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-gpu-data-"))
    rng = np.random.default_rng(0)
    n = args.batch * gpus * 16  # 16 steps per epoch on all GPUs, 20 % held out for validation
    x = rng.standard_normal((n, args.features), dtype=np.float32)
    np.savez(data_dir / "train.npz", x=x, y=rng.integers(0, 10, n))
    w, f = args.width, args.features
    params = f * w + w + w * w + w + w * 10 + 10  # MLP: f -> w -> w -> 10
    flops_per_sample = 6 * params

    one = run(1, args, data_dir, 29710)
    achieved = one * flops_per_sample
    peak = peak_flops(name)
    print(
        f"{gpus} x {name}; MLP {f} -> {w} -> {w} -> 10 ({params / 1e6:.0f} M parameters), bf16, torch.compile"
    )
    print(
        f"1 GPU: {one:.0f} samples/s = {achieved / 1e12:.1f} TFLOP/s of model FLOPs (6 x parameters per sample)"
    )
    if peak:
        print(f"  MFU {achieved / peak:.3f} of the dense bf16 peak {peak / 1e12:.0f} TFLOP/s")
    else:
        print("  MFU: unknown peak for this GPU (set BENCH_PEAK_TFLOPS)")
    if gpus > 1:
        many = run(gpus, args, data_dir, 29720)
        print(f"{gpus} GPUs (DDP, NCCL): {many:.0f} samples/s; scaling efficiency {many / (gpus * one):.3f}")


if __name__ == "__main__":
    main()
