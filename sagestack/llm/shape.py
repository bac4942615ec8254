"""An LLM's shape, as far as its KV cache goes: layers, key-value heads (grouped-query attention) and
the head size — or a stated number of KV-cache bytes per token.

Where the shape comes from, first found wins:

1. the spec: `kv_bytes_per_token` (stated), else `num_layers`, `num_kv_heads`, `head_dim`;
2. the `config.json` beside the weights where they lie locally (`weights.s3` under
   `.sagestack/local/<env>/s3/<bucket>/`, as `sagestack local serve` reads them), in Hugging Face's
   keys (num_hidden_layers, num_key_value_heads, num_attention_heads, hidden_size, head_dim; GPT-2's
   n_layer, n_head, n_embd) — unless the parameters it describes are not the spec's (the small model
   `local serve` makes stands in for a real one and says nothing of its shape);
3. an estimate: the known architecture whose parameter count is nearest the spec's (KNOWN), named
   as an estimate in every message that uses it.

The KV cache holds, per token, a key and a value of every KV head in every layer:
2 x layers x kv_heads x head_dim x bytes of the KV dtype (Llama-3 8B in bf16: 2 x 32 x 8 x 128 x 2 =
128 KiB). The KV dtype is `kv_cache_dtype` (fp8: 1 byte), else the dtype the model computes in
(fp32: 4 bytes; everything else 2 bytes: quantized weights compute in 16-bit).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.deployment import LOCAL_BUCKET
from sagestack.llm.models import LlmSpec

CONFIG = "config.json"
CONFIG_MAX_BYTES = 1 << 20  # a model's config.json is a few KiB; anything larger is not one
PARAMETER_TOLERANCE = (
    2.0  # a config.json describing a model this many times larger or smaller is another model
)
KV_DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class Architecture:
    """A published model's shape (its config.json on the Hugging Face hub)."""

    name: str
    parameters: float
    layers: int
    kv_heads: int
    head_dim: int


# Common open models, smallest first (their config.json: num_hidden_layers, num_key_value_heads,
# hidden_size / num_attention_heads).
KNOWN = (
    Architecture("Qwen2.5 0.5B", 0.49e9, 24, 2, 64),
    Architecture("Llama-3.2 1B", 1.24e9, 16, 8, 64),
    Architecture("Llama-3.2 3B", 3.21e9, 28, 8, 128),
    Architecture("Llama-3 8B", 8.03e9, 32, 8, 128),
    Architecture("Llama-2 13B", 13.0e9, 40, 40, 128),
    Architecture("Qwen2.5 32B", 32.8e9, 64, 8, 128),
    Architecture("Mixtral 8x7B", 46.7e9, 32, 8, 128),
    Architecture("Llama-3 70B", 70.6e9, 80, 8, 128),
    Architecture("Llama-3.1 405B", 405.9e9, 126, 8, 128),
)


@dataclass(frozen=True)
class ModelShape:
    """What the KV cache's size per token is computed from, and where that came from."""

    layers: int | None
    kv_heads: int | None
    head_dim: int | None
    stated_bytes_per_token: int | None  # kv_bytes_per_token: all layers, K and V
    source: str  # "the spec", "config.json (<path>)", "an estimate: …"
    estimate: bool = False
    max_positions: int | None = None  # the model's own context length (config.json)
    note: str | None = None  # why a config.json present was not used

    def bytes_per_token(self, kv_bytes: int) -> int:
        if self.stated_bytes_per_token is not None:
            return self.stated_bytes_per_token
        assert self.layers and self.kv_heads and self.head_dim
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes

    def formula(self, kv_bytes: int, kv_dtype: str) -> str:
        """'2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 128 KiB per token'."""
        per = size_text(self.bytes_per_token(kv_bytes))
        if self.stated_bytes_per_token is not None:
            return f"kv_bytes_per_token {per} per token"
        return (
            f"2 (K, V) x {self.layers} layers x {self.kv_heads} KV heads x {self.head_dim} head_dim x "
            f"{kv_bytes} bytes ({kv_dtype}) = {per} per token"
        )


def size_text(n: float) -> str:
    """Bytes in the largest binary unit that keeps a whole number in front: '128 KiB', '1.5 MiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:g} bytes"


def kv_dtype(spec: LlmSpec, rendered: bool = True) -> str:
    """The KV cache's dtype: kv_cache_dtype where it reaches the container (`rendered`), else the
    dtype the model computes in."""
    if spec.kv_cache_dtype is not None and rendered:
        return spec.kv_cache_dtype
    return "fp32" if spec.dtype == "fp32" else "bf16" if spec.dtype == "bf16" else "fp16"


def local_weights_dir(root: Path, env: str | None, spec: LlmSpec) -> Path:
    """Where `weights.s3` lies locally: .sagestack/local/<env>/s3/<bucket>/<prefix> (a key prefix is
    the local artifact bucket's), the folder `sagestack local serve` reads."""
    s3 = spec.weights.s3
    bucket, _, prefix = (
        s3.removeprefix("s3://").partition("/") if s3.startswith("s3://") else (LOCAL_BUCKET, "", s3)
    )
    return root / ".sagestack" / "local" / (env or "project") / "s3" / bucket / prefix.strip("/")


def nearest_architecture(parameters: float) -> Architecture:
    return min(KNOWN, key=lambda a: abs(math.log(parameters / a.parameters)))


def shape_of(spec: LlmSpec, weights_dir: Path | None = None) -> ModelShape:
    """The spec's shape, else its config.json's, else an estimate from the parameter count (each
    field the spec gives wins over the others)."""
    if spec.kv_bytes_per_token is not None:
        return ModelShape(None, None, None, spec.kv_bytes_per_token, "kv_bytes_per_token (the spec)")
    given = (spec.num_layers, spec.num_kv_heads, spec.head_dim)
    config, note = _config(spec, weights_dir)
    positions = config[3] if config else None
    if None not in given:
        return ModelShape(*given, None, "the spec", max_positions=positions, note=note)
    if config is not None:
        layers, kv_heads, head_dim = (
            g if g is not None else c for g, c in zip(given, config[:3], strict=True)
        )
        where = f"{CONFIG} ({weights_dir / CONFIG if weights_dir else CONFIG})"
        return ModelShape(layers, kv_heads, head_dim, None, where, max_positions=positions)
    arch = nearest_architecture(spec.parameters)
    known = (arch.layers, arch.kv_heads, arch.head_dim)
    layers, kv_heads, head_dim = (g if g is not None else k for g, k in zip(given, known, strict=True))
    return ModelShape(
        layers,
        kv_heads,
        head_dim,
        None,
        f"an estimate: {arch.name}'s shape for {spec.parameters:g} parameters (state num_layers, "
        "num_kv_heads and head_dim, or kv_bytes_per_token, for the model's own)",
        estimate=True,
        note=note,
    )


def _read_config(path: Path) -> dict[str, Any] | None:
    """A regular file's JSON object, or None (absent, not a file, too large, not a JSON object)."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and isinstance(data.get("text_config"), dict):
        data = {**data, **data["text_config"]}  # a multimodal model's language model
    return data if isinstance(data, dict) else None


def _int(data: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _config(
    spec: LlmSpec, weights_dir: Path | None
) -> tuple[tuple[int, int, int, int | None] | None, str | None]:
    """The shape in the local config.json (layers, KV heads, head size, context length), and a note
    when one is there but describes another model."""
    data = _read_config(weights_dir / CONFIG) if weights_dir is not None else None
    if data is None:
        return None, None
    layers = _int(data, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(data, "num_attention_heads", "n_head")
    hidden = _int(data, "hidden_size", "n_embd")
    if layers is None or heads is None or hidden is None:
        return None, None
    kv_heads = _int(data, "num_key_value_heads", "multi_query_group_num") or heads
    head_dim = _int(data, "head_dim") or hidden // heads
    described = _parameters(data, layers, heads, kv_heads, head_dim, hidden)
    if not 1 / PARAMETER_TOLERANCE <= described / spec.parameters <= PARAMETER_TOLERANCE:
        return None, (
            f"the local {CONFIG} describes about {described:.2g} parameters, not {spec.parameters:g}: "
            "its shape is not used"
        )
    return (layers, kv_heads, head_dim, _int(data, "max_position_embeddings", "n_positions")), None


def _parameters(
    data: dict[str, Any], layers: int, heads: int, kv_heads: int, head_dim: int, hidden: int
) -> float:
    """About how many parameters a config.json describes (attention, MLP — each expert's —, embeddings)."""
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    inter = _int(data, "intermediate_size", "n_inner")
    mlp = 3 * hidden * inter if inter else 8 * hidden * hidden
    experts = _int(data, "num_local_experts", "num_experts") or 1
    vocab = _int(data, "vocab_size") or 0
    tied = data.get("tie_word_embeddings", True) is not False
    return float(layers * (attention + mlp * experts) + vocab * hidden * (1 if tied else 2))
