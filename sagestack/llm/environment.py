"""An LLM spec's settings as the environment of its container family's own server.

Where each mapping comes from:

- DJL Serving LMI (djl-lmi, djl-tensorrtllm, djl-neuronx): every `OPTION_<NAME>` variable is the
  serving.properties key `option.<name>` (docs.djl.ai, LMI "Container and Model Configurations" and
  its backend user guides): HF_MODEL_ID (the model's location, /opt/ml/model where SageMaker
  mounts ModelDataSource), OPTION_TENSOR_PARALLEL_DEGREE, OPTION_ROLLING_BATCH (vllm on LMI, trtllm
  on TensorRT-LLM, auto on Neuron), OPTION_MAX_ROLLING_BATCH_SIZE, OPTION_MAX_MODEL_LEN (vLLM's
  context length), OPTION_MAX_INPUT_LEN / OPTION_MAX_OUTPUT_LEN (TensorRT-LLM's engine limits),
  OPTION_N_POSITIONS (transformers-neuronx's context length), OPTION_DTYPE, OPTION_QUANTIZE.
- Hugging Face TGI (huggingface-llm): the SageMaker entrypoint maps SM_NUM_GPUS to NUM_SHARD and
  HF_MODEL_QUANTIZE to QUANTIZE; MAX_INPUT_TOKENS (MAX_INPUT_LENGTH before TGI 2.1),
  MAX_TOTAL_TOKENS, MAX_CONCURRENT_REQUESTS, MAX_BATCH_PREFILL_TOKENS, KV_CACHE_DTYPE and DTYPE are
  the launcher's own flags as variables (text-generation-launcher --help). TGI refuses --dtype with --quantize.
- TGI on optimum-neuron (huggingface-llm-neuronx): HF_NUM_CORES, HF_AUTO_CAST_TYPE, MAX_BATCH_SIZE,
  MAX_INPUT_TOKENS (MAX_INPUT_LENGTH before 0.0.25's TGI 2.1), MAX_TOTAL_TOKENS (optimum-neuron's
  "Deploy on SageMaker" guide).
- AWS's vLLM DLC (vllm) and Hugging Face's vLLM container (huggingface-vllm): the SageMaker
  entrypoint turns every SM_VLLM_<NAME> into `vllm serve --<name>` (vLLM's
  examples/online_serving/sagemaker-entrypoint.sh; AWS DLC docs, vLLM "Configuration"):
  SM_VLLM_MODEL, SM_VLLM_TENSOR_PARALLEL_SIZE, SM_VLLM_MAX_NUM_SEQS, SM_VLLM_MAX_MODEL_LEN,
  SM_VLLM_DTYPE, SM_VLLM_QUANTIZATION, SM_VLLM_KV_CACHE_DTYPE (`--kv-cache-dtype fp8`).
- AWS's SGLang DLC (sglang): SM_SGLANG_<NAME> becomes `--<name>` of sglang.launch_server in the same
  way: SM_SGLANG_MODEL_PATH, SM_SGLANG_TP_SIZE, SM_SGLANG_MAX_RUNNING_REQUESTS,
  SM_SGLANG_CONTEXT_LENGTH, SM_SGLANG_DTYPE, SM_SGLANG_QUANTIZATION, SM_SGLANG_KV_CACHE_DTYPE
  (its fp8 is spelled fp8_e5m2 or fp8_e4m3).
- NVIDIA Triton (sagemaker-tritonserver): the model repository's config.pbtxt holds the backend's
  settings (tensor parallelism, batch, limits); the environment only names the model
  (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME). `unrendered` lists what the spec sets but the family's
  environment cannot say, which the rules warn about.

`spec.environment` is added last: the user's word wins (a key that collides with a rendered one is
a rule warning).
"""

from __future__ import annotations

from collections.abc import Callable

from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import ENGINES, tensor_parallel_degree

MODEL_DIR = "/opt/ml/model"  # where SageMaker mounts ModelDataSource (uncompressed S3 prefix)
_TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_LMI_DTYPE = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}
_TGI_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}  # the launcher's --dtype choices

Renderer = Callable[[LlmSpec, int], dict[str, str]]


def _set(env: dict[str, str], key: str, value: object | None) -> None:
    if value is not None:
        env[key] = str(value)


def _quantize(spec: LlmSpec) -> str | None:
    """The load-time quantization: as given, or fp8 for an fp8 dtype."""
    return spec.quantization or ("fp8" if spec.dtype == "fp8" else None)


def _lmi(spec: LlmSpec, tp: int) -> dict[str, str]:
    env = {"HF_MODEL_ID": MODEL_DIR, "OPTION_TENSOR_PARALLEL_DEGREE": str(tp)}
    if spec.container == "djl-neuronx":
        env["OPTION_ROLLING_BATCH"] = "auto"
        _set(env, "OPTION_N_POSITIONS", spec.max_total_tokens)
    elif spec.container == "djl-tensorrtllm":
        env["OPTION_ROLLING_BATCH"] = "trtllm"
        _set(env, "OPTION_MAX_INPUT_LEN", spec.max_input_tokens)
        if spec.max_total_tokens is not None and spec.max_input_tokens is not None:
            env["OPTION_MAX_OUTPUT_LEN"] = str(spec.max_total_tokens - spec.max_input_tokens)
    else:
        env["OPTION_ROLLING_BATCH"] = "vllm"
        _set(env, "OPTION_MAX_MODEL_LEN", spec.max_total_tokens)
    _set(env, "OPTION_MAX_ROLLING_BATCH_SIZE", spec.max_batch_size)
    _set(env, "OPTION_DTYPE", _LMI_DTYPE.get(spec.dtype))
    _set(env, "OPTION_QUANTIZE", _quantize(spec))
    return env


def _tgi_input_key(spec: LlmSpec, renamed_in: tuple[int, ...]) -> str:
    version = tuple(int(p) for p in (spec.version or "999").split(".") if p.isdigit())
    return "MAX_INPUT_TOKENS" if version >= renamed_in else "MAX_INPUT_LENGTH"


def _tgi(spec: LlmSpec, tp: int) -> dict[str, str]:
    env = {"HF_MODEL_ID": MODEL_DIR, "SM_NUM_GPUS": str(tp)}
    _set(env, _tgi_input_key(spec, (2, 1)), spec.max_input_tokens)
    _set(env, "MAX_TOTAL_TOKENS", spec.max_total_tokens)
    if spec.max_input_tokens is not None:  # TGI 2.x's own default, which older versions lacked
        env["MAX_BATCH_PREFILL_TOKENS"] = str(spec.max_input_tokens + 50)
    _set(env, "MAX_CONCURRENT_REQUESTS", spec.max_batch_size)
    _set(env, "KV_CACHE_DTYPE", spec.kv_cache_dtype)
    quantize = _quantize(spec)
    if quantize is None:
        _set(env, "DTYPE", _TGI_DTYPE.get(spec.dtype))
    else:
        env["HF_MODEL_QUANTIZE"] = quantize
    return env


def _tgi_neuronx(spec: LlmSpec, tp: int) -> dict[str, str]:
    env = {"HF_MODEL_ID": MODEL_DIR, "HF_NUM_CORES": str(tp)}
    _set(env, "HF_AUTO_CAST_TYPE", {"bf16": "bf16", "fp16": "fp16"}.get(spec.dtype))
    _set(env, "MAX_BATCH_SIZE", spec.max_batch_size)
    _set(env, _tgi_input_key(spec, (0, 0, 25)), spec.max_input_tokens)
    _set(env, "MAX_TOTAL_TOKENS", spec.max_total_tokens)
    return env


def _vllm(spec: LlmSpec, tp: int) -> dict[str, str]:
    env = {"SM_VLLM_MODEL": MODEL_DIR, "SM_VLLM_TENSOR_PARALLEL_SIZE": str(tp)}
    _set(env, "SM_VLLM_MAX_NUM_SEQS", spec.max_batch_size)
    _set(env, "SM_VLLM_MAX_MODEL_LEN", spec.max_total_tokens)
    _set(env, "SM_VLLM_DTYPE", _TORCH_DTYPE.get(spec.dtype))
    _set(env, "SM_VLLM_QUANTIZATION", _quantize(spec))
    _set(env, "SM_VLLM_KV_CACHE_DTYPE", spec.kv_cache_dtype)
    return env


def _sglang(spec: LlmSpec, tp: int) -> dict[str, str]:
    env = {"SM_SGLANG_MODEL_PATH": MODEL_DIR, "SM_SGLANG_TP_SIZE": str(tp)}
    _set(env, "SM_SGLANG_MAX_RUNNING_REQUESTS", spec.max_batch_size)
    _set(env, "SM_SGLANG_CONTEXT_LENGTH", spec.max_total_tokens)
    _set(env, "SM_SGLANG_DTYPE", _TORCH_DTYPE.get(spec.dtype))
    _set(env, "SM_SGLANG_QUANTIZATION", _quantize(spec))
    _set(env, "SM_SGLANG_KV_CACHE_DTYPE", "fp8_e5m2" if spec.kv_cache_dtype == "fp8" else None)
    return env


def _triton(spec: LlmSpec, tp: int) -> dict[str, str]:
    return {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "model"}


RENDERERS: dict[str, Renderer] = {
    "djl-lmi": _lmi,
    "djl-tensorrtllm": _lmi,
    "djl-neuronx": _lmi,
    "huggingface-llm": _tgi,
    "huggingface-llm-neuronx": _tgi_neuronx,
    "huggingface-vllm": _vllm,
    "vllm": _vllm,
    "sglang": _sglang,
    "sagemaker-tritonserver": _triton,
}


def rendered_environment(
    spec: LlmSpec, *, instance_type: str, accelerators: int | None = None
) -> dict[str, str]:
    """The spec's settings as the family's variables, without `spec.environment`."""
    tp = tensor_parallel_degree(spec, instance_type, accelerators)
    return RENDERERS[spec.container](spec, tp)


def container_environment(
    spec: LlmSpec, *, instance_type: str, accelerators: int | None = None
) -> dict[str, str]:
    """The container's Environment: the rendered settings, then `spec.environment` (which wins)."""
    return {
        **rendered_environment(spec, instance_type=instance_type, accelerators=accelerators),
        **spec.environment,
    }


def unrendered(spec: LlmSpec) -> list[str]:
    """The spec's settings the family's environment has no variable for (ignored by the container)."""
    if spec.container == "sagemaker-tritonserver":
        fields = ("tensor_parallel_degree", "max_batch_size", "max_input_tokens", "max_total_tokens")
        return [f for f in fields if getattr(spec, f) is not None] + (
            ["quantization"] if spec.quantization else []
        )
    missing = []
    if spec.kv_cache_dtype is not None and ENGINES[spec.container].kv_dtype is None:
        missing.append("kv_cache_dtype")
    if spec.dtype == "fp32" and spec.container in ("huggingface-llm", "huggingface-llm-neuronx"):
        missing.append("dtype")  # TGI's --dtype and HF_AUTO_CAST_TYPE take 16-bit types only
    if spec.max_input_tokens is not None and spec.container in (
        "djl-lmi",
        "djl-neuronx",
        "vllm",
        "huggingface-vllm",
        "sglang",
    ):
        missing.append("max_input_tokens")
    if (
        spec.max_total_tokens is not None
        and spec.max_input_tokens is None
        and spec.container == "djl-tensorrtllm"
    ):
        missing.append("max_total_tokens")
    return missing
