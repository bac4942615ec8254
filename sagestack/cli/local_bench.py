"""`sagestack local bench`: an endpoint's local configurations swept against its `slo:` — the
latency-throughput table, the verdict, and the chart (a PNG, and as text)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sagestack.cli.common import EnvOption, JsonOption, RootOption, console, default_env, load_entry

if TYPE_CHECKING:
    from sagestack.local.bench.report import Sweep

app = typer.Typer()

DEFAULT_TOKENS = (128, 32)  # an LLM without slo.tokens: a prompt and answer of these lengths


def _clients(value: str) -> list[int]:
    try:
        found = sorted({int(v) for v in value.split(",") if v.strip()})
    except ValueError:
        raise typer.BadParameter(f"'{value}': give client counts as numbers, e.g. 1,4,16") from None
    if not found or found[0] < 1:
        raise typer.BadParameter(f"'{value}': give client counts of at least 1, e.g. 1,4,16")
    return found


@app.command("bench")
def local_bench(
    endpoint: Annotated[str, typer.Argument(help="a key of endpoints: (or ENDPOINT/COMPONENT of an LLM)")],
    env: EnvOption = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="two configurations, two loads, few requests (seconds)")
    ] = False,
    clients: Annotated[
        str | None,
        typer.Option("--clients", help="concurrent clients per configuration, e.g. 1,4,16 (LLMs: users)"),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", min=1, help="requests per load point (LLMs: per user)")
    ] = None,
    payload: Annotated[
        Path | None,
        typer.Option(
            "--payload", help="request bodies to send, one JSON a line (default: of the model's shape)"
        ),
    ] = None,
    model: Annotated[
        Path | None, typer.Option("--model", help="a model.tar.gz or folder (default: the local compile)")
    ] = None,
    chart: Annotated[
        Path | None,
        typer.Option("--chart", help="the PNG (default: .sagestack/local/<env>/bench/<endpoint>.png)"),
    ] = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Sweep the endpoint's local configurations (batch size and delay, workers; an LLM's batch size
    and users) against the workload its slo: describes; print the latency-throughput table, which
    configurations meet the target, and the chart (written as a PNG too)."""
    from sagestack.cli.local_llm import is_llm, llm_keys
    from sagestack.local.bench.report import targets_of
    from sagestack.local.serving.compile import local_root

    err = console(stderr=True)
    env = default_env(root, env)
    loaded = load_entry(root, env, endpoint, lambda spec: [*spec.endpoints, *llm_keys(spec)], "endpoint")
    ep = loaded.spec.endpoints[endpoint.partition("/")[0]]
    targets = targets_of(ep.slo)
    png = chart or local_root(loaded) / "bench" / f"{endpoint.replace('/', '-')}.png"
    loads = _clients(clients) if clients else None
    llm = is_llm(loaded.spec, endpoint)
    if llm:
        points, note = _llm(err, loaded, endpoint, ep, targets, loads, requests, quick)
    else:
        points, note = _classic(err, loaded, endpoint, ep, targets, loads, requests, quick, payload, model)
    from sagestack.local.bench.chart import draw
    from sagestack.local.bench.report import Sweep

    sweep = Sweep(endpoint, env, llm, targets, note, str(png), tuple(points))
    draw(sweep, png)
    if as_json:
        typer.echo(json.dumps(sweep.to_json(), indent=1))
        return
    show(console(), sweep)


def _progress(err: Any, what: str) -> Any:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    progress.start()
    task = progress.add_task(what, total=None)

    def step(point: Any, done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)
        if not err.is_terminal:  # a pipe gets one whole line a point
            err.print(
                f"measured {done}/{total}: {point.configuration}, {point.clients} client(s): "
                f"{point.requests_per_second:.1f} req/s",
                markup=False,
            )

    return progress, step


def _classic(
    err: Any,
    loaded: Any,
    endpoint: str,
    ep: Any,
    targets: dict[str, float],
    loads: list[int] | None,
    requests: int | None,
    quick: bool,
    payload: Path | None,
    model: Path | None,
) -> tuple[list[Any], str]:
    from sagestack.cli.local_serving import served_model
    from sagestack.local.bench import classic
    from sagestack.local.errors import LocalRunError

    try:
        model_dir = served_model(err, err, loaded, endpoint, model)
        # without compile:, the shape the model states (model_info.json), as `local compile` takes it
        input_shapes = ep.compile.input_shapes if ep.compile is not None else _stated_shapes(model_dir)
        if payload is not None:
            bodies, note = classic.payload_file(payload), f"{payload}'s requests"
        elif input_shapes is not None:
            bodies = classic.generated_payloads(input_shapes)
            shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in input_shapes.items())
            note = f"generated requests of the model's input shape ({shapes})"
        else:
            raise LocalRunError(
                f"'{endpoint}' states no input shape (compile.input_shapes, or input_shape in the "
                "model's model_info.json): give the requests to send with --payload FILE (one JSON "
                "request body a line)"
            )
        configs = classic.configurations(ep.batching, len(os.sched_getaffinity(0)), quick=quick)
        progress, step = _progress(err, f"{endpoint}: {len(configs)} configurations")
        with progress:
            points = classic.sweep(
                model_dir,
                bodies,
                configs,
                loads or ([1, 8] if quick else [1, 4, 16, 32]),
                requests or (60 if quick else 1000),
                targets,
                step,
            )
    except LocalRunError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    return points, note


def _stated_shapes(model_dir: Path) -> dict[str, list[int]] | None:
    """The input shape the model folder states: model_info.json's input_shapes (a local compile
    writes them) or input_shape (training writes it), as one input of batch 1; None without."""
    try:
        info = json.loads((model_dir / "model_info.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("input_shapes"), dict):
        return dict(info["input_shapes"])
    shape = info.get("input_shape")
    if isinstance(shape, list) and shape and all(isinstance(n, int) for n in shape):
        return {"input0": [1, *shape[1:]]}
    return None


def _llm(
    err: Any,
    loaded: Any,
    endpoint: str,
    ep: Any,
    targets: dict[str, float],
    loads: list[int] | None,
    requests: int | None,
    quick: bool,
) -> tuple[list[Any], str]:
    from sagestack.local.bench import llm as bench_llm
    from sagestack.local.llm.endpoint import LlmServeError, ensure_weights, local_llm

    try:
        served = local_llm(loaded, endpoint)
    except LlmServeError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(2) from None
    progress, step = _progress(err, f"{endpoint}: making local weights")
    with progress:
        if ensure_weights(served):
            err.print(f"made local weights for {endpoint} in {served.weights}", markup=False)
        tokens = ep.slo.tokens if ep.slo is not None and ep.slo.tokens is not None else None
        asked = (tokens.input, tokens.output) if tokens else DEFAULT_TOKENS
        batches = bench_llm.configurations(served.spec.max_batch_size, quick=quick)
        points, shape = bench_llm.sweep(
            served,
            batches,
            loads or ([1, 4] if quick else [1, 2, 4, 8]),
            requests or (1 if quick else 3),
            asked,
            targets,
            quick=quick,
            on_point=step,
        )
    note = f"prompts of {shape.input} tokens answered in up to {shape.output}"
    if shape.scaled:
        note += (
            f" (the slo's {asked[0]} and {asked[1]}, scaled to the local model's context)" if tokens else ""
        )
    if not tokens:
        note += " (the slo states no tokens: a default profile)"
    return points, note


def show(out: Any, sweep: Sweep) -> None:
    """The run as the command prints it: the workload and target, the table, the best point that
    meets the target, the text chart and where the PNG is (the docs print recorded runs so)."""
    import textwrap

    from rich.table import Table

    from sagestack.local.bench.chart import panels, text_chart
    from sagestack.local.bench.report import best

    points, targets, llm = list(sweep.points), sweep.targets, sweep.llm
    wanted = ", ".join(f"{k} {v:g}" for k, v in targets.items()) or "none (no slo:)"
    for line in textwrap.wrap(f"{sweep.endpoint}: {sweep.workload}; target: {wanted}", min(80, out.width)):
        out.print(line, markup=False, highlight=False)
    short = {"p95_ms": "p95", "p99_ms": "p99", "requests_per_second": "req/s", "ttft_ms": "ttft"}
    short["tokens_per_second"] = "tok/s"
    table = Table("configuration", "users" if llm else "clients", "req/s")
    latencies = ("p95",) if llm else ("p50", "p95", "p99")
    for name in latencies:
        table.add_column(f"{name} ms", justify="right")
    if llm:
        table.add_column("ttft ms", justify="right")
        table.add_column("tok/s user", justify="right")
    table.add_column("meets")
    for p in points:
        row = [p.configuration, str(p.clients), f"{p.requests_per_second:.1f}"]
        row += [f"{getattr(p, f'{name}_ms'):.1f}" for name in latencies]
        if llm:
            row += [f"{p.ttft_p95_ms:.0f}", f"{p.tokens_per_second:.0f}"]
        missed = ", ".join(short[m] for m in p.misses)
        verdict = "yes" if p.meets else f"no: {missed}" if missed else f"no: {p.failed} failed"
        row.append(verdict if targets or p.failed else "-")
        table.add_row(*row)
    out.print(table)
    chosen = best(points)
    if targets and chosen is not None:
        out.print(
            f"best: {chosen.configuration} with {chosen.clients} client(s), "
            f"{chosen.requests_per_second:.1f} req/s within the target",
            markup=False,
        )
    elif targets:
        out.print("no configuration meets the target on this machine", markup=False)
    for panel in panels(targets, llm):
        out.print()
        for line in text_chart(points, panel, width=min(80, out.width)):
            out.print(line, markup=False, highlight=False)
    out.print(f"chart: {sweep.chart}", markup=False)
