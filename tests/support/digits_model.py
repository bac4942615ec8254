"""A model folder as train.py writes it (TorchScript model.pt, model_info.json, code/inference.py),
built directly from training_src's model (untrained weights, fixed seed): enough to serve."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

from tests.conftest import REPO

SRC = REPO / "training_src"


def make_model_dir(dest: Path) -> Path:
    import torch

    spec = importlib.util.spec_from_file_location("training_src_model_for_serving", SRC / "model.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    example = torch.zeros(1, 1, 8, 8)
    model = module.build_model("cnn", example[0], 10).eval()
    dest.mkdir(parents=True)
    torch.jit.trace(model, example).save(str(dest / "model.pt"))
    (dest / "model_info.json").write_text(json.dumps({"input_shape": [1, 1, 8, 8], "num_classes": 10}))
    (dest / "code").mkdir()
    shutil.copyfile(SRC / "inference.py", dest / "code" / "inference.py")
    return dest
