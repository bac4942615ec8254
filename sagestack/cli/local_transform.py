"""`sagestack local transform`: a batch transform over a folder, with the model's inference.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sagestack.cli.common import EnvOption, RootOption, console, default_env, load_entry

app = typer.Typer()


@app.command("transform")
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
        typer.Option(
            "--output",
            help="where the .out files go (default: .sagestack/local/<env>/transform/<key>/output)",
        ),
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
    from sagestack.local.pasteable import shown_path
    from sagestack.local.serving.compile import LocalCompileError, local_root, trained_model_dir
    from sagestack.local.serving.handlers import ServeError, unpack_model
    from sagestack.local.serving.serve import load_model_handlers
    from sagestack.local.serving.transform import TransformError, run_transform

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
                f"no trained model in {shown_path(model)}; run "
                f"`sagestack local train {spec.model.from_} --env {loaded.env}` first"
            )
    if model.is_file():
        model = unpack_model(model, base / "model")
    try:
        handlers = load_model_handlers(model)  # a TensorFlow SavedModel: as TF Serving answers
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

    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    x, _ = load_digits(return_X_y=True)
    folder.mkdir(parents=True, exist_ok=True)
    rows = range(min(count, len(x)))
    if content_type.startswith("text/csv"):
        text = "".join(",".join(str(v / 16.0) for v in x[i]) + "\n" for i in rows)
        (folder / "digits.csv").write_text(text)
        return
    lines = [json.dumps({"id": i, "features": (x[i] / 16.0).reshape(1, 8, 8).tolist()}) for i in rows]
    (folder / "digits.jsonl").write_text("\n".join(lines) + "\n")
