"""An LLM on each instance pool of its endpoint: the accelerators one copy spans, its
tensor-parallel degree, and whether its weights, KV cache and activations fit the memory its server
uses there (llm/sizing.py's arithmetic; the model's shape from llm/shape.py). `sagestack plan` shows
it beside the endpoint's quota rows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagestack.core.catalog.instances import instance_type
from sagestack.endpoints.models import EndpointSpec
from sagestack.llm.models import LlmSpec
from sagestack.llm.shape import local_weights_dir, shape_of
from sagestack.llm.sizing import memory_fit


@dataclass(frozen=True)
class LlmFit:
    """An LLM on one pool type: what one copy spans and whether its weights, KV cache and
    activations fit the memory its server uses there."""

    endpoint: str  # the endpoint, or endpoint/component
    instance_type: str
    accelerator: str  # e.g. "A10G", "NeuronCore" (Inferentia2 / Trainium), "none"
    accelerators: int  # GPUs, or NeuronCores, of one instance
    accelerator_gib: float | None  # memory of each
    tensor_parallel_degree: int
    weights_gib: float
    kv_cache_gib: float  # bytes per token x token limit x batch
    activations_gib: float
    needed_gib: float  # weights + KV cache + activations
    available_gib: float  # the memory of the devices one copy spans that its server uses
    kv_cache: str  # the KV cache's formula, with its inputs
    shape_estimated: bool  # the model's shape is the nearest known architecture's, not its own
    fits: bool


def llm_fits(key: str, ep: EndpointSpec, root: Path | None = None, env: str | None = None) -> list[LlmFit]:
    """Each pool type's view of the endpoint's LLM, and of each LLM component's (the model's shape
    from the config.json of its local weights under `root`, when there)."""
    models: list[tuple[str, LlmSpec, int | None]] = []
    if ep.llm is not None:
        models.append((key, ep.llm, None))
    models += [(f"{key}/{n}", c.llm, c.accelerators) for n, c in ep.components.items() if c.llm is not None]
    out = []
    for label, spec, asked in models:
        shape = shape_of(spec, local_weights_dir(root, env, spec) if root is not None else None)
        for itype in ep.instance_type or ():
            devices, per, name = _devices(itype)
            fit = memory_fit(spec, itype, asked, shape)
            out.append(
                LlmFit(
                    endpoint=label,
                    instance_type=itype,
                    accelerator=name,
                    accelerators=devices,
                    accelerator_gib=per,
                    tensor_parallel_degree=fit.tensor_parallel_degree,
                    weights_gib=fit.weights_gib,
                    kv_cache_gib=fit.kv_cache_gib,
                    activations_gib=fit.activations_gib,
                    needed_gib=fit.needed_gib,
                    available_gib=fit.available_gib,
                    kv_cache=fit.kv.formula(),
                    shape_estimated=shape.estimate,
                    fits=fit.ok,
                )
            )
    return out


def _devices(itype: str) -> tuple[int, float | None, str]:
    """(devices a tensor-parallel group spans — GPUs or NeuronCores —, GiB each, their name)."""
    acc = instance_type(itype).accelerator
    if acc is None:
        return 0, None, "none"
    if acc.neuron_cores_per_chip:
        per = acc.memory_gib / acc.neuron_cores_per_chip if acc.memory_gib else None
        return acc.neuron_cores, per, "NeuronCore"
    return acc.count, acc.memory_gib, acc.model
