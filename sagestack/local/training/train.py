"""`sagestack local train`: the request the cloud would get, run on this machine.

The request is rendered once (local/training/job.py); the simulated hosts are laid out as SageMaker and the
container lay them out (local/training/hosts.py); the script is started by the container's own rules
(local/training/launch.py): torchrun only for torch_distributed, the ranks of mpirun for MPI/SMDDP, otherwise
`python train.py ARGS` on every host independently; the processes are followed and, at
`interrupt_at`, killed at once, the way a spot reclaim ends an instance (local/training/processes.py). Then
the toolkit's last word on each host (output/success or output/failure) and algo-1's model.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.contract import HostLayout
from sagestack.core.drivers import CODE_CHANNEL
from sagestack.local.errors import LocalRunError
from sagestack.local.pasteable import program, shown_path
from sagestack.local.training.drivers_contract import (
    conclude_driver_hosts,
    container_command,
    driver_script,
    is_drivers_request,
    prepare_driver_hosts,
    run_driver_hosts,
)
from sagestack.local.training.failure import failure_text
from sagestack.local.training.hosts import SimulatedHost, prepare_hosts
from sagestack.local.training.job import LocalRequest, LocalTrainOptions, local_training_request
from sagestack.local.training.launch import MPI_RUNNERS, Launch, LaunchError
from sagestack.local.training.metric_series import MetricSeries
from sagestack.local.training.processes import Command, Outcome, Processes, free_port
from sagestack.local.training.requirements import RequirementsCheck, check_requirements, install_requirements
from sagestack.local.training.rundir import claim
from sagestack.local.training.tracking import LocalStore, TrackingUnavailable, local_store, prepare
from sagestack.project.loader import LoadedSpec


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
    series: MetricSeries = field(default_factory=lambda: MetricSeries({}))  # as SageMaker reads the log
    # each algo-N:port a TF_CONFIG names -> the loopback address that stood for it (TF_LOCAL_SUBSTITUTIONS)
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0 and self.interrupted_at is None

    def last(self, name: str) -> float | None:
        """A metric's last value: its FinalMetricDataList entry, else the last `metrics:` line's."""
        final = self.series.last(name)
        if final is not None:
            return final
        for row in reversed(self.metrics):
            if name in row:
                return row[name]
        return None


def run_local_training(
    loaded: LoadedSpec,
    job_key: str,
    options: LocalTrainOptions,
    *,
    on_metrics: Callable[[dict[str, float]], None] = lambda _: None,
    on_line: Callable[[str, str], None] = lambda host, line: None,
) -> LocalTrainResult:
    if options.hosts < 1 or options.procs < 1:
        raise LocalRunError("--hosts and --procs must be at least 1")
    local = local_training_request(
        loaded, job_key, options.overrides, tuning_objective=options.tuning_objective
    )
    workdir = _workdir(loaded, job_key, local, options)
    if is_drivers_request(local.request):
        return _run_drivers(loaded, job_key, local, workdir, options, on_metrics=on_metrics, on_line=on_line)
    port = free_port()
    plans = prepare_hosts(loaded, job_key, local, workdir, options, master_port=port)
    requirements = _ensure_requirements(plans[0].layout.code, loaded.spec.jobs[job_key].source_dir, options)
    store, tracking_env = _tracking(loaded, job_key, options, on_line)
    _announce(plans, local, options, on_line)
    try:
        commands = [
            (plan, command) for plan in plans for command in _commands(plan, workdir, port, tracking_env)
        ]
    except LaunchError as e:
        raise LocalRunError(str(e)) from None
    outcome = Processes([c for _, c in commands]).follow(
        interrupt_at=options.interrupt_at,
        on_line=on_line,
        on_metrics=on_metrics,
        definitions=dict(loaded.spec.jobs[job_key].metric_definitions),
    )
    failure = _conclude_hosts(plans, commands, outcome)
    exit_code = outcome.exit_code
    model_dir = _keep_model(workdir, plans[0].layout, outcome, exit_code)
    return LocalTrainResult(
        workdir=workdir,
        exit_code=exit_code,
        interrupted_at=outcome.interrupted_at,
        metrics=outcome.metrics,
        failure=failure,
        model_dir=model_dir,
        log_files=[c.log for _, c in commands],
        launch=plans[0].launch,
        hosts=[p.layout for p in plans],
        launches=[p.launch for p in plans],
        requirements=requirements,
        tracking=store,
        series=outcome.series,
        addresses=plans[0].addresses,
    )


def _keep_model(workdir: Path, leader: HostLayout, outcome: Outcome, exit_code: int) -> Path:
    """algo-1's model (and the metrics SageMaker read) kept in the run folder when the run succeeded."""
    model_dir = workdir / "model"
    if exit_code == 0 and outcome.interrupted_at is None:
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(leader.model, model_dir)
        (workdir / "metrics.json").write_text(json.dumps(outcome.series.document(), indent=1))
    return model_dir


def _run_drivers(
    loaded: LoadedSpec,
    job_key: str,
    local: LocalRequest,
    workdir: Path,
    options: LocalTrainOptions,
    *,
    on_metrics: Callable[[dict[str, float]], None],
    on_line: Callable[[str, str], None],
) -> LocalTrainResult:
    """The drivers contract: every host runs the request's entrypoint (AWS's sm_train.sh) in its
    sandbox (local/training/drivers_contract.py); the result is read as for the toolkit contract."""
    store, tracking_env = _tracking(loaded, job_key, options, on_line)
    hosts = prepare_driver_hosts(loaded, job_key, local, workdir, options, extra_environment=tracking_env)
    job = loaded.spec.jobs[job_key]
    requirements = _ensure_requirements(hosts[0].layout.data / CODE_CHANNEL, job.source_dir, options)
    command = container_command(local.request)
    driver = driver_script(local.drivers or {}) or "its own command"
    on_line(
        "sagestack",
        f"launch: drivers contract (AWS's sm_train.sh, {driver}) on {len(hosts)} host(s): {shlex.join(command)}",
    )
    if len(hosts) > 1 and driver == "basic_script_driver.py":
        on_line("sagestack", _independent_hosts(len(hosts)))
    for note in _scale_notes(local.request, options):
        on_line("sagestack", note)
    run = run_driver_hosts(
        hosts,
        command,
        workdir,
        interrupt_at=options.interrupt_at,
        on_line=on_line,
        on_metrics=on_metrics,
        definitions=dict(job.metric_definitions),
        writable=[] if store is None else [store.folder],
    )
    failure = conclude_driver_hosts(hosts, run, command)
    exit_code = run.outcome.exit_code
    return LocalTrainResult(
        workdir=workdir,
        exit_code=exit_code,
        interrupted_at=run.outcome.interrupted_at,
        metrics=run.outcome.metrics,
        failure=failure,
        model_dir=_keep_model(workdir, hosts[0].layout, run.outcome, exit_code),
        log_files=run.logs,
        hosts=[h.layout for h in hosts],
        requirements=requirements,
        tracking=store,
        series=run.outcome.series,
    )


def _workdir(loaded: LoadedSpec, job_key: str, local: LocalRequest, options: LocalTrainOptions) -> Path:
    """The run's folder (made, or taken and marked: local/training/rundir.py; with `fresh`, its earlier run's
    entries removed), holding the source archive and the request."""
    default = loaded.root / ".sagestack" / "local" / (loaded.env or "project") / job_key
    workdir = claim(options.workdir or default, fresh=options.fresh, job=job_key, default=default)
    (workdir / "sourcedir.tar.gz").write_bytes(local.archive)
    (workdir / "request.json").write_text(json.dumps(local.request, indent=2, sort_keys=True))
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    return workdir


def _ensure_requirements(code: Path, source_dir: str, options: LocalTrainOptions) -> RequirementsCheck | None:
    """requirements.txt as the container takes it: met here, or installed with --install-requirements,
    or the run is refused with what is missing."""
    requirements = check_requirements(code)
    if requirements is None or requirements.ok:
        return requirements
    if not options.install_requirements:
        problems = [
            *requirements.unmet,
            *(f"{line}: not checked (install it to use it)" for line in requirements.unchecked),
        ]
        raise LocalRunError(
            f"{source_dir}/requirements.txt: the container "
            "installs these with pip before training, and this environment lacks them:\n  "
            + "\n  ".join(problems)
            + "\ninstall them here (pip install -r requirements.txt), or rerun with "
            "--install-requirements to let sagestack run that pip command as the container does"
        )
    installed = install_requirements(code)
    if installed.returncode != 0:
        raise LocalRunError(
            f"pip install -r requirements.txt failed:\n{installed.stdout[-2000:]}{installed.stderr[-2000:]}"
        )
    return requirements


def _tracking(
    loaded: LoadedSpec, job_key: str, options: LocalTrainOptions, on_line: Callable[[str, str], None]
) -> tuple[LocalStore | None, dict[str, str]]:
    """With tracking.mlflow, the local store the run logs to and what tells the processes so."""
    store = local_store(loaded, job_key) if options.tracking else None
    if store is None:
        return None, {}
    try:
        prepare(store)
    except TrackingUnavailable as e:
        on_line("sagestack", f"warning: {e}")
        return None, {}
    on_line("sagestack", f"tracking: MLflow experiment '{store.experiment}' in {store.uri}")
    return store, store.environment(options.tracking_tags)


def _scale_notes(request: dict[str, Any], options: LocalTrainOptions) -> list[str]:
    """Where the simulated cluster is smaller than the cloud's, say so (the world size, the global
    batch and the scaled learning rate follow it)."""

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


def _announce(
    plans: list[SimulatedHost],
    local: LocalRequest,
    options: LocalTrainOptions,
    on_line: Callable[[str, str], None],
) -> None:
    """The leader's launch, where the simulated cluster is smaller than the cloud's, and a warning
    when several hosts would each train a model of their own."""
    leader = plans[0].launch
    on_line("sagestack", f"launch: {leader.describe()}: {' '.join(leader.container_command())}")
    for note in _scale_notes(local.request, options):
        on_line("sagestack", note)
    if len(plans) > 1 and leader.runner == "process":
        on_line("sagestack", _independent_hosts(len(plans)))


def _independent_hosts(hosts: int) -> str:
    return (
        f"warning: {hosts} hosts and no distribution: the script runs {hosts} times independently, "
        "as in the container (algo-1's model is kept); add distribution: to train one model"
    )


def _commands(plan: SimulatedHost, workdir: Path, port: int, tracking_env: dict[str, str]) -> list[Command]:
    """What starts on this host: its runner's command, or each rank mpirun would start (a log each)."""
    launch = plan.launch
    commands = []
    for rank, (argv, extra) in enumerate(launch.local_commands(master_port=port, addresses=plan.addresses)):
        suffix = f"-{rank}" if launch.runner in MPI_RUNNERS and launch.processes_per_host > 1 else ""
        # the parameter server the TensorFlow container starts beside the worker serves until the
        # host's worker is done (the container ends it with the job)
        service = launch.runner == "ps" and rank == 1
        commands.append(
            Command(
                argv=argv,
                cwd=plan.layout.code,
                environment={**plan.environment, **tracking_env, **extra},
                log=workdir / "logs" / f"{plan.layout.name}{'-ps' if service else suffix}.log",
                host=plan.layout.name,
                service=service,
            )
        )
    return commands


def _conclude_hosts(
    plans: list[SimulatedHost], commands: list[tuple[SimulatedHost, Command]], outcome: Outcome
) -> str | None:
    """The toolkit's last word on each host unless the run was interrupted: output/success, or
    output/failure (local/training/failure.py) when the script left none of its own. Returns the first
    host's failure."""
    if outcome.interrupted_at is None:
        for plan in plans:
            own = [(code, c) for code, (o, c) in zip(outcome.codes, commands, strict=True) if o is plan]
            failed = next((code for code, _ in own if code != 0), 0)
            if failed == 0:
                plan.layout.success.write_text("")
            elif not plan.layout.failure.exists():
                text = failure_text(failed, plan.launch.container_command(), [c.log for _, c in own])
                plan.layout.failure.write_text(text)
    for plan in plans:
        if plan.layout.failure.exists():
            return plan.layout.failure.read_text().split("\n\n", 1)[0].strip()
    return None


def curves_title(job: str, hosts: int, procs: int) -> str:
    """'train: 1 host, 1 process' / 'classifier: 2 hosts x 4 processes each'."""
    host_text = f"{hosts} host" + ("s" if hosts != 1 else "")
    proc_text = f"{procs} process" + ("es" if procs != 1 else "")
    return f"{job}: {host_text}, {proc_text}" if hosts == 1 else f"{job}: {host_text} x {proc_text} each"


# a `metrics:` line's values drawn beside the defined metrics (throughput, epoch, lr are not)
_DRAWN_EXTRAS = ("loss", "acc")


def curve_lines(series: MetricSeries) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """What training_curves.png draws: panel ('loss' / 'metric') -> label -> (x, y) points. Every
    defined metric of every host (x: the host's step when every point has one, else seconds from
    the first line), and the `metrics:` lines' losses and accuracies the definitions do not read."""
    hosts = series.hosts()
    points = [p for ps in series.points.values() for p in ps]
    by_step = all(p.step is not None for p in points)
    start = min((p.timestamp for p in points), default=0.0)
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for name in series.definitions:
        for host in hosts:
            data = series.series(name, host)
            if not data:
                continue
            label = name if len(hosts) == 1 else f"{name} ({host})"
            xs = [float(p.step) if by_step and p.step is not None else p.timestamp - start for p in data]
            panel = "loss" if "loss" in name else "metric"
            panels.setdefault(panel, {})[label] = list(zip(xs, (p.value for p in data), strict=True))
    if by_step:
        for row in series.extras:
            for name, value in row.items():
                if name in series.definitions or not any(k in name for k in _DRAWN_EXTRAS):
                    continue
                label = name if len({r["Host"] for r in series.extras}) == 1 else f"{name} ({row['Host']})"
                panel = "loss" if "loss" in name else "metric"
                panels.setdefault(panel, {}).setdefault(label, []).append((float(row["step"]), float(value)))
    return panels


def curves_figure(series: MetricSeries, title: str) -> Any:
    """Every series: the losses in one panel, the other metrics (accuracy) in another, each with a
    legend, against the optimizer step (or the seconds, when the log has no steps). None: no data."""
    panels = curve_lines(series)
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in ("loss", "metric") if n in panels]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4.2), dpi=110, squeeze=False)
    steps = all(p.step is not None for ps in series.points.values() for p in ps)
    for ax, panel in zip(axes[0], names, strict=True):
        for label, xy in panels[panel].items():
            xs, ys = zip(*xy, strict=True)
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
        ax.set_xlabel("optimizer step" if steps else "seconds")
        ax.set_ylabel("loss" if panel == "loss" else "value")
        ax.set_title("losses" if panel == "loss" else "metrics")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_curves(series: MetricSeries, path: Path, title: str) -> Path | None:
    """training_curves.png (curves_figure), or None when the log gave no metric."""
    fig = curves_figure(series, title)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def tensorboard_hint(workdir: Path, cwd: Path | None = None) -> str | None:
    """`tensorboard --logdir <the hosts' folder>` when the run wrote event files (each host's
    output/tensorboard, SageMaker's TensorBoardOutputConfig LocalPath), as it works pasted in `cwd`."""
    import shlex

    hosts = workdir / "hosts"
    if not any(hosts.glob("*/output/tensorboard/**/events.out.tfevents.*")):
        return None
    shown = shlex.quote(str(shown_path(hosts, cwd)))
    tensorboard = program("tensorboard")
    if tensorboard is None:
        return f"event files in {shown} (pip install tensorboard to view them)"
    return f"{tensorboard} --logdir {shown}"
