"""`sagestack local …`: the spec's work on this machine (no AWS account)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

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

local_app = typer.Typer(help="Run the spec's work on this machine (no AWS account).", no_args_is_help=True)


@local_app.command("train")
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
    fresh: Annotated[bool, typer.Option("--fresh", help="start over: drop earlier checkpoints")] = False,
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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from sagestack.local.runner import LocalRunError, LocalTrainOptions, plot_curves, run_local_training

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
    if result.tracking is not None:
        out.print(f"  runs: {result.tracking.ui_hint()}", markup=False)


@local_app.command("tune")
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


@local_app.command("compile")
def local_compile(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints:")],
    env: EnvOption = None,
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

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
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
    env: EnvOption = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="SageMaker's containers listen on 8080")] = 8080,
    max_batch: Annotated[
        int | None,
        typer.Option(
            "--max-batch",
            help="requests per forward pass (default: the endpoint's batching.max_batch_size, else 1)",
        ),
    ] = None,
    max_delay_ms: Annotated[
        float | None,
        typer.Option(
            "--max-delay-ms",
            help="the longest a batch waits to fill (default: batching.max_delay_ms, else 0)",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="model workers (default: batching.workers, else one per CPU here)"),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option("--model", help="a model.tar.gz or model folder (default: the local compile result)"),
    ] = None,
    predict: Annotated[
        int, typer.Option("--predict", help="serve, send this many digits samples, print the answers, stop")
    ] = 0,
    asynchronous: Annotated[
        bool | None,
        typer.Option(
            "--async/--real-time",
            help="serve InvokeEndpointAsync (POST /endpoints/<name>/async-invocations; default: the spec's async:)",
        ),
    ] = None,
    capture: Annotated[
        bool | None,
        typer.Option(
            "--capture/--no-capture", help="write SageMaker capture files (default: the spec's data_capture:)"
        ),
    ] = None,
    root: RootOption = Path("."),
) -> None:
    """Serve the compiled model with the SageMaker serving contract (GET /ping, POST /invocations;
    InvokeEndpointAsync when async) — what a boto3 sagemaker-runtime client pointed here can call."""
    from sagestack.local.compile import LocalCompileError, compile_locally, local_root
    from sagestack.local.serve import (
        BackgroundServer,
        ServeError,
        ServeOptions,
        batching_options,
        build_server,
        unpack_model,
    )

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
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
    batching = batching_options(loaded.spec.endpoints[endpoint].batching, len(os.sched_getaffinity(0)))
    for key, given in (("max_batch", max_batch), ("max_delay_ms", max_delay_ms), ("workers", workers)):
        if given is not None:
            batching[key] = given
    options = ServeOptions(
        host=host,
        port=port,
        **batching,
        **serving_extras(loaded, endpoint, asynchronous=asynchronous, capture=capture),
    )
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
        f"{options.workers} worker(s), batches of up to {options.max_batch} request(s) waiting at most "
        f"{options.max_delay_ms:g} ms); Ctrl-C stops"
    )
    if options.asynchronous is not None:
        a = options.asynchronous
        out.print(
            f"  async: POST /endpoints/{a.endpoint}/async-invocations; results in {a.local(a.output_uri)}, "
            f"failures in {a.local(a.failure_uri)} (s3://{LOCAL_BUCKET}/… is {a.s3_root / LOCAL_BUCKET})",
            markup=False,
        )
    if options.capture_dir is not None:
        out.print(f"  capturing {options.capture_percent} % to {options.capture_dir}", markup=False)
    server.run()


LOCAL_BUCKET = "sagestack-local"  # what s3://<bucket>/ is called here: .sagestack/local/<env>/s3/<bucket>/


def serving_extras(
    loaded: Any, endpoint: str, *, asynchronous: bool | None, capture: bool | None
) -> dict[str, Any]:
    """ServeOptions' async and capture settings, from the flags or else the spec (in the cloud's layout)."""
    from sagestack.core.layout import S3Layout
    from sagestack.core.names import Names
    from sagestack.local.compile import local_root
    from sagestack.local.serve import AsyncOptions

    spec = loaded.spec.endpoints[endpoint]
    s3 = local_root(loaded) / "s3"
    name = Names(loaded.spec.project, loaded.env or "local").endpoint(endpoint)
    extras: dict[str, Any] = {}
    if asynchronous if asynchronous is not None else spec.async_ is not None:
        prefix = S3Layout(LOCAL_BUCKET).async_prefix(endpoint)
        extras["asynchronous"] = AsyncOptions(
            endpoint=name,
            s3_root=s3,
            output_uri=f"{prefix}/output/",
            failure_uri=f"{prefix}/failures/",
            notifications=local_root(loaded) / "async" / endpoint / "notifications.jsonl",
        )
    if capture if capture is not None else spec.data_capture is not None:
        extras["capture_dir"] = s3 / LOCAL_BUCKET / "capture" / endpoint / name
        extras["capture_percent"] = spec.data_capture.sampling_percent if spec.data_capture else 100
    return extras


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


@local_app.command("transform")
def local_transform(
    transform: Annotated[str, typer.Argument(help="a key of transforms:")],
    env: EnvOption = None,
    input_dir: Annotated[
        Path | None,
        typer.Option(
            "--input", help="a folder of input files (default: .sagestack/local/<env>/transform/<key>/input)"
        ),
    ] = None,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output", help="where the .out files go (default: …/transform/<key>/output)"),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model", help="a model folder or model.tar.gz (default: the source job's local model)"
        ),
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", help="first write this many digits samples as the input (JSON Lines)")
    ] = 0,
    root: RootOption = Path("."),
) -> None:
    """Run a batch transform over a folder with the model's inference.py, as CreateTransformJob would:
    the same split, batching, filters, join and assembly, one .out file per input file."""
    from sagestack.cli.common import UserError
    from sagestack.local.compile import LocalCompileError, local_root, trained_model_dir
    from sagestack.local.serve import ServeError, load_handlers, unpack_model
    from sagestack.local.transform import TransformError, run_transform

    out = console()
    loaded = load_entry(root, default_env(root, env), transform, lambda spec: spec.transforms, "transform")
    spec = loaded.spec.transforms[transform]
    base = local_root(loaded) / "transform" / transform
    input_dir = input_dir or base / "input"
    output_dir = output_dir or base / "output"
    if sample:
        _write_samples(input_dir, sample, spec.content_type)
    if model is None:
        if spec.model is None:
            raise UserError(
                f"transform '{transform}' scores with a pinned model package, which lives in the cloud; "
                "give --model (a model folder or model.tar.gz) to run it here"
            )
        try:
            model = trained_model_dir(loaded, spec.model.from_)
        except LocalCompileError as e:
            raise UserError(str(e)) from None
        if not (model / "model_info.json").exists():
            raise UserError(
                f"no trained model in {model}; run `sagestack local train {spec.model.from_} --env {loaded.env}` first"
            )
    if model.is_file():
        model = unpack_model(model, base / "model")
    try:
        handlers = load_handlers(model)
    except (ServeError, OSError, RuntimeError) as e:
        raise UserError(f"cannot load the model in {model}: {e}") from None
    from rich.progress import Progress

    files = [p for p in input_dir.rglob("*") if p.is_file()] if input_dir.is_dir() else []
    try:
        with Progress(console=out, transient=True) as progress:
            task = progress.add_task(f"transform {transform}", total=len(files) or None)
            result = run_transform(handlers, spec, input_dir, output_dir, lambda _: progress.advance(task))
    except TransformError as e:
        raise UserError(str(e)) from None
    done = [f for f in result.files if not f.error]
    out.print(
        f"[green]✓[/] {transform}: {result.records} record(s) in {len(done)} file(s) → {output_dir}",
        highlight=False,
    )
    for f in done[:5]:
        out.print(
            f"  {f.output} ({f.records} records, {f.requests} request(s))", markup=False, highlight=False
        )
    for f in result.failed:
        out.print(f"[red]✗[/] {f.source}: {f.error}", highlight=False)
    if result.failed:
        raise typer.Exit(1)


def _write_samples(folder: Path, count: int, content_type: str) -> None:
    """Digits samples as transform input: JSON Lines records {"id", "features"} (or CSV rows)."""
    import json

    from sklearn.datasets import load_digits

    x, _ = load_digits(return_X_y=True)
    folder.mkdir(parents=True, exist_ok=True)
    rows = range(min(count, len(x)))
    if content_type.startswith("text/csv"):
        text = "".join(",".join(str(v / 16.0) for v in x[i]) + "\n" for i in rows)
        (folder / "digits.csv").write_text(text)
        return
    lines = [json.dumps({"id": i, "features": (x[i] / 16.0).reshape(1, 8, 8).tolist()}) for i in rows]
    (folder / "digits.jsonl").write_text("\n".join(lines) + "\n")


@local_app.command("monitor")
def local_monitor(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints: (with data_capture)")],
    env: EnvOption = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="the baseline dataset: a CSV / JSON Lines file or folder (default: monitor.baseline_data here)",
        ),
    ] = None,
    sample_baseline: Annotated[
        int,
        typer.Option(
            "--sample-baseline", help="first write this many digits samples as a headerless CSV baseline"
        ),
    ] = 0,
    root: RootOption = Path("."),
) -> None:
    """Model Monitor's data-quality check here: a baseline (statistics.json, constraints.json) from
    the training data, then the requests `local serve` captured checked against it."""
    from datetime import UTC, datetime

    from rich.table import Table

    from sagestack.cli.common import UserError
    from sagestack.local.compile import local_root
    from sagestack.local.monitor import (
        captured_dataset,
        constraints,
        read_dataset,
        statistics,
        violations,
        write_json,
    )

    out = console()
    loaded = load_entry(root, default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
    spec = loaded.spec.endpoints[endpoint]
    monitor = spec.monitor
    dataset_format = monitor.dataset_format if monitor else "csv"
    header = monitor.csv_header if monitor else False
    extras = serving_extras(loaded, endpoint, asynchronous=False, capture=True)
    capture_root = extras["capture_dir"]
    base = local_root(loaded) / "monitoring" / endpoint
    if sample_baseline:
        from sklearn.datasets import load_digits

        x, _ = load_digits(return_X_y=True)
        baseline = base / "baseline-data" / "digits.csv"
        baseline.parent.mkdir(parents=True, exist_ok=True)
        baseline.write_text(
            "".join(",".join(f"{v / 16.0:.4f}" for v in row) + "\n" for row in x[:sample_baseline])
        )
        dataset_format, header = "csv", False
    if baseline is None:
        location = monitor.baseline_data if monitor and monitor.baseline_data else None
        baseline = (
            local_root(loaded) / "s3" / location.removeprefix("s3://") if location else base / "baseline-data"
        )
    if not baseline.exists():
        raise UserError(
            f"no baseline dataset at {baseline}; give --baseline (the training data as CSV or JSON Lines) "
            "or --sample-baseline N"
        )
    data = read_dataset(baseline, dataset_format, header)
    if not data.rows:
        raise UserError(f"the baseline dataset {baseline} holds no records")
    stats = statistics(data)
    limits = constraints(stats)
    write_json(base / "baseline" / "statistics.json", stats)
    write_json(base / "baseline" / "constraints.json", limits)
    out.print(
        f"baseline: {len(data.rows)} records, {len(data.names)} features → {base / 'baseline'}", markup=False
    )
    current = captured_dataset(capture_root)
    if not current.rows:
        raise UserError(
            f"nothing captured under {capture_root}; serve with capture on "
            f"(`sagestack local serve {endpoint} --capture`) and send requests first"
        )
    found = violations(stats, limits, current)
    report = base / "reports" / datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S")
    write_json(report / "statistics.json", statistics(current))
    write_json(report / "constraint_violations.json", {"violations": found})
    out.print(f"captured: {len(current.rows)} records → {report}", markup=False)
    if not found:
        out.print("[green]✓[/] no violations (Completed)")
        return
    table = Table(
        "feature", "check", "description", title=f"{len(found)} violation(s) (CompletedWithViolations)"
    )
    for v in found[:20]:
        table.add_row(v["feature_name"], v["constraint_check_type"], v["description"])
    out.print(table)
    if len(found) > 20:
        out.print(f"… and {len(found) - 20} more in {report / 'constraint_violations.json'}", markup=False)
