"""How big an LLM is, what one copy spans, whether it fits, and how long it takes to arrive.

- The weights: `weights.size_gb` when given (GB on disk), else parameters x bytes per parameter of
  the dtype — or of the load-time quantization when that is smaller (awq / gptq: 4-bit; fp8 and
  bitsandbytes: 8-bit).
- A copy spans `tensor_parallel_degree` devices: GPUs, or NeuronCores on Inferentia2 / Trainium
  (transformers-neuronx and optimum-neuron shard over NeuronCores). By default every one of the
  instance, or those of an inference component's `accelerators` (Neuron devices hold
  `neuron_cores_per_chip` cores each).
- The KV cache: bytes per token (llm/shape.py: the model's layers, KV heads and head size, or a
  stated size) x the token limit x the batch, each as the container will read it — the family's own
  variable in `llm.environment` when given (ENGINES), else the spec's field. Without a token limit,
  the model's own context length (config.json's max_position_embeddings), which vLLM and TGI take;
  without a batch, one sequence (the least a server must hold at full length).
- It fits when weights + KV cache + the activations' and CUDA graphs' share (ACTIVATIONS_GIB per
  device) fit the part of the devices' memory the server uses: the catalog's per-accelerator
  memory_gib (a NeuronCore has its chip's memory divided by its cores; a CPU instance its host memory)
  x the family's memory fraction (vLLM's gpu_memory_utilization 0.9 …; `kv_cache_headroom` is the
  share left unused when given, the family's variable when set in `llm.environment`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.llm.images import NEURON_FAMILIES
from sagestack.llm.models import LlmSpec
from sagestack.llm.shape import KV_DTYPE_BYTES, ModelShape, kv_dtype, shape_of

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

# Activations at the prefill batch, CUDA graphs, NCCL buffers and the CUDA context, per GPU: what
# vLLM's start-up profile and TGI's warm-up take beside the weights and the KV cache (about 1 GiB for
# 7-13B models at the default prefill sizes). Neuron compiles static graphs whose buffers are small.
ACTIVATIONS_GIB, NEURON_ACTIVATIONS_GIB = 1.0, 0.0


@dataclass(frozen=True)
class Engine:
    """What a family's server reads for its memory: the variables of its token limit (a sum of
    several for TensorRT-LLM's input + output), its batch, the share of device memory it uses, and its
    KV-cache dtype (None: no variable sagestack knows), and the share it uses by default."""

    name: str
    tokens: tuple[str, ...]
    batch: str | None
    fraction: str | None
    default_fraction: float
    kv_dtype: str | None = None


_VLLM = Engine(
    "vLLM (gpu_memory_utilization 0.9)",
    ("SM_VLLM_MAX_MODEL_LEN",),
    "SM_VLLM_MAX_NUM_SEQS",
    "SM_VLLM_GPU_MEMORY_UTILIZATION",
    0.9,
    "SM_VLLM_KV_CACHE_DTYPE",
)
ENGINES: dict[str, Engine] = {
    "djl-lmi": Engine(
        "LMI vLLM (gpu_memory_utilization 0.9)",
        ("OPTION_MAX_MODEL_LEN",),
        "OPTION_MAX_ROLLING_BATCH_SIZE",
        "OPTION_GPU_MEMORY_UTILIZATION",
        0.9,
    ),
    "djl-tensorrtllm": Engine(
        "TensorRT-LLM (kv_cache_free_gpu_mem_fraction 0.9)",
        ("OPTION_MAX_INPUT_LEN", "OPTION_MAX_OUTPUT_LEN"),
        "OPTION_MAX_ROLLING_BATCH_SIZE",
        "OPTION_KV_CACHE_FREE_GPU_MEM_FRACTION",
        0.9,
    ),
    "djl-neuronx": Engine(
        "transformers-neuronx", ("OPTION_N_POSITIONS",), "OPTION_MAX_ROLLING_BATCH_SIZE", None, 1.0
    ),
    "huggingface-llm": Engine(
        "TGI (CUDA_MEMORY_FRACTION 1.0)",
        ("MAX_TOTAL_TOKENS",),
        "MAX_CONCURRENT_REQUESTS",
        "CUDA_MEMORY_FRACTION",
        1.0,
        "KV_CACHE_DTYPE",
    ),
    "huggingface-llm-neuronx": Engine("optimum-neuron", ("MAX_TOTAL_TOKENS",), "MAX_BATCH_SIZE", None, 1.0),
    "vllm": _VLLM,
    "huggingface-vllm": _VLLM,
    "sglang": Engine(
        "SGLang (mem_fraction_static 0.88)",
        ("SM_SGLANG_CONTEXT_LENGTH",),
        "SM_SGLANG_MAX_RUNNING_REQUESTS",
        "SM_SGLANG_MEM_FRACTION_STATIC",
        0.88,
        "SM_SGLANG_KV_CACHE_DTYPE",
    ),
    "sagemaker-tritonserver": Engine("Triton (TensorRT-LLM's 0.9)", (), None, None, 0.9),
}


@dataclass(frozen=True)
class Devices:
    """What a tensor-parallel group is made of on one instance type."""

    count: int  # GPUs or NeuronCores of the instance (or of a component's accelerators); 0 on CPU
    gib_each: float | None  # memory per device
    name: str  # "A10G", "NeuronCore (Inferentia2)", "none"
    per_accelerator: int = 1  # devices per accelerator (NeuronCores per Neuron device)


@dataclass(frozen=True)
class KvCache:
    """The KV cache one copy holds, and what it was computed from."""

    shape: ModelShape
    dtype: str  # fp16 / bf16 / fp32 / fp8
    bytes_per_token: int
    tokens: int | None  # the token limit per sequence (None: not known, the cache not counted)
    batch: int  # sequences held at once
    tokens_from: str  # "max_total_tokens", "SM_VLLM_MAX_MODEL_LEN", "config.json …"
    batch_from: str

    @property
    def gib(self) -> float:
        return self.bytes_per_token * (self.tokens or 0) * self.batch / GIB

    def formula(self) -> str:
        """'2 (K, V) x 32 layers x … = 128 KiB per token x 8192 tokens x 32 sequences'."""
        base = self.shape.formula(KV_DTYPE_BYTES[self.dtype], self.dtype)
        if self.tokens is None:
            return f"{base}; no token limit known ({self.tokens_from}): not counted"
        sequences = f"{self.batch} sequence{'s' if self.batch != 1 else ''}"
        return f"{base} x {self.tokens} tokens ({self.tokens_from}) x {sequences} ({self.batch_from})"


@dataclass(frozen=True)
class Fit:
    """One copy of the LLM on one instance type."""

    weights_gib: float
    kv_cache_gib: float
    activations_gib: float  # per device x the devices spanned
    needed_gib: float  # weights + KV cache + activations
    available_gib: float  # the memory of the devices one copy spans that the server uses
    device_gib: float  # their whole memory
    fraction: float  # the share the server uses
    tensor_parallel_degree: int
    kv: KvCache
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


def _setting(spec: LlmSpec, names: tuple[str, ...]) -> int | None:
    """The sum of `names` in llm.environment when every one is a whole number, else None."""
    try:
        values = [int(spec.environment[n]) for n in names]
    except (KeyError, ValueError):
        return None
    return sum(values) if values and all(v > 0 for v in values) else None


def _tokens(spec: LlmSpec, engine: Engine, shape: ModelShape) -> tuple[int | None, str]:
    if (env := _setting(spec, engine.tokens)) is not None:
        return env, " + ".join(engine.tokens)
    if spec.max_total_tokens is not None:
        return spec.max_total_tokens, "max_total_tokens"
    if shape.max_positions is not None:
        return shape.max_positions, "unset: config.json's max_position_embeddings"
    return None, "max_total_tokens unset"


def kv_cache(spec: LlmSpec, shape: ModelShape | None = None) -> KvCache:
    """The KV cache of one copy: the shape's bytes per token x token limit x batch."""
    shape = shape or shape_of(spec)
    engine = ENGINES[spec.container]
    dtype = kv_dtype(spec, rendered=engine.kv_dtype is not None)  # else the container never sees it
    if engine.kv_dtype and spec.environment.get(engine.kv_dtype, "").startswith("fp8"):
        dtype = "fp8"
    tokens, tokens_from = _tokens(spec, engine, shape)
    batch, batch_from = max_batch(spec)
    per = shape.bytes_per_token(KV_DTYPE_BYTES[dtype])
    return KvCache(shape, dtype, per, tokens, batch or 1, tokens_from, batch_from)


def max_batch(spec: LlmSpec) -> tuple[int | None, str]:
    """The sequences the family's server runs at once, and where that comes from: its own variable
    in llm.environment (OPTION_MAX_ROLLING_BATCH_SIZE, MAX_CONCURRENT_REQUESTS, SM_VLLM_MAX_NUM_SEQS, ...),
    else max_batch_size; None when neither says."""
    engine = ENGINES[spec.container]
    if engine.batch and (env := _setting(spec, (engine.batch,))) is not None:
        return env, engine.batch
    if spec.max_batch_size:
        return spec.max_batch_size, "max_batch_size"
    return None, "max_batch_size unset"


def memory_fraction(spec: LlmSpec) -> float:
    """The share of device memory the family's server uses: its variable in llm.environment, else
    1 - kv_cache_headroom when given, else the family's default."""
    engine = ENGINES[spec.container]
    if engine.fraction is not None:
        try:
            value = float(spec.environment[engine.fraction])
            if 0 < value <= 1:
                return value
        except (KeyError, ValueError):
            pass
    if spec.kv_cache_headroom is not None:
        return 1 - spec.kv_cache_headroom
    return engine.default_fraction


def memory_fit(
    spec: LlmSpec, instance_type: str, accelerators: int | None = None, shape: ModelShape | None = None
) -> Fit:
    """Whether one copy's weights, KV cache and activations fit the memory the server uses of the
    devices it spans."""
    tp = tensor_parallel_degree(spec, instance_type, accelerators)
    weights = weights_gib(spec)
    kv = kv_cache(spec, shape)
    d = devices(instance_type, accelerators)
    spans = min(tp, d.count) if d.count else 1  # a degree above the devices: the tp rule
    per_device = NEURON_ACTIVATIONS_GIB if spec.container in NEURON_FAMILIES else ACTIVATIONS_GIB
    activations = per_device * spans if d.count else 0.0
    needed = weights + kv.gib + activations
    fraction = memory_fraction(spec)
    whole = float(d.gib_each) * spans if d.gib_each is not None else 0.0
    available = whole * fraction
    ok = d.gib_each is not None and needed <= available
    return Fit(weights, kv.gib, activations, needed, available, whole, fraction, tp, kv, ok)


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
