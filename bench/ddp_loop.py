"""The baseline bench/train.py measures training_src/train.py against: a minimal hand-written DDP loop.

The same model, data, split, sampler, batch, optimizer and learning rate as the trainer with
`--lr_scaling none` and fp32, and nothing else: no warm-up schedule, no validation, no checkpoints,
no TensorBoard or MLflow, no failure file. It prints samples/s over windows of --log_every steps in
the trainer's metrics format (one host sync per window, as a careful hand-written loop would), so
both are read the same way. Started by torchrun like the trainer:
`python -m torch.distributed.run --nproc_per_node N bench/ddp_loop.py --max_steps S --batch_size_per_device B`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "training_src"))
from data import load_training_data, split
from metrics import format_metrics
from model import build_model


def main() -> None:
    size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if size > 1:
        dist.init_process_group("gloo", rank=rank, world_size=size)
    train(size, rank)
    if size > 1:
        # Every rank reaches the end before the group goes: a rank tearing gloo down while its peer
        # is still in its last all-reduce aborts. And the group goes only after train() returned:
        # while the DDP model that holds it lived on in main(), the group was freed with it during
        # interpreter shutdown, and 1 run in ~30 aborted there ("terminate called without an active
        # exception", no Python frame; training_src/train.py ends the same way).
        dist.barrier()
        dist.destroy_process_group()


def train(size: int, rank: int) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--max_steps", type=int, default=400)
    p.add_argument("--batch_size_per_device", type=int, default=64)
    p.add_argument("--log_every", type=int, default=25)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    args, _ = p.parse_known_args()

    data = load_training_data()
    train, _ = split(data, 0.2, args.seed)
    dataset = TensorDataset(train.x, train.y)
    sampler = DistributedSampler(
        dataset, num_replicas=size, rank=rank, shuffle=True, seed=args.seed, drop_last=True
    )
    loader = DataLoader(dataset, batch_size=args.batch_size_per_device, sampler=sampler, drop_last=True)
    torch.manual_seed(args.seed)  # the trainer's initial weights
    model = build_model("auto", train.x[0], data.num_classes)
    if size > 1:
        model = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    step, epoch = 0, 0
    window_start, window_samples = time.perf_counter(), 0
    while step < args.max_steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            window_samples += len(y) * size
            if step % args.log_every == 0:
                elapsed = time.perf_counter() - window_start
                if rank == 0:
                    print(
                        format_metrics(
                            step=step, train_loss=loss.item(), samples_per_sec=window_samples / elapsed
                        ),
                        flush=True,
                    )
                window_start, window_samples = time.perf_counter(), 0
            if step >= args.max_steps:
                break
        epoch += 1


if __name__ == "__main__":
    main()
