"""The training program SageMaker runs (sagemaker_program), unchanged on this machine.

PyTorch DDP (NCCL on GPUs, gloo on CPUs) over a DistributedSampler; per-device and global batch;
learning rate scaled linearly with the global batch plus linear warm-up (Goyal et al., 2017);
gradient accumulation; bf16 autocast where the device supports it; opt-in torch.compile, FSDP and
torch.profiler; metrics in training_src/metrics.py's format; TensorBoard summaries; atomic
checkpoints every N steps carrying everything needed to resume bitwise-identically; the final
model as a state dict and TorchScript; a failure reason in /opt/ml/output/failure.
Self-contained: imports nothing from sagestack.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

# Siblings in the source directory (the script's folder is first on sys.path, also under torchrun).
from checkpointing import load_newest, save_atomic
from data import DataError, load_training_data, split
from metrics import format_metrics
from model import build_model
from process_group import end_process_group
from tracking import Tracker, end_active


class HyperparameterError(ValueError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise HyperparameterError(f"bad hyperparameter: {message}")


def _bool(text: str) -> bool:
    lowered = str(text).strip().strip('"').lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = _Parser(description="sagestack digits trainer")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate at --reference_batch")
    p.add_argument("--batch_size_per_device", type=int, default=64)
    p.add_argument("--grad_accum_steps", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--reference_batch", type=int, default=64, help="global batch at which --lr applies")
    p.add_argument("--lr_scaling", choices=["linear", "none"], default="linear")
    p.add_argument(
        "--warmup_steps", type=int, default=-1, help="-1: 5%% of the steps when the lr is scaled up"
    )
    p.add_argument("--optimizer", choices=["adam", "adamw", "sgd"], default="adam")
    p.add_argument("--model", choices=["auto", "cnn", "mlp"], default="auto")
    p.add_argument("--width", type=int, default=0, help="the MLP's hidden size (0: its default, 256)")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="fp32")
    p.add_argument("--compile", type=_bool, default=False)
    p.add_argument("--fsdp", type=_bool, default=False)
    p.add_argument("--profile", type=_bool, default=False)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--val_fraction", type=float, default=0.2)
    p.add_argument(
        "--val_every_steps",
        type=int,
        default=100,
        help="validate at the end of each epoch that reaches a multiple of this many optimizer steps "
        "(0: every epoch); the last epoch always validates",
    )
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--max_steps", type=int, default=0, help="stop after N optimizer steps (0: all epochs)")
    p.add_argument("--checkpoint_every_steps", type=int, default=0)
    p.add_argument("--checkpoint_keep_last", type=int, default=3)
    args, unknown = p.parse_known_args(argv)
    if unknown:
        print(f"warning: ignoring unknown arguments {unknown}", flush=True)
    if args.width < 0:
        raise HyperparameterError(f"bad hyperparameter: width must be >= 0, got {args.width}")
    if args.val_every_steps < 0:
        raise HyperparameterError(
            f"bad hyperparameter: val_every_steps must be >= 0, got {args.val_every_steps}"
        )
    for name in ("epochs", "batch_size_per_device", "grad_accum_steps", "reference_batch", "log_every"):
        if getattr(args, name) < 1:
            raise HyperparameterError(f"bad hyperparameter: {name} must be >= 1, got {getattr(args, name)}")
    if not 0 < args.val_fraction < 1:
        raise HyperparameterError(
            f"bad hyperparameter: val_fraction must be in (0, 1), got {args.val_fraction}"
        )
    return args


@dataclass(frozen=True)
class Paths:
    model: Path
    output: Path
    checkpoints: Path
    tensorboard: Path

    @classmethod
    def from_env(cls) -> Paths:
        base = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
        output = Path(os.environ.get("SM_OUTPUT_DIR", base / "output"))
        return cls(
            model=Path(os.environ.get("SM_MODEL_DIR", base / "model")),
            output=output,
            checkpoints=Path(os.environ.get("SAGESTACK_CHECKPOINT_DIR", base / "checkpoints")),
            tensorboard=Path(os.environ.get("SAGESTACK_TENSORBOARD_DIR", output / "tensorboard")),
        )


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    size: int
    device: torch.device

    @property
    def leader(self) -> bool:
        return self.rank == 0


def world_from_env(env: dict[str, str]) -> tuple[int, int, int]:
    """(size, rank, local rank): torchrun's variables, else those Open MPI gives each rank that
    mpirun starts (the container's MPI and SMDDP runners), else a world of one."""
    if "WORLD_SIZE" in env:
        return int(env["WORLD_SIZE"]), int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0"))
    if "OMPI_COMM_WORLD_SIZE" in env:
        return (
            int(env["OMPI_COMM_WORLD_SIZE"]),
            int(env.get("OMPI_COMM_WORLD_RANK", "0")),
            int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")),
        )
    return 1, 0, 0


def init_distributed() -> World:
    size, rank, local_rank = world_from_env(dict(os.environ))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if size > 1:
        # Under mpirun nothing sets the rendezvous: the PyTorch container exports MASTER_ADDR
        # (algo-1) and MASTER_PORT (7777) to local ranks only, so fall back to the first host.
        hosts = json.loads(os.environ.get("SM_HOSTS", '["algo-1"]'))
        os.environ.setdefault("MASTER_ADDR", sorted(hosts)[0])
        os.environ.setdefault("MASTER_PORT", "7777")
        dist.init_process_group(backend=backend, rank=rank, world_size=size)
    return World(rank, local_rank, size, device)


def log(world: World, message: str) -> None:
    if world.leader:
        print(message, flush=True)


def rng_state() -> dict[str, Any]:
    """Every generator's state in tensors and plain values, so a checkpoint loads weights-only."""
    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    numpy = [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)]
    state = {"python": random.getstate(), "numpy": numpy, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "fp32":
        return None
    supported = torch.cuda.is_bf16_supported() if device.type == "cuda" else True
    if precision == "bf16" and not supported:
        raise HyperparameterError("bad hyperparameter: precision bf16 is not supported on this device")
    return torch.bfloat16 if supported else None


def wrap_model(model: torch.nn.Module, args: argparse.Namespace, world: World) -> torch.nn.Module:
    model = model.to(world.device)
    if world.size > 1:
        if args.fsdp:
            # FSDP2 (fully_shard): parameters, gradients and optimizer state sharded across ranks;
            # unlike FSDP1 it also runs on CPU processes over gloo.
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh(world.device.type, (world.size,))
            for child in model.children():
                fully_shard(child, mesh=mesh)
            fully_shard(model, mesh=mesh)
        else:
            from torch.nn.parallel import DistributedDataParallel

            model = DistributedDataParallel(
                model,
                device_ids=[world.local_rank] if world.device.type == "cuda" else None,
                gradient_as_bucket_view=True,  # gradients live in the all-reduce buckets: no copy
                static_graph=True,  # the graph never changes: DDP skips per-step bookkeeping
            )
    if args.compile:
        model = torch.compile(model)  # type: ignore[assignment]
    return model


def full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Unsharded, unwrapped state dicts (a collective under FSDP: every rank calls it)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def load_full_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, model_sd: dict, optim_sd: dict
) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    set_state_dict(
        model,
        optimizer,
        model_state_dict=model_sd,
        optim_state_dict=optim_sd,
        options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=False),
    )


def gather_rng(world: World) -> list[dict[str, Any]]:
    mine = rng_state()
    if world.size == 1:
        return [mine]
    everyone: list[Any] = [None] * world.size
    dist.all_gather_object(everyone, mine)
    return everyone


def evaluate(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, world: World, dtype: torch.dtype | None
) -> tuple[float, float]:
    """Loss and accuracy over the whole validation set, each rank scoring its own share of it
    (rank r takes samples r, r + world, ...) and the sums all-reduced: the same figures as one
    process scoring all of it, at 1/world of the cost."""
    model.eval()
    xs, ys = x[world.rank :: world.size].to(world.device), y[world.rank :: world.size].to(world.device)
    with torch.no_grad(), _autocast(world, dtype):
        # Under FSDP every rank must run the forward (it all-gathers the parameters), even on an empty share.
        logits = model(xs).float()
        totals = torch.stack(
            [
                torch.nn.functional.cross_entropy(logits, ys, reduction="sum"),
                (logits.argmax(1) == ys).sum().to(logits.dtype),
                torch.tensor(float(len(ys)), device=logits.device),
            ]
        )
    if world.size > 1:
        dist.all_reduce(totals)
    model.train()
    loss_sum, correct, count = totals.tolist()
    return loss_sum / count, correct / count


def _autocast(world: World, dtype: torch.dtype | None) -> Any:
    """bf16 autocast, or nothing at all in fp32 (a disabled autocast still costs every step)."""
    return torch.autocast(world.device.type, dtype=dtype) if dtype is not None else _null()


def validates_after(epoch_start_step: int, epoch_end_step: int, every: int, last: bool) -> bool:
    """Whether the epoch that ran optimizer steps (epoch_start_step, epoch_end_step] ends with a
    validation: every epoch for `every` 0, else the epochs that reach a multiple of `every`, and
    always the last one. Steps alone decide it, so a resumed run validates where an uninterrupted one does."""
    return last or every == 0 or epoch_end_step // every > epoch_start_step // every


def train(args: argparse.Namespace, paths: Paths, world: World) -> dict[str, float]:
    seed_everything(args.seed)
    data = load_training_data()
    train_set, val_set = split(data, args.val_fraction, args.seed)
    per_step = args.batch_size_per_device * world.size
    if len(train_set.y) < per_step:
        raise DataError(
            f"{len(train_set.y)} training samples cannot be split over a world of {world.size} processes x "
            f"batch {args.batch_size_per_device}: use fewer processes or a smaller batch_size_per_device"
        )
    sampler = DistributedSampler(
        TensorDataset(train_set.x, train_set.y),
        num_replicas=world.size,
        rank=world.rank,
        shuffle=True,
        seed=args.seed,
        drop_last=True,
    )
    loader = DataLoader(
        TensorDataset(train_set.x, train_set.y),
        batch_size=args.batch_size_per_device,
        sampler=sampler,
        drop_last=True,
    )
    micro_per_epoch = len(loader)
    steps_per_epoch = micro_per_epoch // args.grad_accum_steps
    if steps_per_epoch < 1:
        raise DataError(
            f"one epoch has {micro_per_epoch} micro-batches per process, fewer than "
            f"grad_accum_steps={args.grad_accum_steps}; lower it or the batch size"
        )
    total_steps = args.epochs * steps_per_epoch
    if args.max_steps:
        total_steps = min(total_steps, args.max_steps)

    global_batch = per_step * args.grad_accum_steps
    scale = global_batch / args.reference_batch if args.lr_scaling == "linear" else 1.0
    peak_lr = args.lr * scale
    warmup = args.warmup_steps if args.warmup_steps >= 0 else (max(1, total_steps // 20) if scale > 1 else 0)

    torch.manual_seed(args.seed)  # identical initial weights on every rank and every restart
    model = wrap_model(build_model(args.model, train_set.x[0], data.num_classes, args.width), args, world)
    optimizer_cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}[
        args.optimizer
    ]
    optimizer = optimizer_cls(model.parameters(), lr=peak_lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0
    )
    dtype = autocast_dtype(args.precision, world.device)

    step, start_epoch, skip_micro = 0, 0, 0
    resumed = load_newest(paths.checkpoints, log=lambda m: log(world, m))
    if resumed is not None:
        step, state = resumed
        load_full_state(model, optimizer, state["model"], state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_epoch, skip_micro = state["epoch"], state["micro_batch"]
        rngs = state["rng"]
        set_rng_state(rngs[world.rank] if world.rank < len(rngs) else rngs[0])
        log(world, f"resumed from checkpoint at step {step} (epoch {start_epoch}, micro-batch {skip_micro})")

    log(
        world,
        f"training: world_size={world.size} device={world.device.type} global_batch={global_batch} "
        f"lr={peak_lr:g} (x{scale:g}) warmup_steps={warmup} total_steps={total_steps} data={data.source}",
    )
    writer = _tensorboard(paths, world)
    tracker = Tracker.start(world.leader, vars(args), log=lambda m: log(world, m))
    profiler = _profiler(args, paths, world)
    last: dict[str, float] = {}
    window_start, window_samples = time.perf_counter(), 0
    done = step >= total_steps
    epoch = start_epoch
    checkpoint_seconds = 0.0
    train_started = time.perf_counter()
    accumulate = args.grad_accum_steps
    for epoch in range(start_epoch, args.epochs):
        if done:
            break
        # The epoch's first step as if it had run whole (a resumed epoch starts part-way).
        epoch_start_step = epoch * steps_per_epoch
        sampler.set_epoch(epoch)
        optimizer.zero_grad(set_to_none=True)
        running = torch.zeros((), device=world.device)
        for micro, (x, y) in enumerate(loader):
            if micro >= steps_per_epoch * args.grad_accum_steps:
                break  # a tail shorter than grad_accum_steps would never reach an optimizer step
            if epoch == start_epoch and micro < skip_micro:
                continue
            x, y = x.to(world.device), y.to(world.device)
            boundary = accumulate == 1 or (micro + 1) % accumulate == 0
            sync = _no_sync(model) if (world.size > 1 and not boundary and not args.fsdp) else _null()
            with sync, _autocast(world, dtype):
                loss = torch.nn.functional.cross_entropy(model(x).float(), y)
                if accumulate > 1:
                    loss = loss / accumulate
                loss.backward()
            running += loss.detach()
            window_samples += len(y) * world.size
            if not boundary:
                continue
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if profiler is not None:
                profiler.step()
            if step % args.log_every == 0 or step == total_steps:
                if world.size > 1:
                    dist.all_reduce(running)
                    running /= world.size
                elapsed = time.perf_counter() - window_start
                last = {
                    "train_loss": running.item(),
                    "lr": scheduler.get_last_lr()[0],
                    "samples_per_sec": window_samples / elapsed if elapsed > 0 else 0.0,
                }
                log(world, format_metrics(epoch=epoch, step=step, total_steps=total_steps, **last))
                tracker.metrics(last, step)
                if writer is not None:
                    for k, v in last.items():
                        writer.add_scalar(k, v, step)
                window_start, window_samples = time.perf_counter(), 0
            running.zero_()
            if args.checkpoint_every_steps and step % args.checkpoint_every_steps == 0:
                started = time.perf_counter()
                _checkpoint(model, optimizer, scheduler, paths, world, args, step, epoch, micro + 1)
                checkpoint_seconds += time.perf_counter() - started
            if step >= total_steps:
                done = True
                break
        if not validates_after(
            epoch_start_step, step, args.val_every_steps, done or epoch == args.epochs - 1
        ):
            continue
        val_loss, val_accuracy = evaluate(model, val_set.x, val_set.y, world, dtype)
        last.update(val_loss=val_loss, val_accuracy=val_accuracy)
        log(world, format_metrics(epoch=epoch, step=step, val_loss=val_loss, val_accuracy=val_accuracy))
        tracker.metrics({"val_loss": val_loss, "val_accuracy": val_accuracy}, step)
        if writer is not None:
            writer.add_scalar("val_accuracy", val_accuracy, step)
            writer.add_scalar("val_loss", val_loss, step)
    # What checkpointing cost this run, on the training's own clock (robust to a noisy machine).
    log(
        world,
        format_metrics(
            step=step,
            train_seconds=time.perf_counter() - train_started,
            checkpoint_seconds=checkpoint_seconds,
        ),
    )
    if profiler is not None:
        profiler.stop()
    if writer is not None:
        writer.close()
    _save_model(model, optimizer, paths, world, train_set.x[:1], data.num_classes, args, last, step)
    tracker.model(paths.model)
    tracker.end()
    return last


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _no_sync(model: torch.nn.Module) -> Any:
    inner = getattr(model, "_orig_mod", model)
    return inner.no_sync() if hasattr(inner, "no_sync") else _null()


def _checkpoint(
    model, optimizer, scheduler, paths: Paths, world: World, args, step: int, epoch: int, next_micro: int
) -> None:  # type: ignore[no-untyped-def]
    model_sd, optim_sd = full_state(model, optimizer)
    rngs = gather_rng(world)
    if world.leader:
        save_atomic(
            {
                "model": model_sd,
                "optimizer": optim_sd,
                "scheduler": scheduler.state_dict(),
                "step": step,
                "epoch": epoch,
                "micro_batch": next_micro,
                "rng": rngs,
                "world_size": world.size,
                "args": vars(args),
            },
            paths.checkpoints,
            step,
            args.checkpoint_keep_last,
        )
    if world.size > 1:
        dist.barrier()  # no rank runs ahead of a checkpoint it may need to resume from


def _save_model(
    model,
    optimizer,
    paths: Paths,
    world: World,
    example: torch.Tensor,
    num_classes: int,
    args,
    metrics: dict[str, float],
    step: int,
) -> None:  # type: ignore[no-untyped-def]
    model_sd, _ = full_state(model, optimizer)
    if world.leader:
        paths.model.mkdir(parents=True, exist_ok=True)
        # Not *.pt / *.pth: SageMaker Neo takes the one TorchScript file of the archive (model.pt).
        torch.save(model_sd, paths.model / "state_dict.bin")
        plain = build_model(args.model, example[0], num_classes, args.width)
        plain.load_state_dict(model_sd)
        plain.eval()
        scripted = torch.jit.trace(plain, example.float())
        scripted.save(str(paths.model / "model.pt"))
        info = {
            "input_shape": list(example.shape),
            "num_classes": num_classes,
            "model": args.model,
            "width": args.width,
            "step": step,
            "metrics": metrics,
        }
        (paths.model / "model_info.json").write_text(json.dumps(info, indent=2))
        # The serving contract travels with the model (model.tar.gz's code/), as SageMaker's
        # PyTorch and Neo inference containers expect.
        serving = Path(__file__).resolve().parent / "inference.py"
        if serving.exists():
            (paths.model / "code").mkdir(exist_ok=True)
            shutil.copyfile(serving, paths.model / "code" / "inference.py")
    if world.size > 1:
        dist.barrier()


def _tensorboard(paths: Paths, world: World) -> Any:
    if not world.leader:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional in the container
        return None
    paths.tensorboard.mkdir(parents=True, exist_ok=True)
    return SummaryWriter(log_dir=str(paths.tensorboard))


def _profiler(args, paths: Paths, world: World) -> Any:  # type: ignore[no-untyped-def]
    if not args.profile or not world.leader:
        return None
    from torch.profiler import profile, schedule, tensorboard_trace_handler

    prof = profile(
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(paths.tensorboard / "profiler")),
    )
    prof.start()
    return prof


def write_failure(paths: Paths, error: BaseException) -> None:
    """SageMaker shows the first 1024 characters of this file as the job's FailureReason."""
    reason = f"{type(error).__name__}: {error}"
    try:
        paths.output.mkdir(parents=True, exist_ok=True)
        (paths.output / "failure").write_text(reason[:1024] + "\n\n" + traceback.format_exc())
    except OSError:
        pass
    print(f"error: {reason}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    paths = Paths.from_env()
    world: World | None = None
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        world = init_distributed()
        train(args, paths, world)
        return 0
    except (HyperparameterError, DataError, ValueError, RuntimeError, OSError) as e:
        write_failure(paths, e)
        end_active(failed=True)
        return 1
    except BaseException:
        end_active(failed=True)  # the MLflow run says so; the error goes on
        raise
    finally:
        if world is not None and world.size > 1 and dist.is_initialized():
            end_process_group(dist)  # gloo's workers settle first: a finished run exits 0


if __name__ == "__main__":
    sys.exit(main())
