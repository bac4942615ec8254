"""`sagestack local train` and `local tune`: a job, or a search over it, on this machine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sagestack.cli.common import (
    EnvOption,
    JsonOption,
    RootOption,
    SetOption,
    console,
    default_env,
    load_entry,
    parse_overrides,
    print_lines,
)
from sagestack.cli.training_progress import training_progress
from sagestack.core.catalog.suggest import did_you_mean

if TYPE_CHECKING:
    from collections.abc import Iterable

    from rich.console import Console

    from sagestack.local.training.train import LocalTrainResult
    from sagestack.local.training.tuning import Trial
    from sagestack.tuning.models import TuningSpec

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
    from sagestack.local.errors import LocalRunError
    from sagestack.local.training.job import LocalTrainOptions
    from sagestack.local.training.processes import Stopped
    from sagestack.local.training.rundir import RunFolderRefused
    from sagestack.local.training.train import curves_title, run_local_training

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
    definitions = list(loaded.spec.jobs[job].metric_definitions)
    for warning in undefined_keys(options.overrides, loaded.spec.jobs[job].hyperparameters):
        err.print(f"warning: {warning}", markup=False, soft_wrap=not err.is_terminal)
    progress, on_metrics, on_line = training_progress(out, job, hosts, procs, definitions)
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
    _report_training(out, err, result, job, curves_title(job, hosts, procs))


def undefined_keys(overrides: dict[str, object], defined: Iterable[str]) -> list[str]:
    """A warning for each --set key the job does not define (a typo, most often: the script gets
    it as an argument of its own, beside the defined one's value)."""
    names = sorted(set(defined))
    warnings = []
    for key in overrides:
        if key in names:
            continue
        hint = did_you_mean(key, names).removeprefix("; ")
        warnings.append(
            f"--set {key}: the job defines no hyperparameter '{key}'"
            + (f" ({hint})" if hint else "")
            + f"; it is passed to the script as --{key}"
        )
    return warnings


def shown(path: Path) -> str:
    """A path as short as it can be shown: relative to here when it lies below."""
    here, full = Path.cwd().resolve(), path.resolve()
    return str(full.relative_to(here)) if full.is_relative_to(here) else str(path)


def final_metrics_text(result: LocalTrainResult, defined: bool) -> str:
    """The last value of each metric definition (DescribeTrainingJob's FinalMetricDataList)."""
    final = result.series.final()
    if final:
        return " ".join(f"{m['MetricName']}={m['Value']:.4g}" for m in final)
    if not defined:
        return "(the job has no metric_definitions)"
    return "(no line of the log matched the job's metric_definitions)"


def _report_training(out: Console, err: Console, result: LocalTrainResult, job: str, title: str) -> None:
    """How the run ended: interrupted (exit 3), failed (exit 1), or the model, its curves and runs."""
    from sagestack.local.training.train import plot_curves, tensorboard_hint

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
    png = plot_curves(result.series, result.workdir / "training_curves.png", title)
    final = final_metrics_text(result, bool(result.series.definitions))
    out.print(f"[green]✓ trained[/] {job}: {final}", highlight=False)
    lines = [f"  model: {shown(result.model_dir)}", f"  metrics: {shown(result.workdir / 'metrics.json')}"]
    if png:
        lines.append(f"  curves: {shown(png)}")
    board = tensorboard_hint(result.workdir)
    if board:
        lines.append(f"  tensorboard: {board}")
    if result.tracking is not None:
        lines.append(f"  runs: {result.tracking.ui_hint()}")
    for (
        line
    ) in lines:  # paths and commands to copy: in a pipe never folded, in a terminal wrapped between words
        out.print(line, markup=False, highlight=False, soft_wrap=not out.is_terminal)


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
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Run a tuning job's trials here, to check its metric regex and ranges before the cloud."""
    from sagestack.local.training.tuning import plot_objective, run_local_tuning

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), tuning, lambda spec: spec.tuning, "tuning entry")
    spec = loaded.spec.tuning[tuning]
    overrides = parse_overrides(set_ or [])
    defined = [*loaded.spec.jobs[spec.job].hyperparameters, *spec.static_hyperparameters, *spec.ranges]
    for warning in undefined_keys(overrides, defined):
        err.print(f"warning: {warning}", markup=False, soft_wrap=not err.is_terminal)
    # under --json, stdout holds the one document: the trials' progress goes to stderr
    talk = err if as_json else out
    with talk.status(f"[bold]{tuning}[/]: {spec.strategy} search") as status:

        def on_trial(trial: Trial) -> None:
            value = f"{trial.objective:.4f}" if trial.objective is not None else f"failed: {trial.failure}"
            talk.print(
                f"  trial {trial.number}: {trial.params} -> {spec.objective.metric}={value}", markup=False
            )
            status.update(f"[bold]{tuning}[/]: {trial.number + 1} trial(s) done")

        trials = run_local_tuning(
            loaded, tuning, budget=max_jobs, parallel=max_parallel, overrides=overrides, on_trial=on_trial
        )
    failed = not trials or trials[0].objective is None
    png = None if failed else plot_objective(trials, spec, trials[0].workdir.parent / "objective.png")
    if as_json:
        typer.echo(json.dumps(tuning_document(tuning, spec, trials, png), indent=2, default=str))
        raise typer.Exit(1 if failed else 0)
    _tuning_table(out, tuning, spec, trials)
    if failed:
        err.print(
            "every trial failed; check the metric regex against the log, e.g. "
            + str(trials[0].workdir if trials else "")
        )
        raise typer.Exit(1)
    if png:
        print_lines(out, f"  plot: {shown(png)}")


def tuning_document(key: str, spec: TuningSpec, trials: list[Trial], plot: Path | None) -> dict[str, Any]:
    """`local tune --json`: the trials ranked (best first, failed last), each with its
    hyperparameters, objective, failure and run folder."""
    return {
        "tuning": key,
        "strategy": spec.strategy,
        "objective": {"metric": spec.objective.metric, "type": spec.objective.type},
        "trials": [
            {
                "rank": rank_ if t.objective is not None else None,
                "trial": t.number,
                "params": t.params,
                "objective": t.objective,
                "status": t.status,
                "failure": t.failure,
                "workdir": str(t.workdir),
            }
            for rank_, t in enumerate(trials, 1)
        ],
        "plot": str(plot) if plot else None,
    }


def _tuning_table(out: Console, tuning: str, spec: TuningSpec, trials: list[Trial]) -> None:
    from rich.table import Table

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
