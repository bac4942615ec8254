"""A model's inference handlers, loaded as the PyTorch inference toolkit loads them, and its errors.

The model's code/inference.py gives model_fn / input_fn / predict_fn / output_fn; the toolkit's
defaults (TorchScript model.pt, JSON or npy in, JSON out) stand in for any it omits. `local serve`
and `local transform` run the same handlers.

Errors are answered as the toolkit's Transformer answers them (sagemaker_inference/transformer.py):
an exception with a `status_code` (the toolkit's BaseInferenceToolkitError, which
training_src/inference.py raises for a payload it cannot take) gets that status and its message;
any other exception is a 500.
"""

from __future__ import annotations

import importlib.util
import io
import json
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

JSON = "application/json"
UTF8_TYPES = (JSON, "text/csv")  # sagemaker_inference.content_types: decoded to str for input_fn


class ServeError(Exception):
    """The model cannot be served; the message says why."""


@dataclass
class Handlers:
    model: Any
    input_fn: Callable[[bytes | str, str | None], Any]
    predict_fn: Callable[[Any, Any], Any]
    output_fn: Callable[[Any, str], Any]
    module: ModuleType | None = None


def unpack_model(archive: Path, dest: Path) -> Path:
    """model.tar.gz -> dest (replacing what was there), as SageMaker lays out /opt/ml/model."""
    import shutil

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


def load_handlers(model_dir: Path) -> Handlers:
    """Import model_dir/code/inference.py and call its model_fn, as the inference toolkit does."""
    script = model_dir / "code" / "inference.py"
    module = None
    if script.exists():
        spec = importlib.util.spec_from_file_location(f"_sagestack_inference_{abs(hash(model_dir))}", script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    model_fn = getattr(module, "model_fn", None) or _default_model_fn
    model = model_fn(str(model_dir))
    return Handlers(
        model=model,
        input_fn=getattr(module, "input_fn", None) or _default_input_fn,
        predict_fn=getattr(module, "predict_fn", None) or _default_predict_fn,
        output_fn=getattr(module, "output_fn", None) or _default_output_fn,
        module=module,
    )


# The toolkit's defaults (TorchScript model.pt, JSON / npy in, JSON out), for scripts that omit some.
def _default_model_fn(model_dir: str) -> Any:
    import torch

    path = Path(model_dir) / "model.pt"
    if not path.exists():
        raise ServeError(f"no model_fn in code/inference.py and no TorchScript {path}")
    return torch.jit.load(str(path), map_location="cpu").eval()  # type: ignore[no-untyped-call]


def _default_input_fn(body: bytes | str, content_type: str | None) -> Any:
    import numpy as np
    import torch

    kind = (content_type or JSON).split(";")[0].strip()
    if kind == "application/json":
        return torch.from_numpy(np.asarray(json.loads(body), dtype=np.float32))
    if kind == "application/x-npy":
        raw = body.encode() if isinstance(body, str) else body
        return torch.from_numpy(np.load(io.BytesIO(raw), allow_pickle=False))
    raise ClientError(415, f"content type '{kind}' is not supported")


def _default_predict_fn(data: Any, model: Any) -> Any:
    import torch

    with torch.inference_mode():
        return model(data)


def _default_output_fn(prediction: Any, accept: str) -> Any:
    return json.dumps(prediction.tolist()).encode(), "application/json"


class ClientError(Exception):
    """The toolkit's GenericInferenceToolkitError, for the default handlers here."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def error_response(e: BaseException) -> tuple[int, str]:
    """(status, message) as the toolkit's Transformer answers an exception."""
    status = getattr(e, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status, str(getattr(e, "message", e))
    return 500, f"{type(e).__name__}: {e}"
