"""`sagestack local train`: the request the cloud would get, run on this machine.

Each simulated host gets its own /opt/ml-shaped folder (config files, channels, its own code
directory, model/, output/) and the environment AWS's training toolkit would give the script
(local/contract.py); the script is started by the container's own rules (local/launch.py): torchrun
only for torch_distributed, the ranks of mpirun for MPI/SMDDP, otherwise `python train.py ARGS` on
every host independently. Hosts rendezvous over loopback. Checkpoints live in one folder shared by
all hosts, as SageMaker's S3 checkpoint sync makes them. `interrupt_at` kills every process at once,
the way a spot reclaim ends an instance.
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
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from sagestack.core.contract import (
    Devices,
    HostLayout,
    container_path,
    cpu_count,
    files_under,
    input_data_config,
    is_container_path,
    resource_config,
    sagemaker_process_exports,
    sm_variables,
    toolkit_exports,
    training_environment,
    write_host_config,
)
from sagestack.core.names import Names
from sagestack.core.sourcedir import pack_source_dir
from sagestack.local.launch import MPI_RUNNERS, Launch, LaunchError, plan_launch
from sagestack.local.requirements import RequirementsCheck, check_requirements, install_requirements
from sagestack.local.tracking import LocalStore, TrackingUnavailable, local_store, prepare
from sagestack.project.loader import LoadedSpec
from sagestack.training.request import RequestContext, resolve_training_job

LOCAL_ACCOUNT = "000000000000"
LOCAL_INTERFACE = "lo"  # resourceconfig.json's network_interface_name here (eth0 on SageMaker)
# Variables of a launcher that started this process; the local hosts must not inherit them.
_STALE = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
)
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
    install_requirements: bool = False  # pip install -r requirements.txt here, as the container does
    tracking: bool = True  # with tracking.mlflow: log to the local MLflow store
    tracking_tags: dict[str, str] = field(default_factory=dict)  # set on the run (e.g. the tuning trial)


@dataclass
class LocalTrainResult:
    workdir: Path
    exit_code: int
    interrupted_at: int | None
    metrics: list[dict[str, float]]
    failure: str | None
    model_dir: Path
    log_files: list[Path]
    launch: Launch | None = None  # algo-1's runner and command
    hosts: list[HostLayout] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)  # each host's, in host order
    requirements: RequirementsCheck | None = None
    tracking: LocalStore | None = None  # the local MLflow store the run logged to

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
        names=Names(spec.project, env),
        key=job_key,
        job=job,
        source_sha256=archive.sha256,
        image_uris={},
        context=ctx,
        validate=False,
    )
    candidate = plan.candidates[0]
    return candidate.request, plan.digest, archive.data


def _simulated_devices(instance_type: str, procs: int) -> Devices:
    """A simulated host has `procs` accelerators of the instance's kind (what nvidia-smi or neuron-ls
    would count); a CPU instance has none, so the container starts one process there."""
    from sagestack.core.catalog.instances import instance_type as catalog_instance

    it = catalog_instance(instance_type)
    cpus = os.cpu_count() or 1  # the toolkit's SM_NUM_CPUS is multiprocessing.cpu_count()
    if it.gpus:
        return Devices(gpus=procs, cpus=cpus)
    if it.neuron_cores:
        return Devices(neurons=procs, cpus=cpus)
    if procs > 1:
        raise LocalRunError(
            f"{instance_type} has no accelerator, so the container starts one process per host; "
            f"--procs {procs} simulates accelerators per host and needs an accelerated instance type"
        )
    return Devices(cpus=cpus)


def _replace(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def lay_out_channel(dest: Path, source: Path, distribution: str, host_index: int, hosts: int) -> int:
    """A channel's files on one host: all of them (FullyReplicated), or, for ShardedByS3Key, the
    host's share of the objects in key order (object i goes to host i mod N). Returns the count."""
    _replace(dest)
    files = list(files_under(source))
    if distribution == "ShardedByS3Key":
        files = files[host_index::hosts]
    dest.mkdir(parents=True)
    for f in files:
        target = dest / f.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(f.resolve())
    return len(files)


@dataclass(frozen=True)
class HostPlan:
    layout: HostLayout
    launch: Launch
    environment: dict[str, str]  # the script's environment on top of this process's


def prepare_hosts(
    loaded: LoadedSpec,
    job_key: str,
    request: dict[str, Any],
    archive: bytes,
    workdir: Path,
    options: LocalTrainOptions,
    *,
    master_port: int,
) -> list[HostPlan]:
    """What SageMaker and the container do before the script starts, once per simulated host: the
    /opt/ml folders and their config files, the channels, the code unpacked into the host's own
    code directory, the checkpoint directory (shared by all hosts, as S3 sync makes it), the SM_*
    environment and the runner."""
    job = loaded.spec.jobs[job_key]
    hosts = [f"algo-{i + 1}" for i in range(options.hosts)]
    instance_type = request["ResourceConfig"]["InstanceType"]
    hyperparameters: dict[str, str] = request["HyperParameters"]
    devices = _simulated_devices(instance_type, options.procs)
    data_config = input_data_config(request)
    for name, entry in data_config.items():
        if entry["TrainingInputMode"] == "Pipe":
            raise LocalRunError(
                f"channel '{name}' uses Pipe input mode, which is not emulated locally (the script would "
                "read a FIFO per epoch); use input_mode File or FastFile to run it here"
            )
    sources: dict[str, Path] = {}
    for name, channel in job.channels.items():
        if channel.local_path is None:
            raise LocalRunError(
                f"channel '{name}' of job '{job_key}' has no local_path; add one to run it locally"
            )
        source = (loaded.root / channel.local_path).resolve()
        if not source.is_dir():
            raise LocalRunError(f"channel '{name}': local_path {source} is not a folder")
        sources[name] = source
    checkpoints = workdir / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    checkpoint_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    threads = options.threads or max(1, cpu_count() // (options.hosts * options.procs))
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = ""
    plans = []
    for index, host in enumerate(hosts):
        layout = HostLayout(host, workdir / "hosts" / host)
        resources = resource_config(host, hosts, instance_type, LOCAL_INTERFACE)
        write_host_config(
            layout, hyperparameters=hyperparameters, resources=resources, data_config=data_config
        )
        _extract(archive, layout.code)
        for name, source in sources.items():
            count = lay_out_channel(
                layout.data / name, source, data_config[name]["S3DistributionType"], index, len(hosts)
            )
            if count == 0:
                raise LocalRunError(
                    f"channel '{name}' gives {host} no files ({len(list(files_under(source)))} object(s) "
                    f"sharded by S3 key over {len(hosts)} hosts): the script there would find the channel "
                    "empty; use fewer hosts or split the data into more files"
                )
        if checkpoint_path:
            local = container_path(layout.base, checkpoint_path)
            local.parent.mkdir(parents=True, exist_ok=True)
            _replace(local)
            local.symlink_to(checkpoints.resolve(), target_is_directory=True)
        env_dict = training_environment(
            layout,
            hyperparameters=hyperparameters,
            resources=resources,
            data_config=data_config,
            devices=devices,
            job_name=request["TrainingJobName"],
        )
        launch = plan_launch(env_dict, layout.code)
        environment = {
            # the request's Environment, container paths mapped into this host's folder
            **{
                k: str(container_path(layout.base, v)) if is_container_path(v) else v
                for k, v in request.get("Environment", {}).items()
            },
            # what the platform sets
            "TRAINING_JOB_NAME": request["TrainingJobName"],
            "TRAINING_JOB_ARN": f"arn:aws:sagemaker:{loaded.spec.region}:{LOCAL_ACCOUNT}:training-job/"
            + request["TrainingJobName"],
            "AWS_REGION": loaded.spec.region,
            # what the toolkit and the PyTorch container export, then the SM_* variables
            **sagemaker_process_exports(hyperparameters),
            **toolkit_exports(env_dict, code_dir=layout.code, master_port=master_port),
            **({"NCCL_PROTO": "simple"} if launch.runner == "torchrun" else {}),
            "SM_DLC_TORCH_VERSION": torch_version,
            **sm_variables(env_dict),
            "MASTER_ADDR": "127.0.0.1",  # LOCAL_SUBSTITUTIONS
            # the toolkit's own override of /opt/ml; a script that builds container paths from it
            # (training_src does) stays inside the host's folder
            "SAGEMAKER_BASE_DIR": str(layout.base),
            "OMP_NUM_THREADS": str(threads),
            "PYTHONUNBUFFERED": "1",
        }
        plans.append(HostPlan(layout, launch, environment))
    return plans


def _scale_notes(request: dict[str, Any], options: LocalTrainOptions) -> list[str]:
    """Where the simulated cluster is smaller than the cloud's, say so (the world size, the global
    batch and the scaled learning rate follow it)."""
    from sagestack.core.catalog.instances import instance_type as catalog_instance

    itype = request["ResourceConfig"]["InstanceType"]
    count = request["ResourceConfig"]["InstanceCount"]
    per_host = catalog_instance(itype).accelerators_per_host  # 1 on a CPU type
    notes = []
    if options.hosts != count:
        notes.append(
            f"note: {options.hosts} simulated host(s); the job runs on {count} x {itype} (--hosts {count})"
        )
    if options.procs != per_host:
        notes.append(
            f"note: each simulated host has {options.procs} of {itype}'s {per_host} accelerators (--procs {per_host})"
        )
    return notes


def _failure_text(code: int, command: list[str]) -> str:
    # The toolkit's report when the script exits non-zero and left no failure file of its own.
    return f'Framework Error: \nExecuteUserScriptError:\nExitCode {code}\nCommand "{" ".join(command)}"'


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
    request, _digest, archive = prepare_request(loaded, job_key, options.overrides)
    workdir = options.workdir or loaded.root / ".sagestack" / "local" / (loaded.env or "project") / job_key
    if options.fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "sourcedir.tar.gz").write_bytes(archive)
    (workdir / "request.json").write_text(json.dumps(request, indent=2, sort_keys=True))
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    plans = prepare_hosts(loaded, job_key, request, archive, workdir, options, master_port=port)
    requirements = check_requirements(plans[0].layout.code)
    if requirements is not None and not requirements.ok:
        if not options.install_requirements:
            problems = [
                *requirements.unmet,
                *(f"{line}: not checked (install it to use it)" for line in requirements.unchecked),
            ]
            raise LocalRunError(
                f"{spec.jobs[job_key].source_dir}/requirements.txt: the container "
                "installs these with pip before training, and this environment lacks them:\n  "
                + "\n  ".join(problems)
                + "\ninstall them here (pip install -r requirements.txt), or rerun with "
                "--install-requirements to let sagestack run that pip command as the container does"
            )
        installed = install_requirements(plans[0].layout.code)
        if installed.returncode != 0:
            raise LocalRunError(
                f"pip install -r requirements.txt failed:\n{installed.stdout[-2000:]}{installed.stderr[-2000:]}"
            )
    tracking_env: dict[str, str] = {}
    store = local_store(loaded, job_key) if options.tracking else None
    if store is not None:
        try:
            prepare(store)
        except TrackingUnavailable as e:
            on_line("sagestack", f"warning: {e}")
            store = None
        else:
            tracking_env = store.environment(options.tracking_tags)
            on_line("sagestack", f"tracking: MLflow experiment '{store.experiment}' in {store.uri}")
    leader = plans[0].launch
    on_line("sagestack", f"launch: {leader.describe()}: {' '.join(leader.container_command())}")
    for note in _scale_notes(request, options):
        on_line("sagestack", note)
    if len(plans) > 1 and leader.runner == "process":
        on_line(
            "sagestack",
            f"warning: {len(plans)} hosts and no distribution: the script runs {len(plans)} times independently, "
            "as in the container (algo-1's model is kept); add distribution: to train one model",
        )

    processes: list[subprocess.Popen[str]] = []
    log_files: list[Path] = []
    owners: list[HostPlan] = []
    base_env = {k: v for k, v in os.environ.items() if k not in _STALE}
    try:
        for plan in plans:
            for rank, (command, extra) in enumerate(plan.launch.local_commands(master_port=port)):
                suffix = (
                    f"-{rank}"
                    if plan.launch.runner in MPI_RUNNERS and plan.launch.processes_per_host > 1
                    else ""
                )
                log_path = logs / f"{plan.layout.name}{suffix}.log"
                log_files.append(log_path)
                owners.append(plan)
                processes.append(
                    subprocess.Popen(
                        command,
                        cwd=plan.layout.code,
                        env={**base_env, **plan.environment, **tracking_env, **extra},
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        start_new_session=True,  # its own process group: an interrupt kills the whole host
                    )
                )
    except LaunchError as e:
        raise LocalRunError(str(e)) from None

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
        threading.Thread(target=pump, args=(path.stem, p, path), daemon=True)
        for p, path in zip(processes, log_files, strict=True)
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

    if not interrupted:
        # The toolkit's last word on each host: output/success, or output/failure when the script
        # left none of its own.
        for plan in plans:
            own = [c for c, o in zip(codes, owners, strict=True) if o is plan]
            failed = next((c for c in own if c != 0), 0)
            if failed == 0:
                plan.layout.success.write_text("")
            elif not plan.layout.failure.exists():
                plan.layout.failure.write_text(_failure_text(failed, plan.launch.container_command()))
    failure = None
    for plan in plans:
        if plan.layout.failure.exists():
            failure = plan.layout.failure.read_text().split("\n\n", 1)[0].strip()
            break
    exit_code = next((c for c in codes if c != 0), 0)
    model_dir = workdir / "model"
    if exit_code == 0 and not interrupted:
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(plans[0].layout.model, model_dir)
        (workdir / "metrics.json").write_text(json.dumps(metrics))
    return LocalTrainResult(
        workdir=workdir,
        exit_code=exit_code,
        interrupted_at=interrupted[0] if interrupted else None,
        metrics=metrics,
        failure=failure,
        model_dir=model_dir,
        log_files=log_files,
        launch=leader,
        hosts=[p.layout for p in plans],
        launches=[p.launch for p in plans],
        requirements=requirements,
        tracking=store,
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
