"""What an instance type's memory bandwidth allows an LLM's performance target.

Decoding is memory-bound: each step of one sequence reads every weight once (and its KV cache), so
one user's decode rate is at most the bandwidth of the devices a copy spans divided by the weights'
bytes (the roofline bound; NVIDIA, "Mastering LLM Techniques: Inference Optimization", 2023:
"the speed at which data … can be transferred to the GPU from memory dominates the latency";
Databricks, "LLM Inference Performance Engineering: Best Practices", 2023, which divides
bandwidth by model bytes the same way). Batching raises the tokens/s of the whole instance, never
one user's. Likewise the first token needs at least one read of the weights. Both are ceilings a
real server stays well below (kernels reach 60 to 80 % of peak), so a target beyond them is out of
reach on that instance type whatever its configuration; speculative decoding makes several tokens
a step and is not bounded this way."""

from __future__ import annotations

from dataclasses import dataclass

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.catalog.instances import memory_bandwidth_gbps
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import GIB, devices, tensor_parallel_degree, weights_gib


@dataclass(frozen=True)
class Ceiling:
    """What memory bandwidth allows one copy of the LLM on one instance type."""

    instance_type: str
    bandwidth_gbps: float  # the devices one copy spans, together
    weights_gb: float
    tokens_per_second: float  # one user's decode rate, at most
    first_token_ms: float  # one read of the weights, at least

    def describe(self) -> str:
        return (
            f"{self.instance_type}: {self.bandwidth_gbps:,.0f} GB/s / {self.weights_gb:.1f} GB of weights "
            f"= at most {self.tokens_per_second:,.0f} tokens/s per user"
        )


def ceiling(spec: LlmSpec, instance_type: str, accelerators: int | None = None) -> Ceiling | None:
    """The bound on `instance_type`, or None when the catalog knows no bandwidth for it (a CPU
    type, Inf1, a type newer than the catalog)."""
    try:
        per_accelerator = memory_bandwidth_gbps(lookup(instance_type))
        d = devices(instance_type, accelerators)
    except KeyError:
        return None
    if per_accelerator is None or d.count == 0:
        return None
    spanned = min(tensor_parallel_degree(spec, instance_type, accelerators), d.count)
    bandwidth = per_accelerator * spanned / d.per_accelerator  # a NeuronCore has its chip's share
    weights_gb = weights_gib(spec) * GIB / 1e9
    return Ceiling(
        instance_type,
        bandwidth,
        weights_gb,
        tokens_per_second=bandwidth / weights_gb,
        first_token_ms=weights_gb / bandwidth * 1000,
    )
