"""`sagestack local compile` and `local serve`: the trained model made Neo-ready, then served with
the SageMaker serving contract on this machine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sagestack.cli.common import EnvOption, RootOption, console, default_env, load_entry, print_lines

if TYPE_CHECKING:
    from rich.console import Console

    from sagestack.local.serving.serve import ServeOptions
    from sagestack.project.loader import LoadedSpec

app = typer.Typer()


@app.command("compile")
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
    from sagestack.local.serving.compile import LocalCompileError, compile_locally

    out, err = console(), console(stderr=True)
    loaded = load_entry(root, default_env(root, env), endpoint, lambda spec: spec.endpoints, "endpoint")
    try:
        with out.status(f"[bold]{endpoint}[/]: tracing and checking"):
            result = compile_locally(loaded, endpoint, model_dir=model_dir, output=output)
    except LocalCompileError as e:
        print_lines(err, str(e))
        raise typer.Exit(1) from None
    from sagestack.local.pasteable import shown_path

    c = loaded.spec.endpoints[endpoint].compile
    target = (c.target_device or "a target platform") if c else "no compile target (served as trained)"
    print_lines(out, f"compiled {endpoint} for {target}: {result.input_shapes}", "[green]✓[/]")
    print_lines(out, f"  traced == eager on {result.checks} inputs (max |diff| {result.max_abs_diff:.2g})")
    size = f"{result.size / 1024:.0f} KiB, sha256 {result.sha256[:12]}"
    print_lines(out, f"  {shown_path(result.archive)} ({size})", hang="      ")


@app.command("serve")
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
        typer.Option(
            "--model",
            help="a model.tar.gz or model folder (default: the local compile result; a TensorFlow "
            "job's SavedModel as trained)",
        ),
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
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", help="an LLM endpoint: stream one chat answer to this prompt, then stop"),
    ] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="with --prompt: tokens to generate")] = 40,
    as_json: Annotated[
        bool, typer.Option("--json", help="with --predict: the answers as one JSON document")
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Serve the compiled model with the SageMaker serving contract (GET /ping, POST /invocations;
    InvokeEndpointAsync when async) — what a boto3 sagemaker-runtime client pointed here can call;
    a TensorFlow SavedModel as the TensorFlow Serving container answers ({"instances": [...]}).
    An LLM endpoint (llm:, or ENDPOINT/COMPONENT) is served in its container's schema, streamed as
    InvokeEndpointWithResponseStream frames, from weights made here when the project has none."""
    from sagestack.cli.local_llm import is_llm, llm_keys, serve_llm
    from sagestack.local.serving.batching import batching_options
    from sagestack.local.serving.handlers import ServeError
    from sagestack.local.serving.s3_paths import serving_extras
    from sagestack.local.serving.serve import BackgroundServer, ServeOptions, build_server

    out, err = console(), console(stderr=True)
    loaded = load_entry(
        root, default_env(root, env), endpoint, lambda spec: [*spec.endpoints, *llm_keys(spec)], "endpoint"
    )
    if is_llm(loaded.spec, endpoint):
        serve_llm(loaded, endpoint, host=host, port=port, prompt=prompt, max_tokens=max_tokens)
        return
    model_dir = served_model(err if as_json else out, err, loaded, endpoint, model)  # stdout: JSON alone
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
            background = BackgroundServer(model_dir, options)
            with background as url:
                _print_predictions(
                    out, url, predict, as_json, _tf_sample_shape(background.app.handlers.model)
                )
            return
        server, _ = build_server(model_dir, options)
    except ServeError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    _announce(out, endpoint, options)
    server.run()


def served_model(out: Console, err: Console, loaded: LoadedSpec, endpoint: str, model: Path | None) -> Path:
    """The model folder to serve: --model (a folder, or an archive unpacked), else the local compile
    result (compiled first when there is none yet)."""
    from sagestack.local.serving.compile import LocalCompileError, compile_locally, local_root
    from sagestack.local.serving.handlers import unpack_model

    source = loaded.spec.endpoints[endpoint].model
    if model is None and source is not None:  # a TensorFlow SavedModel is served as trained
        from sagestack.local.serving.compile import trained_model_dir
        from sagestack.local.serving.tf_serving import saved_model_version

        try:
            trained = trained_model_dir(loaded, source.from_)
        except LocalCompileError:
            trained = None
        if trained is not None and saved_model_version(trained) is not None:
            return trained
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
        return archive
    return unpack_model(archive, local_root(loaded) / "serve" / endpoint / "model")


def _announce(out: Console, endpoint: str, options: ServeOptions) -> None:
    from sagestack.core.deployment import LOCAL_BUCKET

    print_lines(
        out,
        f"serving {endpoint} on http://{options.host}:{options.port} (GET /ping, POST /invocations; "
        f"{options.workers} worker(s), batches of up to {options.max_batch} request(s) waiting at most "
        f"{options.max_delay_ms:g} ms); Ctrl-C stops",
    )
    if options.asynchronous is not None:
        a = options.asynchronous
        print_lines(
            out,
            f"  async: POST /endpoints/{a.endpoint}/async-invocations; results in {a.local(a.output_uri)}, "
            f"failures in {a.local(a.failure_uri)} (s3://{LOCAL_BUCKET}/… is {a.s3_root / LOCAL_BUCKET})",
        )
    if options.capture_dir is not None:
        print_lines(out, f"  capturing {options.capture_percent} % to {options.capture_dir}")


def _tf_sample_shape(model: Any) -> tuple[int, ...] | None:
    """A TensorFlow model's sample shape (what --predict shapes each digit to); None for PyTorch's."""
    from sagestack.cli.common import UserError
    from sagestack.local.serving.tf_serving import DEFAULT_SIGNATURE, TfModel

    if not isinstance(model, TfModel):
        return None
    shape = model.sample_shape
    size = 1
    for d in shape or ():
        size *= d
    if shape is None or size != 64:
        names = sorted(model.inputs(DEFAULT_SIGNATURE)) if DEFAULT_SIGNATURE in model.signatures else []
        takes = (
            "x".join(map(str, shape))
            if shape
            else f"{len(names)} inputs ({', '.join(names)})"
            if len(names) > 1
            else "an input of no fixed shape"
        )
        raise UserError(
            f"--predict sends digits (8x8 = 64 values), but the SavedModel {model.path} takes {takes} "
            "per sample; send your own requests to /invocations instead",
            code=2,
        )
    return shape


def _print_predictions(
    out: Any, url: str, count: int, as_json: bool = False, tf_shape: tuple[int, ...] | None = None
) -> None:
    """Send `count` digits: to the PyTorch handler as 1x8x8 samples answered with label and
    probabilities, to a TensorFlow SavedModel in its own sample shape, answered with TF Serving's
    predictions (the model's outputs: the probabilities of a softmax classifier)."""
    import json
    import urllib.request

    import numpy as np
    from rich.table import Table
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    x, y = load_digits(return_X_y=True)
    rows = []
    for i in range(count):
        sample = (x[i] / 16.0).reshape(tf_shape or (1, 8, 8)).tolist()
        body = json.dumps({"instances": [sample]}).encode()
        req = urllib.request.Request(
            f"{url}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())["predictions"][0]
        probabilities = np.ravel(answer).tolist() if tf_shape else answer["probabilities"]
        label = int(np.argmax(probabilities)) if tf_shape else answer["label"]
        rows.append(
            {"sample": i, "label": int(y[i]), "predicted": label, "probability": probabilities[label]}
        )
    if as_json:
        typer.echo(json.dumps({"url": f"{url}/invocations", "predictions": rows}, indent=1))
        return
    table = Table("sample", "label", "predicted", "probability", title=f"POST {url}/invocations")
    for r in rows:
        mark = "[green]✓[/]" if r["predicted"] == r["label"] else "[red]✗[/]"
        table.add_row(
            str(r["sample"]), str(r["label"]), f"{r['predicted']} {mark}", f"{r['probability']:.3f}"
        )
    out.print(table)
