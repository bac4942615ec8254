"""The `sagestack` command: a thin layer over the library. Heavy modules (aws_cdk, torch, boto3,
sagemaker.core) are imported inside the commands that need them, so `sagestack --help` is fast."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="sagestack",
    help="Declarative deep-learning infrastructure on Amazon SageMaker, runnable locally.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_INVALID_SPEC = 2

RootOption = Annotated[
    Path, typer.Option("--root", help="project root (holds config/sagestack.yaml)", show_default=False)
]


def _console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _load_entry(
    root: Path, env: str | None, name: str, entries: Callable[[Any], Iterable[str]], what: str
) -> Any:
    """The spec as `env` sees it, with `name` among `entries(spec)`; else every problem, and exit 2."""
    from sagestack.catalog.suggest import did_you_mean
    from sagestack.spec import SpecError, load_project

    err = _console(stderr=True)
    try:
        loaded = load_project(root, env)
    except SpecError as e:
        for issue in e.issues:
            err.print(issue.format(), markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC) from None
    known = list(entries(loaded.spec))
    if name not in known:
        err.print(
            f"no {what} '{name}'{did_you_mean(name, known)} (defined: {', '.join(known) or 'none'})",
            markup=False,
        )
        raise typer.Exit(EXIT_INVALID_SPEC)
    return loaded


@app.command()
def validate(
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="environment(s) to check; default: every one")
    ] = None,
    root: RootOption = Path("."),
) -> None:
    """Check the spec (and its environment overlays): every error with file:line:column."""
    from sagestack.spec import SpecError, list_environments, load_project

    out, err = _console(), _console(stderr=True)
    names: list[str | None] = list(env or list_environments(root)) or [None]
    failed = False
    for name in names:
        label = name or "project"
        try:
            loaded = load_project(root, name)
        except SpecError as e:
            failed = True
            err.print(f"[bold red]✗ {label}[/]: {len(e.errors)} error(s)")
            for issue in e.issues:
                err.print(f"  {issue.format()}", markup=False)
            continue
        for w in loaded.warnings:
            err.print(f"  {w.format()}", markup=False)
        s = loaded.spec
        out.print(
            f"[green]✓ {label}[/]: {s.project} in {s.region}"
            f"{' account ' + s.account if s.account else ' (account-agnostic)'}; "
            f"{len(s.images)} image(s), {len(s.jobs)} job(s), {len(s.tuning)} tuning, {len(s.endpoints)} endpoint(s)"
        )
    if failed:
        raise typer.Exit(EXIT_INVALID_SPEC)


@app.command()
def schema(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="folder to write the JSON Schemas into")
    ] = Path("schema"),
    check: Annotated[bool, typer.Option("--check", help="exit 1 if the files are out of date")] = False,
) -> None:
    """Write the spec's JSON Schemas (project file and environment overlays) for editors."""
    from sagestack.spec.schema import schema_texts

    stale = []
    for name, text in schema_texts().items():
        path = output / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        typer.echo(f"wrote {path}")
    if stale:
        typer.echo(f"out of date: {', '.join(stale)}; run `sagestack schema`", err=True)
        raise typer.Exit(1)


@app.command()
def run(
    job: Annotated[str, typer.Argument(help="a key of jobs: or tuning:")],
    env: Annotated[str, typer.Option("--env", "-e", help="environment to run in")],
    root: RootOption = Path("."),
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow the execution to its end")] = True,
    poll: Annotated[float, typer.Option("--poll", help="seconds between status checks")] = 5.0,
    timeout: Annotated[float | None, typer.Option("--timeout", help="stop following after N seconds")] = None,
) -> None:
    """Start a job's (or tuning entry's) deployed pipeline and follow it (boto3; AWS_ENDPOINT_URL is honoured)."""
    err = _console(stderr=True)
    loaded = _load_entry(root, env, job, lambda spec: [*spec.jobs, *spec.tuning], "job or tuning entry")
    spec = loaded.spec

    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from sagestack import remote

    name = f"{spec.project}-{env}-{job}" if job in spec.jobs else f"{spec.project}-{env}-tune-{job}"
    sfn = boto3.client("stepfunctions", region_name=spec.region)
    try:
        arn = remote.state_machine_arn(sfn, name)
        execution = remote.start_execution(sfn, arn)
    except remote.PipelineNotFound:
        err.print(
            f"state machine '{name}' is not deployed in {spec.region}; run `cdk deploy "
            f"{spec.project}-{env}-training` first",
            markup=False,
        )
        raise typer.Exit(1) from None
    except NoCredentialsError:
        err.print("no AWS credentials: configure a profile (aws configure) or set AWS_PROFILE", markup=False)
        raise typer.Exit(1) from None
    except (ClientError, BotoCoreError) as e:
        err.print(f"could not start '{name}': {e}", markup=False)
        raise typer.Exit(1) from None
    out = _console()
    out.print(f"started {execution}", markup=False)
    if not wait:
        return
    with out.status(f"[bold]{name}[/]: starting") as status:

        def on_state(state: str) -> None:
            out.print(f"  → {state}", markup=False)
            status.update(f"[bold]{name}[/]: {state}")

        result = remote.follow(sfn, execution, poll_seconds=poll, timeout_seconds=timeout, on_state=on_state)
    if result.status == "SUCCEEDED":
        out.print(f"[green]✓ succeeded[/]: {result.output}")
        return
    if result.status == "RUNNING":
        out.print(f"still running after {timeout} s: {execution}", markup=False)
        return
    err.print(f"[red]✗ {result.status.lower()}[/]: {result.error or ''}", highlight=False)
    if result.cause:
        err.print(f"  {result.cause}", markup=False)
    raise typer.Exit(1)


local_app = typer.Typer(help="Run the spec's work on this machine (no AWS account).", no_args_is_help=True)
app.add_typer(local_app, name="local")


def _parse_overrides(values: list[str]) -> dict[str, object]:
    import json

    out: dict[str, object] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _default_env(root: Path, env: str | None) -> str | None:
    from sagestack.spec import list_environments

    if env is not None:
        return env
    envs = list_environments(root)
    return "dev" if "dev" in envs else (envs[0] if envs else None)


@local_app.command("train")
def local_train(
    job: Annotated[str, typer.Argument(help="a key of jobs:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment overlay (default: dev)")] = None,
    hosts: Annotated[int, typer.Option("--hosts", help="simulated hosts")] = 1,
    procs: Annotated[int, typer.Option("--procs", help="processes per host")] = 1,
    interrupt_at: Annotated[
        int | None,
        typer.Option("--interrupt-at", help="kill every process at this step, as a spot reclaim does"),
    ] = None,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="default: .sagestack/local/<env>/<job>")
    ] = None,
    fresh: Annotated[bool, typer.Option("--fresh", help="start over: drop earlier checkpoints")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="override a hyperparameter: KEY=VALUE")
    ] = None,
    root: RootOption = Path("."),
) -> None:
    """Train a job here: the cloud's request under an emulation of the SageMaker container contract."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sagestack.local.runner import LocalRunError, LocalTrainOptions, plot_curves, run_local_training

    out, err = _console(), _console(stderr=True)
    loaded = _load_entry(root, _default_env(root, env), job, lambda spec: spec.jobs, "job")
    options = LocalTrainOptions(
        hosts=hosts,
        procs=procs,
        interrupt_at=interrupt_at,
        workdir=workdir,
        fresh=fresh,
        overrides=_parse_overrides(set_ or []),
    )
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

    try:
        with progress:
            result = run_local_training(loaded, job, options, on_metrics=on_metrics, on_line=on_line)
    except LocalRunError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
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
    png = plot_curves(
        result.metrics, result.workdir / "training_curves.png", f"{job} ({hosts} hosts x {procs})"
    )
    accuracy = result.last("val_accuracy")
    out.print(f"[green]✓ trained[/] {job}: val_accuracy={accuracy if accuracy is not None else 'n/a'}")
    out.print(f"  model: {result.model_dir}", markup=False)
    if png:
        out.print(f"  curves: {png}", markup=False)


@local_app.command("tune")
def local_tune(
    tuning: Annotated[str, typer.Argument(help="a key of tuning:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment overlay (default: dev)")] = None,
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

    out, err = _console(), _console(stderr=True)
    loaded = _load_entry(root, _default_env(root, env), tuning, lambda spec: spec.tuning, "tuning entry")
    spec = loaded.spec.tuning[tuning]
    with out.status(f"[bold]{tuning}[/]: {spec.strategy} search") as status:

        def on_trial(trial) -> None:  # type: ignore[no-untyped-def]
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
            overrides=_parse_overrides(set_ or []),
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


@app.command()
def rules() -> None:
    """List the spec rules sagestack checks."""
    from rich.table import Table

    from sagestack.spec.rules import RULES

    table = Table("rule", "severity", "checks")
    for r in RULES.values():
        table.add_row(r.id, r.severity, r.summary)
    _console().print(table)


def main() -> None:
    """Entry point: never a traceback for a user's mistake; SAGESTACK_DEBUG=1 shows one for ours."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:
        if os.environ.get("SAGESTACK_DEBUG"):
            raise
        print(f"sagestack: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        print("Run again with SAGESTACK_DEBUG=1 for the traceback, and report it.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
