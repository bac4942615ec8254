"""How big an LLM is, what one copy spans, whether it fits, and how long it takes to arrive.

- The weights: `weights.size_gb` when given (GB on disk), else parameters x bytes per parameter of
  the dtype — or of the load-time quantization when that is smaller (awq / gptq: 4-bit; fp8 and
  bitsandbytes: 8-bit).
- A copy spans `tensor_parallel_degree` devices: GPUs, or NeuronCores on Inferentia2 / Trainium
  (transformers-neuronx and optimum-neuron shard over NeuronCores). By default every one of the
  instance, or those of an inference component's `accelerators` (Neuron devices hold
  `neuron_cores_per_chip` cores each).
- It fits when the weights, with `kv_cache_headroom` of the memory kept free for the KV cache and
  activations, fit the memory of the devices it spans (the catalog's per-accelerator memory_gib; a
  NeuronCore has its chip's memory divided by its cores; a CPU instance its host memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.llm.images import NEURON_FAMILIES
from sagestack.llm.models import LlmSpec

GIB = 2**30
BYTES_PER_PARAMETER = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
BYTES_QUANTIZED = {"awq": 0.5, "gptq": 0.5, "fp8": 1.0, "bitsandbytes": 1.0}

# Timeouts. SageMaker copies ModelDataSource from S3 before the container starts; a single instance
# reads S3 at several hundred MB/s, but the figure below assumes 100 MiB/s (10 s per GiB, a margin
# for small instances and many files) plus a 120 s base. The container then loads the weights onto
# the accelerators and warms up: 300 s plus 20 s per GiB (CUDA graphs, the KV cache's allocation),
# and 900 s more for a Neuron family, which compiles the model for the NeuronCores when it starts
# unless it is precompiled. Both are clamped to the API's 60-3600 s.
DOWNLOAD_BASE_S, DOWNLOAD_S_PER_GIB = 120, 10
STARTUP_BASE_S, STARTUP_S_PER_GIB, NEURON_COMPILE_S = 300, 20, 900
TIMEOUT_MIN_S, TIMEOUT_MAX_S = 60, 3600  # botocore: ModelDataDownloadTimeoutInSeconds, ContainerStartup…


@dataclass(frozen=True)
class Devices:
    """What a tensor-parallel group is made of on one instance type."""

    count: int  # GPUs or NeuronCores of the instance (or of a component's accelerators); 0 on CPU
    gib_each: float | None  # memory per device
    name: str  # "A10G", "NeuronCore (Inferentia2)", "none"
    per_accelerator: int = 1  # devices per accelerator (NeuronCores per Neuron device)


@dataclass(frozen=True)
class Fit:
    """One copy of the LLM on one instance type."""

    weights_gib: float
    needed_gib: float  # the weights plus the KV-cache headroom
    available_gib: float  # the memory of the devices one copy spans
    tensor_parallel_degree: int
    ok: bool


def weights_gib(spec: LlmSpec) -> float:
    """The weights' size in GiB (size_gb as given, else parameters x bytes per parameter)."""
    if spec.weights.size_gb is not None:
        return spec.weights.size_gb * 1e9 / GIB
    per = BYTES_PER_PARAMETER[spec.dtype]
    if spec.quantization is not None:
        per = min(per, BYTES_QUANTIZED[spec.quantization])
    return spec.parameters * per / GIB


def devices(instance_type: str, accelerators: int | None = None) -> Devices:
    """The devices a copy can span on `instance_type` (all of them, or `accelerators`' worth)."""
    itype = lookup(instance_type)
    acc = itype.accelerator
    if acc is None:
        return Devices(0, itype.memory_gib, "none")
    if acc.neuron_cores_per_chip:
        per = acc.memory_gib / acc.neuron_cores_per_chip if acc.memory_gib else None
        cores = (accelerators or acc.count) * acc.neuron_cores_per_chip
        return Devices(cores, per, f"NeuronCore ({acc.model})", acc.neuron_cores_per_chip)
    return Devices(accelerators or acc.count, acc.memory_gib, acc.model)


def tensor_parallel_degree(spec: LlmSpec, instance_type: str, accelerators: int | None = None) -> int:
    """The spec's degree, else every device of the instance (or of the component's accelerators)."""
    if spec.tensor_parallel_degree is not None:
        return spec.tensor_parallel_degree
    try:
        return max(1, devices(instance_type, accelerators).count)
    except KeyError:
        return 1


def memory_fit(spec: LlmSpec, instance_type: str, accelerators: int | None = None) -> Fit:
    """Whether one copy's weights and KV-cache headroom fit the devices it spans."""
    tp = tensor_parallel_degree(spec, instance_type, accelerators)
    weights = weights_gib(spec)
    needed = weights / (1 - spec.kv_cache_headroom)
    d = devices(instance_type, accelerators)
    if d.gib_each is None:
        return Fit(weights, needed, 0.0, tp, False)
    available = float(d.gib_each) * (
        min(tp, d.count) if d.count else 1
    )  # a degree above the devices: tp rule
    return Fit(weights, needed, available, tp, needed <= available)


def _clamp(seconds: float) -> int:
    return int(min(TIMEOUT_MAX_S, max(TIMEOUT_MIN_S, math.ceil(seconds))))


def timeouts(spec: LlmSpec) -> tuple[int, int]:
    """(ModelDataDownloadTimeoutInSeconds, ContainerStartupHealthCheckTimeoutInSeconds): the spec's,
    else derived from the weights' size (the throughput assumption above)."""
    gib = weights_gib(spec)
    download = _clamp(DOWNLOAD_BASE_S + DOWNLOAD_S_PER_GIB * gib)
    compile_s = NEURON_COMPILE_S if spec.container in NEURON_FAMILIES else 0
    startup = _clamp(STARTUP_BASE_S + STARTUP_S_PER_GIB * gib + compile_s)
    return spec.download_timeout or download, spec.startup_timeout or startup


def accelerator_devices(spec: LlmSpec, instance_type: str, accelerators: int | None = None) -> int:
    """NumberOfAcceleratorDevicesRequired of an LLM component: as given, else the devices its
    tensor-parallel group spans — GPUs, or Neuron devices (each holds neuron_cores_per_chip of the
    NeuronCores the degree counts)."""
    if accelerators is not None:
        return accelerators
    per = devices(instance_type).per_accelerator
    return max(1, math.ceil(tensor_parallel_degree(spec, instance_type) / per))
