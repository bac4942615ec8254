"""The spec of a large language model served by an LLM container (`endpoints.<name>.llm`, or an
inference component's `llm`), and of the optimization job that prepares it (`llm.optimize`).

The container family names are sagemaker-core's `image_uris` frameworks, so the image resolves
offline per region and instance type as the Deep Learning Containers do; the settings are the ones
every family documents (tensor-parallel degree, batch, token limits, dtype, quantization), rendered
as the environment of the family's own server (llm/environment.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sagestack.core.model import StrictModel
from sagestack.core.types import HostingInstanceType, Seconds

# sagemaker-core image_uri_config names (offline): the family's image per region and instance type.
Container = Literal[
    "djl-lmi",  # DJL Serving LMI: vLLM / LMI-Dist rolling batch on NVIDIA
    "djl-tensorrtllm",  # DJL Serving with TensorRT-LLM (NVIDIA only)
    "djl-neuronx",  # DJL Serving with transformers-neuronx (Inferentia2 / Trainium)
    "huggingface-llm",  # Hugging Face TGI (NVIDIA)
    "huggingface-llm-neuronx",  # TGI on optimum-neuron (Inferentia2 / Trainium)
    "huggingface-vllm",  # Hugging Face's vLLM container
    "vllm",  # AWS's vLLM DLC
    "sglang",  # AWS's SGLang DLC
    "sagemaker-tritonserver",  # NVIDIA Triton Inference Server
]

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
Quantization = Literal["awq", "gptq", "fp8", "bitsandbytes"]


class WeightsSpec(StrictModel):
    """Where the model's weights are: an S3 prefix of uncompressed files (config.json,
    *.safetensors, the tokenizer), loaded as ModelDataSource.S3DataSource with CompressionType None."""

    s3: str = Field(
        min_length=1,
        description="a key prefix in the project's artifact bucket (e.g. models/chat/), or an s3:// URI",
    )
    size_gb: float | None = Field(
        default=None,
        gt=0,
        description="the weights' size on disk, if known (default: parameters x bytes per dtype)",
    )
    kms_key: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$",
        description="the ARN of the KMS key that encrypts weights in another bucket (an s3:// URI): the "
        "execution role may decrypt with it through S3 (the key's own policy must allow this account)",
    )


class OptimizeSpec(StrictModel):
    """A CreateOptimizationJob run by the endpoint's optimization pipeline: it reads the weights,
    writes the optimized model under optimized/<endpoint>/ and registers it as a model package,
    which promotion then pins (`model_package:`), as a compiled model's is."""

    quantization: Literal["awq", "fp8"] | None = Field(
        default=None, description="ModelQuantizationConfig: OPTION_QUANTIZE for the LMI container"
    )
    compilation: bool = Field(
        default=False,
        description="ModelCompilationConfig: TensorRT-LLM on NVIDIA, Neuron on Inferentia / Trainium",
    )
    speculative_decoding: Literal["EAGLE"] | None = Field(
        default=None, description="ModelSpeculativeDecodingConfig.Technique"
    )
    sharding: bool = Field(
        default=False, description="ModelShardingConfig: pre-shard the weights for the tensor-parallel degree"
    )
    instance_type: HostingInstanceType | None = Field(
        default=None,
        description="the DeploymentInstanceType the model is optimized for (default: the endpoint's first)",
    )
    max_runtime: Seconds = Field(default=3600, ge=1, description="StoppingCondition.MaxRuntimeInSeconds")
    environment: dict[str, str] = Field(
        default_factory=dict, description="OptimizationEnvironment: extra variables for the job"
    )

    @model_validator(mode="after")
    def _something(self) -> OptimizeSpec:
        if not (self.quantization or self.compilation or self.speculative_decoding or self.sharding):
            raise ValueError(
                "optimize: give at least one of quantization, compilation, speculative_decoding, sharding"
            )
        return self


class LlmSpec(StrictModel):
    """A large language model in an LLM serving container."""

    container: Container = Field(description="the serving container family (sagemaker-core's name)")
    version: str | None = Field(
        default=None, description="the container version (default: the newest sagemaker-core knows)"
    )
    weights: WeightsSpec
    parameters: float = Field(gt=0, description="the model's parameter count, e.g. 8.0e9")
    dtype: Dtype = Field(default="fp16", description="the dtype the weights are served in")
    tensor_parallel_degree: int | None = Field(
        default=None,
        ge=1,
        description="accelerators one copy of the model spans (default: every GPU, or every "
        "NeuronCore, of the instance; a component's accelerators)",
    )
    max_batch_size: int | None = Field(
        default=None, ge=1, le=4096, description="concurrent sequences (rolling / continuous batch)"
    )
    max_input_tokens: int | None = Field(default=None, ge=1, description="the longest prompt accepted")
    max_total_tokens: int | None = Field(
        default=None, ge=2, description="prompt plus generated tokens per sequence (the context length)"
    )
    quantization: Quantization | None = Field(
        default=None,
        description="load-time quantization by the container (weights already quantized, or on the fly)",
    )
    kv_cache_headroom: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="the share of accelerator memory the server leaves unused (default: the family's "
        "own, e.g. 10 % for vLLM's gpu_memory_utilization 0.9); the KV cache and activations are "
        "counted on their own",
    )
    num_layers: int | None = Field(
        default=None, ge=1, description="the model's layers (config.json num_hidden_layers), for its KV cache"
    )
    num_kv_heads: int | None = Field(
        default=None,
        ge=1,
        description="key-value heads per layer (config.json num_key_value_heads; fewer than the attention "
        "heads under grouped-query attention), for its KV cache",
    )
    head_dim: int | None = Field(
        default=None, ge=1, description="the size of one attention head (hidden_size / num_attention_heads)"
    )
    kv_bytes_per_token: int | None = Field(
        default=None,
        ge=1,
        description="the KV cache's bytes per token, all layers, keys and values (instead of the shape)",
    )
    kv_cache_dtype: Literal["fp8"] | None = Field(
        default=None,
        description="fp8: keep the KV cache in 8 bits, half its 16-bit size (vLLM, SGLang, TGI; default: "
        "the dtype the model computes in)",
    )
    download_timeout: Seconds | None = Field(
        default=None,
        ge=60,
        le=3600,
        description="ModelDataDownloadTimeoutInSeconds (default: from the weights' size)",
    )
    startup_timeout: Seconds | None = Field(
        default=None,
        ge=60,
        le=3600,
        description="ContainerStartupHealthCheckTimeoutInSeconds (default: from the weights' size)",
    )
    environment: dict[str, str] = Field(
        default_factory=dict, description="more of the container's own variables, passed as given"
    )
    optimize: OptimizeSpec | None = Field(
        default=None, description="an optimization job (quantize, compile, speculative decoding, shard)"
    )

    @model_validator(mode="after")
    def _tokens(self) -> LlmSpec:
        if (
            self.max_input_tokens is not None
            and self.max_total_tokens is not None
            and self.max_input_tokens >= self.max_total_tokens
        ):
            raise ValueError(
                f"max_input_tokens ({self.max_input_tokens}) must be below max_total_tokens "
                f"({self.max_total_tokens}): the total counts the prompt and at least one generated token"
            )
        return self


class ShadowSpec(StrictModel):
    """A shadow variant (ShadowProductionVariants): a candidate model package receives a copy of
    the production traffic; its answers are logged, never returned. `sagestack promote --shadow`
    pins a candidate here; `sagestack promote` then makes it production."""

    model_package: str = Field(
        pattern=r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:model-package/.+$",
        description="the candidate model package ARN",
    )
    sampling_percent: int = Field(
        default=100, ge=1, le=100, description="the share of production requests copied to the shadow"
    )
    instance_type: HostingInstanceType | None = Field(
        default=None, description="default: the production variant's first instance type"
    )
    initial_instance_count: int = Field(default=1, ge=1)
