"""`sagestack local train`: the request the cloud would get, run on this machine.

One launcher per simulated host (training_src/launcher.py, unchanged), each in its own /opt/ml-shaped
folder with the SM_* environment; hosts rendezvous over loopback and train with DDP/gloo.
Checkpoints live in one folder shared by all hosts, as SageMaker's S3 checkpoint sync makes them.
`interrupt_at` kills every process at once, the way a spot reclaim ends an instance.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.local.contract import cpu_count, lay_out_host, sm_environment, user_args
from sagestack.plan.sourcedir import pack_source_dir
from sagestack.plan.training import RequestContext, resolve_training_job
from sagestack.spec.loader import LoadedSpec

LOCAL_ACCOUNT = "000000000000"
METRICS_PREFIX = "metrics:"


class LocalRunError(RuntimeError):
    pass


@dataclass(frozen=True)
class LocalTrainOptions:
    hosts: int = 1
    procs: int = 1
    interrupt_at: int | None = None
    workdir: Path | None = None
    fresh: bool = False  # drop checkpoints and outputs of earlier runs
    overrides: dict[str, Any] = field(default_factory=dict)  # hyperparameters, as the spec would set them
    threads: int | None = None  # per process; default: this machine's cores shared by every process


@dataclass
class LocalTrainResult:
    workdir: Path
    exit_code: int
    interrupted_at: int | None
    metrics: list[dict[str, float]]
    failure: str | None
    model_dir: Path
    log_files: list[Path]

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and self.interrupted_at is None

    def last(self, name: str) -> float | None:
        for row in reversed(self.metrics):
            if name in row:
                return row[name]
        return None


def parse_metrics(line: str) -> dict[str, float]:
    # Same format as training_src/metrics.py (kept in step by a test; training_src imports nothing from here).
    if not line.startswith(METRICS_PREFIX):
        return {}
    out = {}
    for pair in line[len(METRICS_PREFIX) :].split():
        name, _, value = pair.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def _process_tree(root: int) -> list[int]:
    """`root` and all its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree, queue = [], [root]
    while queue:
        pid = queue.pop()
        tree.append(pid)
        queue += children.get(pid, [])
    return tree


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _extract(archive: bytes, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        tar.extractall(dest, filter="data")


def prepare_request(
    loaded: LoadedSpec, job_key: str, overrides: dict[str, Any]
) -> tuple[dict[str, Any], str, bytes]:
    """The first candidate's CreateTrainingJob request, rendered as for the cloud, with local stand-ins
    for the deployment's values; hyperparameter overrides applied the way the spec would set them."""
    spec = loaded.spec
    job = spec.jobs[job_key]
    if overrides:
        job = job.model_copy(update={"hyperparameters": {**job.hyperparameters, **overrides}})
    archive = pack_source_dir(loaded.root / job.source_dir)
    env = loaded.env or "local"

    def ctx(itype: str) -> RequestContext:
        return RequestContext(
            region=spec.region,
            role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT}:role/sagestack-local",
            bucket="sagestack-local",
            kms_key_id=f"arn:aws:kms:{spec.region}:{LOCAL_ACCOUNT}:key/local",
            source_s3_uri="s3://sagestack-local/code/sourcedir.tar.gz",
            image_uri="local",
            rules_image_uri="local",
        )

    plan = resolve_training_job(
        project=spec.project,
        env=env,
        key=job_key,
        job=job,
        source_sha256=archive.sha256,
        image_uris={},
        context=ctx,
        validate=False,
    )
    candidate = plan.candidates[0]
    return candidate.request, plan.digest, archive.data


def run_local_training(
    loaded: LoadedSpec,
    job_key: str,
    options: LocalTrainOptions,
    *,
    on_metrics: Callable[[dict[str, float]], None] = lambda _: None,
    on_line: Callable[[str, str], None] = lambda host, line: None,
) -> LocalTrainResult:
    spec = loaded.spec
    if job_key not in spec.jobs:
        raise LocalRunError(f"no job '{job_key}' (jobs: {', '.join(spec.jobs) or 'none'})")
    if options.hosts < 1 or options.procs < 1:
        raise LocalRunError("--hosts and --procs must be at least 1")
    job = spec.jobs[job_key]
    request, _digest, archive = prepare_request(loaded, job_key, options.overrides)
    workdir = options.workdir or loaded.root / ".sagestack" / "local" / (loaded.env or "project") / job_key
    if options.fresh and workdir.exists():
        shutil.rmtree(workdir)
    code = workdir / "code"
    _extract(archive, code)
    checkpoints = workdir / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    channels: dict[str, Path] = {}
    for name, channel in job.channels.items():
        if channel.local_path is None:
            raise LocalRunError(
                f"channel '{name}' of job '{job_key}' has no local_path; add one to run it locally"
            )
        channels[name] = (loaded.root / channel.local_path).resolve()

    hosts = [f"algo-{i + 1}" for i in range(options.hosts)]
    instance_type = request["ResourceConfig"]["InstanceType"]
    hyperparameters: dict[str, str] = request["HyperParameters"]
    port = _free_port()
    threads = options.threads or max(1, cpu_count() // (options.hosts * options.procs))
    processes: list[subprocess.Popen[str]] = []
    log_files = []
    for host in hosts:
        layout = lay_out_host(
            workdir / "hosts" / host,
            host=host,
            hosts=hosts,
            instance_type=instance_type,
            hyperparameters=hyperparameters,
            channels=channels,
        )
        env = {
            **os.environ,
            **sm_environment(
                layout,
                hosts=hosts,
                instance_type=instance_type,
                hyperparameters=hyperparameters,
                channels=list(channels),
                job_name=request["TrainingJobName"],
                num_cpus=cpu_count(),
            ),
            **job.environment,
            "SAGESTACK_CHECKPOINT_DIR": str(checkpoints),
            "SAGESTACK_MASTER_ADDR": "127.0.0.1",
            "SAGESTACK_MASTER_PORT": str(port),
            "SAGESTACK_NPROC_PER_NODE": str(options.procs),
            "OMP_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
        }
        for stale in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(stale, None)
        log_path = logs / f"{host}.log"
        log_files.append(log_path)
        processes.append(
            subprocess.Popen(
                [sys.executable, str(code / "launcher.py"), *user_args(hyperparameters)],
                cwd=code,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its own process group: an interrupt kills the whole host
            )
        )

    metrics: list[dict[str, float]] = []
    interrupted: list[int] = []
    lock = threading.Lock()

    def kill_all() -> None:
        # torchrun starts each worker in a session of its own, so killing the launcher's process
        # group is not enough: find every descendant first, then kill them all at once.
        victims = [pid for p in processes for pid in _process_tree(p.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def pump(host: str, proc: subprocess.Popen[str], path: Path) -> None:
        assert proc.stdout is not None
        with path.open("w") as log:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                text = line.rstrip("\n")
                on_line(host, text)
                values = parse_metrics(text)
                if not values:
                    continue
                with lock:
                    metrics.append(values)
                    on_metrics(values)
                    step = values.get("step")
                    if (
                        options.interrupt_at is not None
                        and not interrupted
                        and step is not None
                        and step >= options.interrupt_at
                    ):
                        interrupted.append(int(step))
                        kill_all()

    pumps = [
        threading.Thread(target=pump, args=(h, p, path), daemon=True)
        for h, p, path in zip(hosts, processes, log_files, strict=True)
    ]
    for t in pumps:
        t.start()
    try:
        codes = [p.wait() for p in processes]
    except KeyboardInterrupt:
        kill_all()
        raise
    for t in pumps:
        t.join(timeout=10)

    leader = workdir / "hosts" / hosts[0]
    failure = None
    for host in hosts:
        failure_file = workdir / "hosts" / host / "output" / "failure"
        if failure_file.exists():
            failure = failure_file.read_text().split("\n\n", 1)[0].strip()
            break
    exit_code = next((c for c in codes if c != 0), 0)
    model_dir = workdir / "model"
    if exit_code == 0 and not interrupted:
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(leader / "model", model_dir)
        (workdir / "metrics.json").write_text(json.dumps(metrics))
    return LocalTrainResult(
        workdir=workdir,
        exit_code=exit_code,
        interrupted_at=interrupted[0] if interrupted else None,
        metrics=metrics,
        failure=failure,
        model_dir=model_dir,
        log_files=log_files,
    )


def plot_curves(metrics: list[dict[str, float]], path: Path, title: str) -> Path | None:
    """A PNG of training loss and validation accuracy against the optimizer step."""
    train = [(m["step"], m["train_loss"]) for m in metrics if "train_loss" in m and "step" in m]
    val = [(m["step"], m["val_accuracy"]) for m in metrics if "val_accuracy" in m and "step" in m]
    if not train and not val:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    if train:
        ax.plot(*zip(*train, strict=True), color="tab:blue", label="train_loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("train loss", color="tab:blue")
    ax.set_title(title)
    if val:
        ax2 = ax.twinx()
        ax2.plot(*zip(*val, strict=True), color="tab:orange", marker="o", label="val_accuracy")
        ax2.set_ylabel("validation accuracy", color="tab:orange")
        ax2.set_ylim(0, 1)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
