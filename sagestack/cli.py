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


def _spec_errors(e: Any) -> typer.Exit:
    """Print every issue of a SpecError; the exit to raise."""
    err = _console(stderr=True)
    for issue in e.issues:
        err.print(issue.format(), markup=False)
    return typer.Exit(EXIT_INVALID_SPEC)


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
        raise _spec_errors(e) from None
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

    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from sagestack import remote
    from sagestack.account import aws_client
    from sagestack.plan.names import Names

    names = Names(spec.project, env)
    name = names.state_machine(job, tuning=job not in spec.jobs)
    sfn = aws_client("stepfunctions", spec.region)
    try:
        arn = remote.state_machine_arn(sfn, name)
        execution = remote.start_execution(sfn, arn)
    except remote.PipelineNotFound:
        err.print(
            f"state machine '{name}' is not deployed in {spec.region}; run `cdk deploy "
            f"{names.stack('training')}` first",
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
    fresh: Annotated[bool, typer.Option("--fresh", help="start over: drop earlier checkpoints")] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="override a hyperparameter: KEY=VALUE")
    ] = None,
    install_requirements: Annotated[
        bool,
        typer.Option(
            "--install-requirements",
            help="pip install the source dir's requirements.txt into this environment, as the container does",
        ),
    ] = False,
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
        install_requirements=install_requirements,
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


@local_app.command("compile")
def local_compile(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment overlay (default: dev)")] = None,
    model_dir: Annotated[
        Path | None,
        typer.Option("--model-dir", help="the trained model (default: the local train/tune result)"),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="default: .sagestack/local/<env>/compiled/<endpoint>/model.tar.gz"),
    ] = None,
    root: RootOption = Path("."),
) -> None:
    """Trace the trained model for its compile target and check it against eager mode (Neo-ready)."""
    from sagestack.local.compile import LocalCompileError, compile_locally

    out, err = _console(), _console(stderr=True)
    loaded = _load_entry(root, _default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
    try:
        with out.status(f"[bold]{endpoint}[/]: tracing and checking"):
            result = compile_locally(loaded, endpoint, model_dir=model_dir, output=output)
    except LocalCompileError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    c = loaded.spec.endpoints[endpoint].compile
    target = (c.target_device or "a target platform") if c else "no compile target (served as trained)"
    out.print(f"[green]✓ compiled[/] {endpoint} for {target}: {result.input_shapes}")
    out.print(
        f"  traced == eager on {result.checks} inputs (max |diff| {result.max_abs_diff:.2g})", markup=False
    )
    out.print(f"  {result.archive} ({result.size / 1024:.0f} KiB, sha256 {result.sha256[:12]})", markup=False)


@local_app.command("serve")
def local_serve(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment overlay (default: dev)")] = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="SageMaker's containers listen on 8080")] = 8080,
    max_batch: Annotated[
        int, typer.Option("--max-batch", help="rows per dynamic batch (1: no batching)")
    ] = 32,
    max_delay_ms: Annotated[
        float, typer.Option("--max-delay-ms", help="wait this long for a batch to fill (0: never wait)")
    ] = 0.0,
    model: Annotated[
        Path | None,
        typer.Option("--model", help="a model.tar.gz or model folder (default: the local compile result)"),
    ] = None,
    predict: Annotated[
        int, typer.Option("--predict", help="serve, send this many digits samples, print the answers, stop")
    ] = 0,
    root: RootOption = Path("."),
) -> None:
    """Serve the compiled model with the SageMaker serving contract (GET /ping, POST /invocations)."""
    from sagestack.local.compile import LocalCompileError, compile_locally, local_root
    from sagestack.local.serve import BackgroundServer, ServeError, ServeOptions, build_server, unpack_model

    out, err = _console(), _console(stderr=True)
    loaded = _load_entry(root, _default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
    archive = model or local_root(loaded) / "compiled" / endpoint / "model.tar.gz"
    if model is None and not archive.exists():
        out.print(f"no compiled model yet: compiling {endpoint} first")
        try:
            archive = compile_locally(loaded, endpoint).archive
        except LocalCompileError as e:
            err.print(str(e), markup=False)
            raise typer.Exit(1) from None
    if not archive.exists():
        err.print(f"{archive} does not exist", markup=False)
        raise typer.Exit(1)
    if archive.is_dir():  # an unpacked model folder (model.pt, code/inference.py), served as it is
        model_dir = archive
    else:
        model_dir = unpack_model(archive, local_root(loaded) / "serve" / endpoint / "model")
    options = ServeOptions(host=host, port=port, max_batch=max_batch, max_delay_ms=max_delay_ms)
    try:
        if predict > 0:
            with BackgroundServer(model_dir, options) as url:
                _print_predictions(out, url, predict)
            return
        server, _ = build_server(model_dir, options)
    except ServeError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    out.print(
        f"serving [bold]{endpoint}[/] on http://{host}:{port} (GET /ping, POST /invocations; "
        f"dynamic batches up to {max_batch}); Ctrl-C stops"
    )
    server.run()


def _print_predictions(out: Any, url: str, count: int) -> None:
    import json
    import urllib.request

    from rich.table import Table
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    x, y = load_digits(return_X_y=True)
    table = Table("sample", "label", "predicted", "probability", title=f"POST {url}/invocations")
    for i in range(count):
        body = json.dumps({"instances": [(x[i] / 16.0).reshape(1, 8, 8).tolist()]}).encode()
        req = urllib.request.Request(
            f"{url}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())["predictions"][0]
        label = answer["label"]
        mark = "[green]✓[/]" if label == y[i] else "[red]✗[/]"
        table.add_row(str(i), str(y[i]), f"{label} {mark}", f"{answer['probabilities'][label]:.3f}")
    out.print(table)


@app.command()
def promote(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints:")],
    from_env: Annotated[str, typer.Option("--from", help="the environment whose model is promoted")],
    to_env: Annotated[str, typer.Option("--to", help="the environment whose config gets the pin")],
    package: Annotated[
        str | None,
        typer.Option(
            "--package", help="a model package ARN (default: --from's pin, else its newest Approved)"
        ),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="do not read the registry (refused where approval is required)")
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Pin a model package in another environment's config (reviewed in git, deployed by cdk deploy)."""
    from sagestack.promote import PromotionError
    from sagestack.promote import promote as do_promote
    from sagestack.spec import SpecError

    out, err = _console(), _console(stderr=True)
    try:
        result = do_promote(root, endpoint, from_env, to_env, package_arn=package, offline=offline)
    except SpecError as e:
        raise _spec_errors(e) from None
    except PromotionError as e:
        err.print(f"[red]✗ not promoted[/]: {e}")
        raise typer.Exit(1) from None
    status = f" ({result.status})" if result.status else " (status not checked: --offline)"
    if not result.changed:
        out.print(f"{to_env} already serves {result.package_arn}{status} at '{endpoint}'; nothing to change")
        return
    out.print(f"[green]✓ promoted[/] {endpoint}: {from_env} → {to_env}{status}")
    out.print(
        f"  {result.config_file}: model_package {result.previous or '(none)'} → {result.package_arn}",
        markup=False,
    )
    out.print(f"  review and commit it, then: cdk deploy '{to_env}/*'", markup=False)


quota_app = typer.Typer(help="SageMaker service quotas of an environment's account.", no_args_is_help=True)
app.add_typer(quota_app, name="quota")

EXIT_QUOTA_SHORT = 3


def _plan_for(root: Path, env: str | None) -> Any:
    """The resolved plan of one environment, or every spec error and exit 2."""
    from sagestack.plan import resolve_environment
    from sagestack.spec import SpecError, load_project

    err = _console(stderr=True)
    name = _default_env(root, env)
    if name is None:
        err.print("no environment: add config/envs/<env>.yaml or pass --env", markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    try:
        return resolve_environment(load_project(root, name))
    except SpecError as e:
        raise _spec_errors(e) from None


@app.command()
def plan(
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    quotas: Annotated[
        str,
        typer.Option("--quotas", help="auto (live with credentials, else snapshot) | live | snapshot | off"),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    root: RootOption = Path("."),
) -> None:
    """Candidates, quotas, cost, sizing and lock state of an environment (exit 3 if a quota is short)."""
    import json

    from sagestack.account import QuotaSourceError, quota_book
    from sagestack.report import as_json as plan_json
    from sagestack.report import make_plan, render

    err = _console(stderr=True)
    if quotas not in ("auto", "live", "snapshot", "off"):
        err.print(f"--quotas {quotas}: use auto, live, snapshot or off", markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    resolved = _plan_for(root, env)
    try:
        book = quota_book(root, resolved, quotas)  # type: ignore[arg-type]
    except QuotaSourceError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    result = make_plan(root, resolved, book)
    if as_json:
        typer.echo(json.dumps(plan_json(result), indent=1))
    else:
        render(result, _console())
    raise typer.Exit(result.exit_code)


@app.command("render")
def render_requests(
    name: Annotated[str, typer.Argument(help="a key of jobs:, tuning: or endpoints:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    candidate: Annotated[
        int | None, typer.Option("--candidate", "-c", help="only this instance candidate (0 = first)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document")] = False,
    root: RootOption = Path("."),
) -> None:
    """Print the exact request(s) the pipeline sends, validated against botocore's SageMaker model;
    values only a deployment knows are stand-ins, named as such."""
    import json

    from sagestack.catalog.suggest import did_you_mean
    from sagestack.plan.requests import render_environment, requests_named

    resolved = _plan_for(root, env)
    out = render_environment(resolved, root)
    try:
        shown = requests_named(resolved, out, name, candidate)
    except KeyError:
        known = [*out.jobs, *out.tuning, *out.endpoints]
        _console(stderr=True).print(
            f"no job, search or endpoint '{name}'{did_you_mean(name, known)} (defined: {', '.join(known) or 'none'})",
            markup=False,
        )
        raise typer.Exit(EXIT_INVALID_SPEC) from None
    except IndexError as e:
        _console(stderr=True).print(str(e).strip("'\""), markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC) from None
    if as_json:
        document = {
            "environment": resolved.env,
            "requests": [
                {"operation": s.operation, "label": s.label, "request": s.request, "stand_ins": s.stand_ins}
                for s in shown
            ],
        }
        typer.echo(json.dumps(document, indent=1, sort_keys=True))
        return
    for s in shown:
        typer.echo(f"# {s.operation} ({s.label}), environment {resolved.env}")
        for marker, what in s.stand_ins.items():
            typer.echo(f"#   stand-in {marker!r}: {what}")
        typer.echo(json.dumps(s.request, indent=1, sort_keys=True))


@app.command()
def synth(
    context: Annotated[
        list[str] | None, typer.Option("--context", "-c", help="CDK context KEY=VALUE (as cdk synth -c)")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="cloud assembly folder")] = Path("cdk.out"),
    root: RootOption = Path("."),
) -> None:
    """Synthesize every environment as `cdk synth` does, keeping the app's exit code: 2 invalid spec,
    3 quota short, 4 lock mismatch, 1 unacknowledged cdk-nag finding (`cdk synth` exits 1 for all)."""
    import json
    import subprocess

    pairs: dict[str, str] = {}
    for item in context or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _console(stderr=True).print(f"--context {item!r}: use KEY=VALUE", markup=False)
            raise typer.Exit(EXIT_INVALID_SPEC)
        pairs[key] = value
    app_file = root.resolve() / "app.py"
    if not app_file.exists():
        _console(stderr=True).print(f"no {app_file}: run from the project root or pass --root", markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    outdir = output if output.is_absolute() else root.resolve() / output
    # How the CDK CLI runs an app: the output folder and the -c context in the environment.
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(pairs)}
    code = subprocess.call([sys.executable, str(app_file)], cwd=root.resolve(), env=env)
    if code == 0:
        stacks = sorted(p.name for p in outdir.rglob("*.template.json"))
        _console().print(f"[green]✓[/] synthesized {len(stacks)} stack(s) into {outdir}")
    raise typer.Exit(code)


@quota_app.command("snapshot")
def quota_snapshot(
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    root: RootOption = Path("."),
) -> None:
    """Save the account's SageMaker quotas and current usage to config/envs/<env>.quotas.json."""
    from rich.table import Table

    from sagestack.account import take_snapshot
    from sagestack.catalog.quotas import quota_name, training_usage

    out, err = _console(), _console(stderr=True)
    resolved = _plan_for(root, env)
    try:
        path, document = take_snapshot(root, resolved.env, resolved.region)
    except Exception as e:
        err.print(
            f"cannot read the account's quotas in {resolved.region}: {type(e).__name__}: {e}", markup=False
        )
        err.print("check the credentials (`sagestack check`) and servicequotas:ListServiceQuotas permission")
        raise typer.Exit(1) from None
    if resolved.account and document.get("account") and document["account"] != resolved.account:
        err.print(
            f"[yellow]![/] the credentials are for account {document['account']}, but '{resolved.env}' deploys to "
            f"{resolved.account}"
        )
    values = {q["QuotaName"]: q for q in document["quotas"]}
    wanted = sorted(
        {
            quota_name(t, training_usage(j.use_spot_instances))
            for j in resolved.spec.jobs.values()
            for t in j.instance_type
        }
        | {
            quota_name(e.instance_type, "endpoint")
            for e in resolved.spec.endpoints.values()
            if e.instance_type
        }
    )
    table = Table("quota", "code", "value", "in use", title=f"{resolved.env}: quotas the spec uses")
    for name in wanted:
        q = values.get(name)
        table.add_row(
            name,
            q["QuotaCode"] if q else "-",
            f"{q['Value']:g}" if q else "not listed",
            f"{document['usage'].get(name, 0):g}",
        )
    out.print(table)
    out.print(f"[green]✓[/] {len(document['quotas'])} quotas saved to {path}", highlight=False)


@app.command()
def lock(
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    digests: Annotated[
        bool, typer.Option("--digests", help="ask ECR for each image's digest (needs credentials)")
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Write config/envs/<env>.lock.json: job hashes, images, request hashes, catalog versions."""
    from sagestack.plan.lock import diff, lock_document, read_lock, write_lock
    from sagestack.plan.requests import render_environment

    out = _console()
    resolved = _plan_for(root, env)
    requests = render_environment(resolved, root)
    found: dict[str, str | None] = {}
    if digests:
        from sagestack.account import image_digest

        for images in requests.images.values():
            for uri in images.values():
                if uri not in found and not uri.startswith("dockerfile:"):
                    found[uri] = image_digest(uri)
        missing = [u for u, d in found.items() if d is None]
        if missing:
            out.print(f"[yellow]![/] ECR did not tell the digest of: {', '.join(missing)}", highlight=False)
    document = lock_document(resolved, requests, found)
    previous = read_lock(root, resolved.env)
    path = write_lock(root, resolved.env, document)
    changes = diff(previous, document) if previous else []
    if previous is None:
        out.print(f"[green]✓[/] wrote {path}", highlight=False)
    elif changes:
        out.print(f"[green]✓[/] updated {path}:", highlight=False)
        for c in changes:
            out.print(f"  {c}", markup=False)
    else:
        out.print(f"{path} is up to date", highlight=False)


@app.command()
def check(
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    root: RootOption = Path("."),
) -> None:
    """Credentials, region, CDK bootstrap, quotas for the plan, ECR access: one line each."""
    from sagestack.checks import run_checks

    out = _console()
    resolved = _plan_for(root, env)
    failed = False
    for c in run_checks(root, resolved):
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]-[/]"}[c.ok]
        out.print(f"{mark} {c.name}: {c.detail}", highlight=False)
        failed = failed or c.ok is False
    raise typer.Exit(1 if failed else 0)


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
        # A spec problem found by any command: the report, exit 2. (A SpecError can only come from
        # a loaded sagestack.spec, so it is looked up there: importing it here would slow --help.)
        spec_errors = sys.modules.get("sagestack.spec.errors")
        if spec_errors is not None and isinstance(e, spec_errors.SpecError):
            for issue in e.issues:
                print(issue.format(), file=sys.stderr)
            sys.exit(EXIT_INVALID_SPEC)
        if os.environ.get("SAGESTACK_DEBUG"):
            raise
        print(f"sagestack: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        print("Run again with SAGESTACK_DEBUG=1 for the traceback, and report it.", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
