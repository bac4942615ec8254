"""`sagestack local compile`: what SageMaker Neo is given, made and checked here.

The trained model (state dict + model_info.json, as train.py writes it) is rebuilt in eager mode,
traced to TorchScript with the endpoint's declared input shapes (float32, as Neo requires), and
the traced module's outputs are compared with eager mode's on random and on zero inputs. The
result is a Neo-ready model.tar.gz: model.pt, model_info.json and code/inference.py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from sagestack.core.sourcedir import pack_source_dir
from sagestack.local.pasteable import shown_path
from sagestack.local.private import private_dir, write_private_bytes
from sagestack.project.loader import LoadedSpec

ATOL, RTOL = 1e-5, 1e-4


class LocalCompileError(Exception):
    """Compilation cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class CompileResult:
    archive: Path
    sha256: str
    size: int
    input_shapes: dict[str, list[int]]
    max_abs_diff: float
    checks: int
    model_dir: Path


def local_root(loaded: LoadedSpec) -> Path:
    return loaded.root / ".sagestack" / "local" / (loaded.env or "project")


def trained_model_dir(loaded: LoadedSpec, source: str) -> Path:
    """Where `sagestack local train` (or the best trial of `local tune`) left the model."""
    root = local_root(loaded)
    if source in loaded.spec.tuning:
        best = root / f"tune-{source}" / "best.json"
        if not best.exists():
            raise LocalCompileError(
                f"no local tuning result for '{source}' ({best} is missing); run `sagestack local tune {source}` first"
            )
        return Path(json.loads(best.read_text())["model_dir"])
    return root / source / "model"


def _import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LocalCompileError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _eager_model(model_dir: Path, source_dir: Path, info: dict[str, Any]) -> Any:
    """The eager module: train.py's model definition with the trained weights."""
    import torch

    model_py = source_dir / "model.py"
    if not (model_dir / "state_dict.bin").exists() or not model_py.exists():
        return None
    sys.path.insert(0, str(source_dir))
    try:
        models = _import_file(model_py, "_sagestack_user_model")
    finally:
        sys.path.remove(str(source_dir))
    sample = torch.zeros(info["input_shape"][1:])
    model = models.build_model(
        info.get("model", "auto"), sample, int(info["num_classes"]), int(info.get("width", 0))
    )
    model.load_state_dict(torch.load(model_dir / "state_dict.bin", map_location="cpu", weights_only=True))
    model.eval()
    return model


def _traced(eager: Any, example: Any) -> Any:
    """The module traced for `example`'s shape and frozen; a model.pt as trained is TorchScript already."""
    import torch

    if isinstance(eager, torch.jit.ScriptModule):
        traced = eager
    else:
        with torch.no_grad():
            traced = torch.jit.trace(eager, example)  # type: ignore[no-untyped-call]
    return torch.jit.freeze(traced.eval()) if hasattr(torch.jit, "freeze") else traced


def compile_locally(
    loaded: LoadedSpec, endpoint: str, *, model_dir: Path | None = None, output: Path | None = None
) -> CompileResult:
    import torch

    spec = loaded.spec.endpoints[endpoint]
    if spec.model is None:
        raise LocalCompileError(f"endpoint '{endpoint}' has no model: {{from: …}}; nothing to compile here")
    source = spec.model.from_
    job_key = loaded.spec.job_of(source)
    job = loaded.spec.jobs[job_key]
    model_dir = model_dir or trained_model_dir(loaded, source)
    info_path = model_dir / "model_info.json"
    if not info_path.exists():
        raise LocalCompileError(
            f"no trained model in {shown_path(model_dir)} (model_info.json is missing); run "
            f"`sagestack local train {job_key} --env {loaded.env}` first"
        )
    info = json.loads(info_path.read_text())
    shapes = dict(spec.compile.input_shapes) if spec.compile else {"input0": [1, *info["input_shape"][1:]]}
    if len(shapes) != 1:
        raise LocalCompileError(
            f"endpoints.{endpoint}.compile.input_shapes: the model takes one input; got {len(shapes)} ({', '.join(shapes)})"
        )
    ((name, shape),) = shapes.items()
    expected = list(info["input_shape"][1:])
    if list(shape[1:]) != expected:
        raise LocalCompileError(
            f"endpoints.{endpoint}.compile.input_shapes.{name}: {shape} does not match the model, which takes "
            f"[N, {', '.join(map(str, expected))}] ({info_path}); write input_shapes: {{{name}: [1, "
            f"{', '.join(map(str, expected))}]}}"
        )
    source_dir = loaded.root / job.source_dir
    eager = _eager_model(model_dir, source_dir, info)
    if eager is None:
        eager = torch.jit.load(str(model_dir / "model.pt"), map_location="cpu").eval()  # type: ignore[no-untyped-call]
    example = torch.zeros(shape, dtype=torch.float32)
    try:
        with torch.inference_mode():
            eager(example)
    except RuntimeError as e:
        raise LocalCompileError(
            f"endpoints.{endpoint}.compile.input_shapes.{name}: the model rejects shape {shape}: "
            f"{str(e).splitlines()[0]}"
        ) from None
    traced = _traced(eager, example)

    generator = torch.Generator().manual_seed(0)
    inputs = [example] + [torch.randn(shape, generator=generator) for _ in range(8)]
    worst = 0.0
    with torch.inference_mode():
        for x in inputs:
            a, b = eager(x), traced(x)
            diff = float((a - b).abs().max())
            worst = max(worst, diff)
            if not torch.allclose(a, b, atol=ATOL, rtol=RTOL):
                raise LocalCompileError(
                    f"the traced model differs from eager mode by up to {diff:.3g} (tolerance {ATOL} + {RTOL}·|x|); "
                    "data-dependent control flow does not trace: make forward() shape-only"
                )

    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "model"
        (stage / "code").mkdir(parents=True)
        traced.save(str(stage / "model.pt"))
        (stage / "model_info.json").write_text(
            json.dumps(
                {
                    **info,
                    "compiled_for": (spec.compile.target_device if spec.compile else None),
                    "input_shapes": shapes,
                },
                indent=2,
                sort_keys=True,
            )
        )
        inference = source_dir / "inference.py"
        if not inference.exists():
            raise LocalCompileError(
                f"{inference} is missing: the serving contract (model_fn / input_fn / predict_fn / output_fn) "
                "travels in model.tar.gz's code/"
            )
        shutil.copyfile(inference, stage / "code" / "inference.py")
        archive = pack_source_dir(stage)
    out = output or local_root(loaded) / "compiled" / endpoint / "model.tar.gz"
    private_dir(out.parent)  # the model is the user's alone: 0700 / 0600 (local/private.py)
    tmp_out = out.with_suffix(".tmp")
    write_private_bytes(tmp_out, archive.data)
    tmp_out.replace(out)
    return CompileResult(
        archive=out,
        sha256=archive.sha256,
        size=len(archive.data),
        input_shapes=shapes,
        max_abs_diff=worst,
        checks=len(inputs),
        model_dir=model_dir,
    )
