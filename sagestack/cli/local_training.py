"""`sagestack local train` and `local tune`: a job, or a search over it, on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sagestack.cli.common import (
    EnvOption,
    RootOption,
    SetOption,
    console,
    default_env,
    load_entry,
    parse_overrides,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console
    from rich.progress import Progress

    from sagestack.local.runner import LocalTrainResult
    from sagestack.local.tuning import Trial

app = typer.Typer()


@app.command("train")
def local_train(
    job: Annotated[str, typer.Argument(help="a key of jobs:")],
    env: EnvOption = None,
    hosts: Annotated[int, typer.Option("--hosts", help="simulated hosts")] = 1,
    procs: Annotated[
        int,
        typer.Option(
            "--procs", help="accelerators per simulated host (the container starts one process each)"
        ),
    ] = 1,
    interrupt_at: Annotated[
        int | None,
        typer.Option("--interrupt-at", help="kill every process at this step, as a spot reclaim does"),
    ] = None,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="default: .sagestack/local/<env>/<job>")
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="start over: remove the earlier run's checkpoints, logs and model from the run folder "
            "(only a folder sagestack made for a run: it carries a .sagestack-run marker)",
        ),
    ] = False,
    set_: SetOption = None,
    install_requirements: Annotated[
        bool,
        typer.Option(
            "--install-requirements",
            help="pip install the source dir's requirements.txt into this environment, as the container does",
        ),
    ] = False,
    track: Annotated[
        bool,
        typer.Option(
            "--track/--no-track",
            help="with tracking.mlflow: log the run to the local MLflow store (.sagestack/local/<env>/mlflow.db)",
        ),
    ] = True,
    root: RootOption = Path("."),
) -> None:
    """Train a job here: the cloud's request under an emulation of the SageMaker container contract."""
    from sagestack.local.job import LocalRunError, LocalTrainOptions
    from sagestack.local.processes import Stopped
    from sagestack.local.rundir import RunFolderRefused
    from sagestack.local.runner import run_local_training

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), job, lambda spec: spec.jobs, "job")
    options = LocalTrainOptions(
        hosts=hosts,
        procs=procs,
        interrupt_at=interrupt_at,
        workdir=workdir,
        fresh=fresh,
        overrides=parse_overrides(set_ or []),
        install_requirements=install_requirements,
        tracking=track,
    )
    progress, on_metrics, on_line = _training_progress(out, job, hosts, procs)
    try:
        with progress:
            result = run_local_training(loaded, job, options, on_metrics=on_metrics, on_line=on_line)
    except RunFolderRefused as e:
        err.print(str(e), markup=False)
        raise typer.Exit(2) from None
    except LocalRunError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    except Stopped as e:
        err.print(
            f"{e}: every process of the run is stopped; run the same command again to resume from "
            "the newest checkpoint",
            markup=False,
        )
        raise typer.Exit(e.exit_code) from None
    _report_training(out, err, result, job, f"{job} ({hosts} hosts x {procs})")


def _training_progress(
    out: Console, job: str, hosts: int, procs: int
) -> tuple[Progress, Callable[[dict[str, float]], None], Callable[[str, str], None]]:
    """The progress bar (steps, the latest loss / accuracy / throughput), and the run's callbacks
    that feed it and print the hosts' lines above it."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(f"[bold]{job}[/] {hosts}x{procs}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        console=out,
        transient=False,
    )
    task = progress.add_task("train", total=None, stats="starting")
    stats: dict[str, float] = {}

    def on_metrics(values: dict[str, float]) -> None:
        stats.update(values)
        total = values.get("total_steps")
        if total:
            progress.update(task, total=int(total))
        text = " ".join(
            f"{k}={stats[k]:.4g}" for k in ("train_loss", "val_accuracy", "samples_per_sec") if k in stats
        )
        progress.update(task, completed=int(values.get("step", 0)), stats=text)

    def on_line(host: str, line: str) -> None:
        if line and not line.startswith("metrics:"):
            progress.console.print(f"[dim]{host}[/] {line}", markup=True, highlight=False)

    return progress, on_metrics, on_line


def _report_training(out: Console, err: Console, result: LocalTrainResult, job: str, title: str) -> None:
    """How the run ended: interrupted (exit 3), failed (exit 1), or the model, its curves and runs."""
    from sagestack.local.runner import plot_curves

    if result.interrupted_at is not None:
        out.print(
            f"[yellow]interrupted at step {result.interrupted_at}[/] (every process killed, as a spot reclaim "
            f"does); run the same command again to resume from the newest checkpoint"
        )
        raise typer.Exit(3)
    if not result.succeeded:
        err.print(f"[red]✗ training failed[/] (exit {result.exit_code}): {result.failure or 'see the logs'}")
        err.print(f"  logs: {', '.join(str(p) for p in result.log_files)}", markup=False)
        raise typer.Exit(1)
    png = plot_curves(result.metrics, result.workdir / "training_curves.png", title)
    accuracy = result.last("val_accuracy")
    out.print(f"[green]✓ trained[/] {job}: val_accuracy={accuracy if accuracy is not None else 'n/a'}")
    out.print(f"  model: {result.model_dir}", markup=False)
    if png:
        out.print(f"  curves: {png}", markup=False)
    if result.tracking is not None:
        out.print(f"  runs: {result.tracking.ui_hint()}", markup=False)


@app.command("tune")
def local_tune(
    tuning: Annotated[str, typer.Argument(help="a key of tuning:")],
    env: EnvOption = None,
    max_jobs: Annotated[
        int | None, typer.Option("--max-jobs", help="trials to run (default: the spec's)")
    ] = None,
    max_parallel: Annotated[
        int | None,
        typer.Option("--max-parallel", help="trials at once (default: the spec's, capped by the cores)"),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="a static hyperparameter: KEY=VALUE")
    ] = None,
    root: RootOption = Path("."),
) -> None:
    """Run a tuning job's trials here, to check its metric regex and ranges before the cloud."""
    from rich.table import Table

    from sagestack.local.tuning import plot_objective, run_local_tuning

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), tuning, lambda spec: spec.tuning, "tuning entry")
    spec = loaded.spec.tuning[tuning]
    with out.status(f"[bold]{tuning}[/]: {spec.strategy} search") as status:

        def on_trial(trial: Trial) -> None:
            value = f"{trial.objective:.4f}" if trial.objective is not None else f"failed: {trial.failure}"
            out.print(
                f"  trial {trial.number}: {trial.params} -> {spec.objective.metric}={value}", markup=False
            )
            status.update(f"[bold]{tuning}[/]: {trial.number + 1} trial(s) done")

        trials = run_local_tuning(
            loaded,
            tuning,
            budget=max_jobs,
            parallel=max_parallel,
            overrides=parse_overrides(set_ or []),
            on_trial=on_trial,
        )
    table = Table(
        "rank", "trial", *sorted(spec.ranges), spec.objective.metric, title=f"{tuning}: {spec.objective.type}"
    )
    for rank_, t in enumerate(trials, 1):
        shown = [
            f"{t.params[k]:.4g}" if isinstance(t.params[k], float) else str(t.params[k])
            for k in sorted(spec.ranges)
        ]
        value = f"{t.objective:.4f}" if t.objective is not None else "[red]failed[/]"
        table.add_row(str(rank_) if t.objective is not None else "-", str(t.number), *shown, value)
    out.print(table)
    if not trials or trials[0].objective is None:
        err.print(
            "every trial failed; check the metric regex against the log, e.g. "
            + str(trials[0].workdir if trials else "")
        )
        raise typer.Exit(1)
    png = plot_objective(trials, spec, trials[0].workdir.parent / "objective.png")
    if png:
        out.print(f"  plot: {png}", markup=False)
