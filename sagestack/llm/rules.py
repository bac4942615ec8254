"""Rules about LLMs served by an endpoint (`endpoints.<name>.llm`) or an inference component
(`components.<name>.llm`): the container family, its image, the tensor-parallel degree and the
memory must agree with every instance pool before an endpoint is paid for and times out loading."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.errors import Path_
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.llm.advice import advice, smallest_degree
from sagestack.llm.environment import rendered_environment, unrendered
from sagestack.llm.images import LlmImageError, instance_problem, llm_image_uri
from sagestack.llm.models import LlmSpec
from sagestack.llm.shape import ModelShape, local_weights_dir, shape_of
from sagestack.llm.sizing import ENGINES, Fit, devices, memory_fit, tensor_parallel_degree

# Quantizations each family loads (its documentation's list: LMI's option.quantize for vLLM and
# TensorRT-LLM, TGI's --quantize, vLLM's and SGLang's --quantization). The Neuron families and
# Triton take none of these (Triton's model repository sets its own).
QUANTIZATIONS: dict[str, frozenset[str]] = {
    "djl-lmi": frozenset({"awq", "gptq", "fp8", "bitsandbytes"}),
    "djl-tensorrtllm": frozenset({"awq", "fp8"}),
    "huggingface-llm": frozenset({"awq", "gptq", "fp8", "bitsandbytes"}),
    "huggingface-vllm": frozenset({"awq", "gptq", "fp8", "bitsandbytes"}),
    "vllm": frozenset({"awq", "gptq", "fp8", "bitsandbytes"}),
    "sglang": frozenset({"awq", "gptq", "fp8", "bitsandbytes"}),
}
# NVIDIA compute capability of the catalog's accelerator models (developer.nvidia.com/cuda-gpus).
# FP8 tensor cores need 8.9 (Ada, Hopper, Blackwell); vLLM, TGI and SGLang also run FP8 weights on
# Ampere (8.0) as weight-only W8A16 through Marlin kernels; TensorRT-LLM's FP8 needs 8.9.
COMPUTE_CAPABILITY = {
    "K80": 3.7,
    "V100": 7.0,
    "T4": 7.5,
    "A100": 8.0,
    "A10G": 8.6,
    "L4": 8.9,
    "L40S": 8.9,
    "H100": 9.0,
    "H200": 9.0,
    "B200": 10.0,
}
FP8_NATIVE, FP8_MARLIN = 8.9, 8.0
# Families an optimization job's compiled model runs in: TensorRT-LLM engines (NVIDIA), Neuron
# artifacts (Inferentia2 / Trainium) — SageMaker's "Inference optimization" compilation section.
COMPILED_BY = {"djl-tensorrtllm": "TensorRT-LLM", "djl-neuronx": "Neuron"}


@dataclass(frozen=True)
class Served:
    """One LLM of the spec: where it is, what serves it, on which pool types."""

    path: Path_  # the llm: entry
    spec: LlmSpec
    types: tuple[str, ...]  # the endpoint's instance pools
    accelerators: int | None  # a component's devices per copy

    def type_path(self, endpoint: str, i: int) -> Path_:
        """The i-th pool's entry (instance_type itself when it is one type)."""
        at = ("endpoints", endpoint, "instance_type")
        return (*at, i) if len(self.types) > 1 else at


def served(ctx: RuleContext) -> Iterator[tuple[str, Served]]:
    for name, ep in ctx.spec.endpoints.items():
        types = tuple(ep.instance_type or ())
        if ep.llm is not None:
            yield name, Served(("endpoints", name, "llm"), ep.llm, types, None)
        for cname, c in ep.components.items():
            if c.llm is not None:
                yield (
                    name,
                    Served(("endpoints", name, "components", cname, "llm"), c.llm, types, c.accelerators),
                )


def _known(itype: str) -> bool:
    try:
        lookup(itype)
    except KeyError:
        return False
    return True


def _runs(s: Served, itype: str) -> bool:
    """Whether sizing `itype` means anything: known, and the container runs there (else
    llm-container-instance reports it)."""
    return _known(itype) and instance_problem(s.spec.container, itype) is None


@rule(
    "llm-container-instance",
    "error",
    "an LLM container family runs on every instance pool's accelerator",
    why=(
        "The Neuron families (djl-neuronx, huggingface-llm-neuronx) run only on Inferentia2 and Trainium "
        "(NeuronCore-v2); the CUDA families (LMI, TensorRT-LLM, TGI, vLLM, SGLang) only on NVIDIA GPUs; "
        "only Triton has a CPU image. A mismatch fails the container at start, after the instance is paid."
    ),
    fix="Choose instance types of the family's accelerator, or the family built for the instance's.",
)
def llm_container_instance(ctx: RuleContext) -> Iterator[Finding]:
    for name, s in served(ctx):
        for i, itype in enumerate(s.types):
            problem = instance_problem(s.spec.container, itype)
            if problem is not None:
                yield Finding(s.type_path(name, i), f"{problem}: the container cannot start there")


@rule(
    "llm-image",
    "error",
    "the LLM container's image exists for the region, version and every instance pool",
    why=(
        "The image is sagemaker-core's for the family, version, region and processor; a version or "
        "region it does not have leaves the model without an image."
    ),
    fix="Use a version the finding lists (or none: the newest), in a region the family is published in.",
)
def llm_image(ctx: RuleContext) -> Iterator[Finding]:
    for _name, s in served(ctx):
        seen: set[str] = set()
        for itype in s.types:
            if not _runs(s, itype):
                continue
            try:
                llm_image_uri(s.spec, region=ctx.spec.region, instance_type=itype)
            except LlmImageError as e:
                if str(e) not in seen:
                    seen.add(str(e))
                    where = "version" if s.spec.version is not None and "version" in str(e) else "container"
                    yield Finding((*s.path, where), str(e))


@rule(
    "llm-tensor-parallel",
    "error",
    "the tensor-parallel degree divides every pool type's GPUs or NeuronCores (or the component's)",
    why=(
        "A copy of the model is sharded over tensor_parallel_degree GPUs or NeuronCores; the servers "
        "refuse a degree above the devices there are, and one that does not divide them leaves devices "
        "idle (vLLM, TGI and TensorRT-LLM shard attention heads evenly, so the degree is a power of two "
        "in practice)."
    ),
    fix="Give a degree that divides the devices of every instance type (or leave it out: every device).",
)
def llm_tensor_parallel(ctx: RuleContext) -> Iterator[Finding]:
    for name, s in served(ctx):
        for i, itype in enumerate(s.types):
            if not _runs(s, itype):
                continue
            d = devices(itype, s.accelerators)
            tp = tensor_parallel_degree(s.spec, itype, s.accelerators)
            if d.count == 0 or (tp <= d.count and d.count % tp == 0):
                continue
            of = f"the component's {s.accelerators} accelerator(s)" if s.accelerators else itype
            divisors = [n for n in range(1, d.count + 1) if d.count % n == 0]
            where = (
                (*s.path, "tensor_parallel_degree") if s.spec.tensor_parallel_degree else s.type_path(name, i)
            )
            yield Finding(
                where,
                f"tensor_parallel_degree {tp} {'is more than' if tp > d.count else 'does not divide'} the "
                f"{d.count} {d.name} device(s) of {of}; "
                f"use one of {', '.join(map(str, divisors))}",
            )


@rule(
    "llm-memory-fit",
    "error",
    "the weights, the KV cache and the activations fit the accelerator memory one copy spans, on every "
    "pool type",
    why=(
        "The container loads the weights onto the tensor-parallel group's accelerators, then allocates "
        "the KV cache for its token limit and batch (2 x layers x KV heads x head size x bytes per token "
        "and sequence) and its activations, within the share of memory its server uses (vLLM's "
        "gpu_memory_utilization 0.9 …); what does not fit fails the container's start (CUDA or Neuron "
        "out of memory, or vLLM's 'max seq len is larger than the KV cache') after the download's wait."
    ),
    fix="Use an instance type the finding lists (cheapest first, with its tensor_parallel_degree), the "
    "batch or token limit it says fits, or a quantization (awq / gptq: 4-bit; fp8: 8-bit) or "
    "kv_cache_dtype: fp8; state num_layers, num_kv_heads and head_dim when the shape is an estimate.",
)
def llm_memory_fit(ctx: RuleContext) -> Iterator[Finding]:
    for name, s in served(ctx):
        shape = shape_of(s.spec, local_weights_dir(ctx.root, ctx.env, s.spec))
        for i, itype in enumerate(s.types):
            if not _runs(s, itype):
                continue
            fit = memory_fit(s.spec, itype, s.accelerators, shape)
            d = devices(itype, s.accelerators)
            if fit.ok or d.gib_each is None:
                continue  # fits, or the catalog does not know the memory
            yield Finding(s.type_path(name, i), _memory_message(s, itype, fit, shape))


def _memory_message(s: Served, itype: str, fit: Fit, shape: ModelShape) -> str:
    d = devices(itype, s.accelerators)
    spans = min(fit.tensor_parallel_degree, d.count)
    engine = ENGINES[s.spec.container].name
    over = (
        f"{spans} x {d.gib_each:.1f} GiB {d.name}, {fit.fraction:.0%} used by {engine}"
        if d.count
        else "host memory"
    )
    source = shape.source + (f"; {shape.note}" if shape.note else "")
    ways = advice(s.spec, fit, itype, shape, QUANTIZATIONS.get(s.spec.container, frozenset()))
    if d.count > fit.tensor_parallel_degree:
        tp = smallest_degree(s.spec, itype, s.accelerators, shape)
        if tp is not None:
            ways.insert(0, f"tensor_parallel_degree {tp} on {itype}")
    return (
        f"{s.spec.parameters:g} parameters in {s.spec.dtype}: {fit.weights_gib:.1f} GiB of weights + "
        f"{fit.kv_cache_gib:.1f} GiB of KV cache + {fit.activations_gib:.1f} GiB of activations = "
        f"{fit.needed_gib:.1f} GiB; one copy on {itype} has {fit.available_gib:.1f} GiB ({over}). "
        f"KV cache: {fit.kv.formula()}; shape: {source}. Would fit: {'; '.join(ways)}"
    )


@rule(
    "llm-endpoint-shape",
    "error",
    "an LLM endpoint serves on instances, with no model:, compile: or batching:",
    why=(
        "model:, compile: and batching: configure the PyTorch inference container and its Neo compilation, "
        "which an LLM container does not run; serverless endpoints have no accelerator and at most 6 GB."
    ),
    fix="Remove model:, compile: and batching: from the LLM endpoint (the llm: settings batch), and give "
    "instance_type instead of serverless:.",
)
def llm_endpoint_shape(ctx: RuleContext) -> Iterator[Finding]:
    for name, ep in ctx.spec.endpoints.items():
        has_llm = ep.llm is not None or any(c.llm is not None for c in ep.components.values())
        if not has_llm:
            continue
        path = ("endpoints", name)
        for key in ("model", "compile", "batching"):
            if getattr(ep, key) is not None:
                yield Finding(
                    (*path, key),
                    f"{key}: configures the PyTorch inference container; an LLM endpoint runs its family's "
                    "server (llm.max_batch_size batches): remove it",
                )
        if ep.serverless is not None:
            yield Finding(
                (*path, "serverless"),
                "serverless endpoints have no accelerator and at most 6 GB of memory: serve an LLM on "
                "instance_type (a GPU, Inferentia2 or Trainium type)",
            )


@rule(
    "llm-quantization",
    "error",
    "the quantization (and a quantized dtype) is one the family loads on every pool type's GPU",
    why=(
        "Each family loads its own list of quantizations; the Neuron families and Triton take none of "
        "these. FP8 needs FP8 tensor cores (compute capability 8.9: L4, L40S, H100, H200, B200) for "
        "TensorRT-LLM, and at least Ampere (8.0, weight-only through Marlin) for vLLM, TGI and SGLang; the "
        "catalog's accelerator model decides. An int8 / int4 dtype is a quantization the container applies."
    ),
    fix="Use a quantization the finding lists, on a GPU that runs it, and name it in quantization:.",
)
def llm_quantization(ctx: RuleContext) -> Iterator[Finding]:
    for name, s in served(ctx):
        spec = s.spec
        if spec.dtype in ("int8", "int4") and spec.quantization is None:
            yield Finding(
                (*s.path, "dtype"),
                f"dtype {spec.dtype} is quantized weights: name the quantization that loads them "
                "(quantization: awq or gptq for 4-bit, bitsandbytes for 8-bit)",
            )
        quant = spec.quantization or ("fp8" if spec.dtype == "fp8" else None)
        if quant is None:
            continue
        allowed = QUANTIZATIONS.get(spec.container, frozenset())
        if quant not in allowed:
            listed = ", ".join(sorted(allowed)) or "none of these (its own tools prepare quantized models)"
            yield Finding((*s.path, "quantization"), f"{spec.container} loads {listed}; not {quant}")
            continue
        if quant == "fp8":
            yield from _fp8(name, s)


def _fp8(name: str, s: Served) -> Iterator[Finding]:
    floor = FP8_NATIVE if s.spec.container == "djl-tensorrtllm" else FP8_MARLIN
    for i, itype in enumerate(s.types):
        acc = lookup(itype).accelerator if _known(itype) else None
        cc = COMPUTE_CAPABILITY.get(acc.model) if acc is not None else None
        if cc is not None and cc < floor:
            fits = ", ".join(m for m, c in COMPUTE_CAPABILITY.items() if c >= floor)
            yield Finding(
                s.type_path(name, i),
                f"fp8 on {s.spec.container} needs compute capability {floor} ({fits}); {itype}'s "
                f"{acc.model if acc else '?'} has {cc}",
            )


@rule(
    "llm-optimize-compilation",
    "error",
    "an optimization job compiles for a family that can run the compiled model",
    why=(
        "CreateOptimizationJob's compilation writes TensorRT-LLM engines (NVIDIA) or Neuron artifacts "
        "(Inferentia2 / Trainium), which only the LMI TensorRT-LLM and LMI Neuron containers load."
    ),
    fix="Use container: djl-tensorrtllm (NVIDIA) or djl-neuronx (Inferentia2 / Trainium) with "
    "optimize.compilation, or drop compilation.",
)
def llm_optimize_compilation(ctx: RuleContext) -> Iterator[Finding]:
    for _name, s in served(ctx):
        opt = s.spec.optimize
        if opt is None or not opt.compilation or s.spec.container in COMPILED_BY:
            continue
        yield Finding(
            (*s.path, "optimize", "compilation"),
            f"{s.spec.container} cannot load a compiled model: compilation makes TensorRT-LLM engines for "
            "djl-tensorrtllm (NVIDIA) or Neuron artifacts for djl-neuronx (Inferentia2 / Trainium)",
        )


@rule(
    "llm-environment",
    "warning",
    "llm.environment does not silently replace a rendered setting; every setting reaches the container",
    why=(
        "sagestack renders the llm: settings as the family's variables and adds llm.environment last, so "
        "a key of both replaces the setting unseen (sizing and the rules still use the setting); a setting "
        "the family has no variable for is ignored by the container."
    ),
    fix="Set the value through the llm: field (tensor_parallel_degree, max_total_tokens, …) rather than "
    "its variable, and leave out settings the finding says the family ignores.",
)
def llm_environment(ctx: RuleContext) -> Iterator[Finding]:
    for _name, s in served(ctx):
        if not s.types or not _known(s.types[0]):
            continue
        rendered = rendered_environment(s.spec, instance_type=s.types[0], accelerators=s.accelerators)
        for key in sorted(set(rendered) & set(s.spec.environment)):
            yield Finding(
                (*s.path, "environment", key),
                f"{key} replaces the value sagestack renders from the llm: settings ({rendered[key]!r} -> "
                f"{s.spec.environment[key]!r})",
            )
        for field in unrendered(s.spec):
            yield Finding(
                (*s.path, field),
                f"{s.spec.container} has no environment variable for {field}: the container ignores it",
            )


@rule(
    "llm-weights-other-bucket",
    "warning",
    "weights in another bucket name the KMS key that encrypts them, if one does",
    why=(
        "Weights under an s3:// URI are not the project's: the execution role is granted read on exactly "
        "that prefix, and decrypts with the project's key only. Objects there encrypted with another "
        "KMS key fail to download (AccessDenied on kms:Decrypt) when the endpoint starts, unless the "
        "role may use that key too. Another account's bucket and key must also allow this account "
        "(the bucket policy on the prefix, the key policy for kms:Decrypt through S3)."
    ),
    fix="Add weights.kms_key: <the key's ARN> when the objects are encrypted with a KMS key (SSE-KMS); "
    "leave it out for SSE-S3. Or copy the weights into the project's bucket and give a key prefix.",
)
def llm_weights_other_bucket(ctx: RuleContext) -> Iterator[Finding]:
    for _name, s in served(ctx):
        uri = s.spec.weights.s3
        if uri.startswith("s3://") and s.spec.weights.kms_key is None:
            bucket = uri.removeprefix("s3://").split("/", 1)[0]
            yield Finding(
                (*s.path, "weights", "s3"),
                f"the weights are in bucket {bucket}, not the project's: if it encrypts them with a KMS "
                "key, add weights.kms_key: <that key's ARN> (the role may then decrypt through S3), and "
                "make sure its bucket and key policies allow this account",
            )
