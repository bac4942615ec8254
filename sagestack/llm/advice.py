"""What would make an LLM that does not fit fit: the instance types that hold it (the catalog's hosting
types its family runs on, cheapest first, with the tensor-parallel degree each needs), the batch or
token limit that fits on the type chosen, and the quantizations (8-bit, 4-bit) and fp8 KV cache
with what each leaves. Pure: sizes from llm/sizing.py, prices from the catalog."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.catalog.instances import instance_types_for, is_retired
from sagestack.llm.images import instance_problem
from sagestack.llm.models import LlmSpec
from sagestack.llm.shape import ModelShape
from sagestack.llm.sizing import (
    BYTES_PER_PARAMETER,
    BYTES_QUANTIZED,
    ENGINES,
    GIB,
    Fit,
    devices,
    memory_fit,
)

# The load-time quantizations by width: what each makes of the weights.
WIDTHS = (("8-bit", ("fp8", "bitsandbytes")), ("4-bit", ("awq", "gptq")))
# GPUs without bfloat16 (compute capability below 8.0): a bf16 model is not served there as given.
NO_BF16 = frozenset({"K80", "V100", "T4"})
TOKEN_STEP = 16  # vLLM's KV block: a token limit that fits, rounded down to whole blocks


@dataclass(frozen=True)
class Alternative:
    """An instance type that holds one copy, at the smallest tensor-parallel degree that does."""

    instance_type: str
    tensor_parallel_degree: int
    price_per_hour: float | None
    fit: Fit


def _degrees(count: int) -> list[int]:
    """The degrees a server shards over `count` devices: powers of two dividing it, then all of them."""
    out = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= count and count % n == 0]
    return out if count in out else [*out, count]


def smallest_degree(
    spec: LlmSpec, instance_type: str, accelerators: int | None, shape: ModelShape
) -> int | None:
    """The smallest tensor-parallel degree at which one copy fits on `instance_type`, if one does."""
    for tp in _degrees(devices(instance_type, accelerators).count):
        if memory_fit(
            spec.model_copy(update={"tensor_parallel_degree": tp}), instance_type, accelerators, shape
        ).ok:
            return tp
    return None


def fitting_types(spec: LlmSpec, shape: ModelShape, limit: int = 3) -> list[Alternative]:
    """The catalog's hosting types the family runs on that hold one copy, cheapest first."""
    found = []
    for name in instance_types_for("hosting"):
        try:
            itype = lookup(name)
        except KeyError:
            continue
        acc = itype.accelerator
        if acc is None or acc.kind == "unknown" or is_retired(name) or instance_problem(spec.container, name):
            continue
        if spec.dtype == "bf16" and acc.model in NO_BF16:
            continue
        tp = smallest_degree(spec, name, None, shape)
        if tp is not None:
            fit = memory_fit(spec.model_copy(update={"tensor_parallel_degree": tp}), name, None, shape)
            found.append(Alternative(name, tp, itype.price_per_hour, fit))
    found.sort(key=lambda a: (a.price_per_hour is None, a.price_per_hour or 0.0, a.instance_type))
    return found[:limit]


def limits_that_fit(fit: Fit) -> str | None:
    """The batch at the token limit, or the token limit at the batch, that fits `fit`'s devices."""
    kv = fit.kv
    free = fit.available_gib - fit.weights_gib - fit.activations_gib
    if free <= 0:
        return (
            f"the weights and activations alone take {fit.weights_gib + fit.activations_gib:.1f} GiB of "
            f"{fit.available_gib:.1f}"
        )
    if kv.tokens is None:
        return None
    per_sequence = kv.bytes_per_token * kv.tokens / GIB
    batch = math.floor(free / per_sequence)
    tokens = math.floor(free * GIB / (kv.bytes_per_token * kv.batch) / TOKEN_STEP) * TOKEN_STEP
    options = []
    if batch >= 1:
        options.append(f"max_batch_size {batch} at {kv.tokens} tokens")
    if tokens >= TOKEN_STEP:
        options.append(f"max_total_tokens {tokens} at {kv.batch} sequences")
    return ", or ".join(options) or f"not one sequence of {kv.tokens} tokens ({per_sequence:.1f} GiB)"


def _batch_then(fit: Fit, weights_gib: float) -> str:
    """'; max_batch_size 16 fits' with these weights, when the KV cache is counted and one does."""
    kv = fit.kv
    if kv.tokens is None:
        return ""
    free = fit.available_gib - weights_gib - fit.activations_gib
    batch = math.floor(free * GIB / (kv.bytes_per_token * kv.tokens)) if free > 0 else 0
    return f"; max_batch_size {batch} fits" if 1 <= batch < kv.batch else ""


def quantized(spec: LlmSpec, fit: Fit, allowed: Collection[str]) -> list[str]:
    """Each width the family loads: its weights and what the copy then needs (fits or not)."""
    if spec.quantization is not None:
        return []
    out = []
    for width, names in WIDTHS:
        usable = [q for q in names if q in allowed]
        if not usable:
            continue
        factor = BYTES_QUANTIZED[usable[0]] / BYTES_PER_PARAMETER[spec.dtype]
        if factor >= 1:
            continue
        weights = fit.weights_gib * factor
        needed = fit.needed_gib - fit.weights_gib + weights
        verdict = "fits" if needed <= fit.available_gib else "still over" + _batch_then(fit, weights)
        out.append(
            f"quantization: {' / '.join(usable)} ({width}) makes {weights:.1f} GiB of weights, "
            f"{needed:.1f} GiB in all ({verdict})"
        )
    if fit.kv.dtype != "fp8" and ENGINES[spec.container].kv_dtype and fit.kv_cache_gib > 0:
        kv = fit.kv_cache_gib / 2
        needed = fit.needed_gib - kv
        verdict = "fits" if needed <= fit.available_gib else "still over"
        out.append(
            f"kv_cache_dtype: fp8 halves the KV cache to {kv:.1f} GiB, {needed:.1f} GiB in all ({verdict})"
        )
    return out


def advice(
    spec: LlmSpec, fit: Fit, instance_type: str, shape: ModelShape, allowed: Collection[str]
) -> list[str]:
    """The ways forward, one sentence each, for a copy that does not fit on `instance_type`."""
    out = []
    types = fitting_types(spec, shape)
    if types:
        listed = ", ".join(
            f"{a.instance_type} (tp {a.tensor_parallel_degree}"
            + (f", ${a.price_per_hour:.2f}/h)" if a.price_per_hour is not None else ")")
            for a in types
        )
        out.append(f"instance types that hold it, cheapest first: {listed}")
    else:
        out.append("no single instance type of the catalog holds it as given")
    limits = limits_that_fit(fit)
    if limits is not None:
        out.append(f"on {instance_type}: {limits}")
    out += quantized(spec, fit, allowed)
    return out
