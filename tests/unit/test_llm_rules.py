"""The LLM rules and the endpoint pool rules: each with a spec that passes and one that fails
(message asserted), and the failures located at file:line:column through the real loader."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"


def llm_endpoint(instance_type: str = "ml.g5.2xlarge", **llm: object) -> str:
    fields = {"container": "djl-lmi", "weights": "{s3: models/chat/}", "parameters": "1.0e9", **llm}
    body = "".join(f"      {k}: {v}\n" for k, v in fields.items())
    return MINIMAL + f"endpoints:\n  chat:\n    instance_type: {instance_type}\n    llm:\n{body}"


def test_llm_container_instance(project):
    assert findings(project, "llm-container-instance", llm_endpoint("[ml.g5.2xlarge, ml.g6.2xlarge]")) == []
    assert findings(project, "llm-container-instance", llm_endpoint("ml.inf2.xlarge")) == [
        "endpoints.chat.instance_type: djl-lmi runs on NVIDIA GPUs; ml.inf2.xlarge has Inferentia2 "
        "(inferentia): the container cannot start there"
    ]
    neuron = llm_endpoint("[ml.inf2.xlarge, ml.trn1.2xlarge]", container="djl-neuronx", dtype="bf16")
    assert findings(project, "llm-container-instance", neuron) == []
    assert findings(
        project, "llm-container-instance", neuron.replace("ml.trn1.2xlarge", "ml.inf1.xlarge")
    ) == [
        "endpoints.chat.instance_type.1: djl-neuronx needs NeuronCore-v2 (Inferentia2 / Trainium); "
        "ml.inf1.xlarge is Inf1: the container cannot start there"
    ]
    assert findings(project, "llm-container-instance", llm_endpoint("ml.m5.xlarge", container="vllm")) == [
        "endpoints.chat.instance_type: vllm needs an accelerator (NVIDIA GPUs); ml.m5.xlarge has none (only "
        "sagemaker-tritonserver runs on CPU): the container cannot start there"
    ]
    triton = llm_endpoint("ml.m5.xlarge", container="sagemaker-tritonserver")
    assert findings(project, "llm-container-instance", triton) == []


def test_llm_image(project):
    assert findings(project, "llm-image", llm_endpoint(version='"0.36.0"')) == []
    assert findings(project, "llm-image", llm_endpoint(version='"0.37.0"')) == [
        "endpoints.chat.llm.version: djl-lmi has no version '0.37.0' in sagemaker-core 2.27.0; did you mean "
        "'0.38.0'? (known: 0.38.0, 0.36.0, 0.35.0, 0.34.0, 0.33.0, 0.32.0, 0.31.0, 0.30.0, 0.29.0, 0.28.0)"
    ]


def test_llm_tensor_parallel(project):
    ok = llm_endpoint("[ml.g5.12xlarge, ml.g6.12xlarge]", tensor_parallel_degree=2)
    assert findings(project, "llm-tensor-parallel", ok) == []
    assert findings(
        project,
        "llm-tensor-parallel",
        ok.replace("[ml.g5.12xlarge, ml.g6.12xlarge]", "[ml.g5.12xlarge, ml.g5.2xlarge]"),
    ) == [
        "endpoints.chat.llm.tensor_parallel_degree: tensor_parallel_degree 2 is more than the 1 A10G "
        "device(s) of ml.g5.2xlarge; use one of 1"
    ]
    three = llm_endpoint("ml.g5.12xlarge", tensor_parallel_degree=3)
    assert findings(project, "llm-tensor-parallel", three) == [
        "endpoints.chat.llm.tensor_parallel_degree: tensor_parallel_degree 3 does not divide the 4 A10G "
        "device(s) of ml.g5.12xlarge; use one of 1, 2, 4"
    ]


def test_llm_tensor_parallel_of_a_component_is_bounded_by_its_accelerators(project):
    comp = (
        MINIMAL + "endpoints:\n  shared:\n    instance_type: ml.g5.12xlarge\n    components:\n      chat:\n"
        "        memory_mb: 8192\n        accelerators: 2\n"
        "        llm: {container: djl-lmi, weights: {s3: m/}, parameters: 1.0e9, tensor_parallel_degree: 2}\n"
    )
    assert findings(project, "llm-tensor-parallel", comp) == []
    assert findings(
        project, "llm-tensor-parallel", comp.replace("tensor_parallel_degree: 2", "tensor_parallel_degree: 4")
    ) == [
        "endpoints.shared.components.chat.llm.tensor_parallel_degree: tensor_parallel_degree 4 is more than "
        "the 2 A10G device(s) of the component's 2 accelerator(s); use one of 1, 2"
    ]


# 13e9 fp16 parameters with no token limit: the weights and one GPU's activations against 90 % of
# an A10G (LMI's vLLM); the KV cache's shape is the nearest known model's, and not counted.
SIZED_13B = (
    "endpoints.chat.instance_type.1: 1.3e+10 parameters in fp16: 24.2 GiB of weights + 0.0 GiB of KV cache + "
    "1.0 GiB of activations = 25.2 GiB; one copy on ml.g5.2xlarge has 21.6 GiB (1 x 24.0 GiB A10G, 90% used "
    "by LMI vLLM (gpu_memory_utilization 0.9)). KV cache: 2 (K, V) x 40 layers x 40 KV heads x 128 head_dim "
    "x 2 bytes (fp16) = 800 KiB per token; no token limit known (max_total_tokens unset): not counted; shape: "
    "an estimate: Llama-2 13B's shape for 1.3e+10 parameters"
)


def test_llm_memory_fit(project):
    assert (
        findings(
            project, "llm-memory-fit", llm_endpoint("[ml.g5.12xlarge, ml.g6.12xlarge]", parameters="13.0e9")
        )
        == []
    )
    (message,) = findings(
        project, "llm-memory-fit", llm_endpoint("[ml.g5.12xlarge, ml.g5.2xlarge]", parameters="13.0e9")
    )
    assert message.startswith(SIZED_13B)
    assert message.endswith(
        "on ml.g5.2xlarge: the weights and activations alone take 25.2 GiB of 21.6; quantization: fp8 / "
        "bitsandbytes (8-bit) makes 12.1 GiB of weights, 13.1 GiB in all (fits); quantization: awq / gptq "
        "(4-bit) makes 6.1 GiB of weights, 7.1 GiB in all (fits)"
    )
    pinned = llm_endpoint("ml.g5.12xlarge", parameters="13.0e9", tensor_parallel_degree=1)
    (message,) = findings(project, "llm-memory-fit", pinned)
    assert "Would fit: tensor_parallel_degree 2 on ml.g5.12xlarge; instance types that hold it" in message
    quantized = llm_endpoint("ml.g5.2xlarge", parameters="13.0e9", quantization="awq")
    assert findings(project, "llm-memory-fit", quantized) == []


def test_llm_endpoint_shape(project):
    assert findings(project, "llm-endpoint-shape", llm_endpoint()) == []
    batched = llm_endpoint().replace("    llm:\n", "    batching: {max_batch_size: 8}\n    llm:\n")
    assert findings(project, "llm-endpoint-shape", batched) == [
        "endpoints.chat.batching: batching: configures the PyTorch inference container; an LLM endpoint runs "
        "its family's server (llm.max_batch_size batches): remove it"
    ]
    serverless = llm_endpoint().replace("    instance_type: ml.g5.2xlarge\n", "    serverless: {}\n")
    assert findings(project, "llm-endpoint-shape", serverless) == [
        "endpoints.chat.serverless: serverless endpoints have no accelerator and at most 6 GB of memory: serve "
        "an LLM on instance_type (a GPU, Inferentia2 or Trainium type)"
    ]


def test_llm_quantization(project):
    assert findings(project, "llm-quantization", llm_endpoint(quantization="awq")) == []
    assert findings(
        project, "llm-quantization", llm_endpoint(quantization="gptq", container="djl-tensorrtllm")
    ) == ["endpoints.chat.llm.quantization: djl-tensorrtllm loads awq, fp8; not gptq"]
    neuron = llm_endpoint("ml.inf2.xlarge", container="djl-neuronx", quantization="awq")
    assert findings(project, "llm-quantization", neuron) == [
        "endpoints.chat.llm.quantization: djl-neuronx loads none of these (its own tools prepare quantized "
        "models); not awq"
    ]
    assert (
        findings(
            project,
            "llm-quantization",
            llm_endpoint("ml.g6.2xlarge", quantization="fp8", container="djl-tensorrtllm"),
        )
        == []
    )
    assert findings(
        project,
        "llm-quantization",
        llm_endpoint("[ml.g6.2xlarge, ml.g5.2xlarge]", quantization="fp8", container="djl-tensorrtllm"),
    ) == [
        "endpoints.chat.instance_type.1: fp8 on djl-tensorrtllm needs compute capability 8.9 (L4, L40S, H100, "
        "H200, B200); ml.g5.2xlarge's A10G has 8.6"
    ]
    assert findings(project, "llm-quantization", llm_endpoint("ml.g5.2xlarge", dtype="fp8")) == []
    assert findings(project, "llm-quantization", llm_endpoint("ml.g4dn.xlarge", dtype="fp8"))[0].startswith(
        "endpoints.chat.instance_type: fp8 on djl-lmi needs compute capability 8.0"
    )
    assert findings(project, "llm-quantization", llm_endpoint(dtype="int4")) == [
        "endpoints.chat.llm.dtype: dtype int4 is quantized weights: name the quantization that loads them "
        "(quantization: awq or gptq for 4-bit, bitsandbytes for 8-bit)"
    ]


def test_llm_optimize_compilation(project):
    trt = llm_endpoint(container="djl-tensorrtllm", optimize="{compilation: true}")
    assert findings(project, "llm-optimize-compilation", trt) == []
    assert findings(
        project, "llm-optimize-compilation", trt.replace("djl-tensorrtllm", "huggingface-llm")
    ) == [
        "endpoints.chat.llm.optimize.compilation: huggingface-llm cannot load a compiled model: compilation makes "
        "TensorRT-LLM engines for djl-tensorrtllm (NVIDIA) or Neuron artifacts for djl-neuronx (Inferentia2 / "
        "Trainium)"
    ]


def test_llm_environment(project):
    assert findings(project, "llm-environment", llm_endpoint(environment="{HF_TOKEN: x}")) == []
    override = llm_endpoint(environment='{OPTION_TENSOR_PARALLEL_DEGREE: "2"}')
    assert findings(project, "llm-environment", override) == [
        "endpoints.chat.llm.environment.OPTION_TENSOR_PARALLEL_DEGREE: OPTION_TENSOR_PARALLEL_DEGREE replaces "
        "the value sagestack renders from the llm: settings ('1' -> '2')"
    ]
    ignored = llm_endpoint(max_input_tokens=1024, max_total_tokens=2048)
    assert findings(project, "llm-environment", ignored) == [
        "endpoints.chat.llm.max_input_tokens: djl-lmi has no environment variable for max_input_tokens: the "
        "container ignores it"
    ]


def test_endpoint_provision_timeout(project):
    assert (
        findings(
            project,
            "endpoint-provision-timeout",
            llm_endpoint("[ml.g5.2xlarge, ml.g6.2xlarge]").replace(
                "    llm:", "    provision_timeout: 600\n    llm:"
            ),
        )
        == []
    )
    one = llm_endpoint().replace("    llm:", "    provision_timeout: 600\n    llm:")
    assert findings(project, "endpoint-provision-timeout", one) == [
        "endpoints.chat.provision_timeout: provision_timeout chooses when SageMaker moves to the next instance "
        "pool; this endpoint has 1 instance type: list two or more, or remove it"
    ]


def test_endpoint_pool_accelerators(project):
    pools = (
        MINIMAL
        + f'endpoints:\n  digits:\n    model_package: "{PIN}"\n    instance_type: [ml.g5.xlarge, ml.g6.xlarge]\n'
    )
    assert findings(project, "endpoint-pool-accelerators", pools) == []
    assert findings(
        project, "endpoint-pool-accelerators", pools.replace("ml.g6.xlarge", "ml.inf2.xlarge")
    ) == [
        "endpoints.digits.instance_type.1: ml.inf2.xlarge is Inferentia2 / Trainium (Neuron), but the first pool "
        "ml.g5.xlarge is NVIDIA GPU: SageMaker would serve the same model and container on both; list only "
        "NVIDIA GPU types"
    ]


def test_endpoint_compile_family_checks_every_pool(project):
    compiled = (
        MINIMAL
        + "endpoints:\n  digits:\n    model: {from: classifier}\n    instance_type: [ml.c5.xlarge, ml.c5.2xlarge]\n"
        "    compile: {framework: PYTORCH, framework_version: '2.0', target_device: ml_c5, input_shapes: {input0: [1, 8]}}\n"
    )
    assert findings(project, "endpoint-compile-family", compiled) == []
    assert findings(
        project, "endpoint-compile-family", compiled.replace("ml.c5.2xlarge", "ml.g4dn.xlarge")
    ) == [
        "endpoints.digits.instance_type.1: ml.g4dn.xlarge cannot run a model compiled for ml_c5, which runs on "
        "ml.c5.* instances; use an ml.c5.* instance_type, or compile for ml_g4dn (target_device: ml_g4dn)"
    ]


def test_endpoint_capacity_reservation(project):
    plan = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/chat"
    ok = llm_endpoint().replace("    llm:", f'    capacity_reservation: "{plan}"\n    llm:')
    assert findings(project, "endpoint-capacity-reservation", ok) == []
    assert findings(
        project, "endpoint-capacity-reservation", ok.replace("us-east-1:1111", "us-west-2:1111")
    ) == [
        "endpoints.chat.capacity_reservation: the training plan is in us-west-2 but the endpoint is deployed in "
        "us-east-1: reserve capacity in us-east-1"
    ]
    serverless = (
        MINIMAL
        + f'endpoints:\n  digits:\n    model_package: "{PIN}"\n    serverless: {{}}\n    capacity_reservation: "{plan}"\n'
    )
    assert findings(project, "endpoint-capacity-reservation", serverless) == [
        "endpoints.digits.capacity_reservation: a capacity reservation holds instances; a serverless endpoint "
        "has none"
    ]


def test_endpoint_shadow_region(project):
    shadow = llm_endpoint().replace("    llm:", f'    shadow: {{model_package: "{PIN}"}}\n    llm:')
    assert findings(project, "endpoint-shadow-region", shadow) == []
    assert findings(
        project, "endpoint-shadow-region", shadow.replace("us-east-1:1111", "eu-west-1:1111")
    ) == [
        "endpoints.chat.shadow.model_package: the candidate package is in eu-west-1 but the endpoint is in "
        "us-east-1: register it in us-east-1 and pin that one"
    ]


def test_llm_findings_are_located_through_the_loader(project):
    errors = project.spec(llm_endpoint("[ml.g5.12xlarge, ml.g5.2xlarge]", parameters="13.0e9")).errors()
    assert len(errors) == 1 and errors[0].startswith(
        "config/sagestack.yaml:11:37: " + SIZED_13B.replace(".instance_type.1:", ".instance_type[1]:")
    )
    assert errors[0].endswith("[llm-memory-fit]")
    errors = project.spec(llm_endpoint(max_input_tokens=4096, max_total_tokens=4096)).errors()
    assert len(errors) == 1 and errors[0].startswith("config/sagestack.yaml:13:7: endpoints.chat.llm: ")
    assert "max_input_tokens (4096) must be below max_total_tokens (4096)" in errors[0]
    warnings = project.spec(llm_endpoint(environment="{OPTION_DTYPE: bf16}")).load().warnings
    assert [w.format() for w in warnings] == [
        "config/sagestack.yaml:16:35: warning: endpoints.chat.llm.environment.OPTION_DTYPE: OPTION_DTYPE replaces the "
        "value sagestack renders from the llm: settings ('fp16' -> 'bf16') [llm-environment]"
    ]


def test_endpoint_components_fit_every_pool_type(project):
    pools = (
        MINIMAL
        + "endpoints:\n  shared:\n    instance_type: [ml.g5.12xlarge, ml.g6.12xlarge]\n    components:\n"
        f'      small: {{model_package: "{PIN}", memory_mb: 8192, accelerators: 4}}\n'
    )
    assert findings(project, "endpoint-components", pools) == []
    assert findings(project, "endpoint-components", pools.replace("ml.g6.12xlarge", "ml.g6.2xlarge")) == [
        "endpoints.shared.components.small: one copy needs 1 CPU cores, 8192 MB and 4 accelerator(s); "
        "ml.g6.2xlarge has 8, 32768 MB and 1: ask for less or choose a larger instance type"
    ]


def test_types_the_catalog_knows_little_about_are_not_judged(project):
    newer = llm_endpoint("[ml.g5.2xlarge, ml.g7e.2xlarge]")  # g7e: accelerator facts not in the catalog yet
    for rule_id in (
        "llm-container-instance",
        "llm-memory-fit",
        "llm-tensor-parallel",
        "endpoint-pool-accelerators",
    ):
        assert findings(project, rule_id, newer) == []
    triton = llm_endpoint("ml.m6g.large", container="sagemaker-tritonserver")  # no memory figure
    assert findings(project, "llm-memory-fit", triton) == []
    assert (
        findings(project, "endpoint-pool-accelerators", llm_endpoint("[ml.g7e.2xlarge, ml.inf2.xlarge]"))
        == []
    )


def test_a_cpu_and_a_gpu_pool_may_share_a_model_but_not_a_neuron_one(project):
    pools = (
        MINIMAL
        + f'endpoints:\n  digits:\n    model_package: "{PIN}"\n    instance_type: [ml.c5.xlarge, ml.g5.xlarge]\n'
    )
    assert findings(project, "endpoint-pool-accelerators", pools) == []
    assert findings(
        project, "endpoint-pool-accelerators", pools.replace("ml.g5.xlarge", "ml.inf1.xlarge")
    ) == [
        "endpoints.digits.instance_type.1: ml.inf1.xlarge is Inferentia (Inf1), but the first pool ml.c5.xlarge "
        "is CPU: SageMaker would serve the same model and container on both; list only CPU types"
    ]


def test_a_degree_above_the_devices_is_sized_over_the_devices_there_are(project):
    too_wide = llm_endpoint("[ml.g5.12xlarge, ml.g5.2xlarge]", parameters="13.0e9", tensor_parallel_degree=4)
    (message,) = findings(project, "llm-memory-fit", too_wide)
    assert message.startswith(SIZED_13B)  # one A10G, not four
    cuda_on_neuron = llm_endpoint("[ml.g5.12xlarge, ml.inf2.xlarge]", tensor_parallel_degree=4)
    assert findings(project, "llm-tensor-parallel", cuda_on_neuron) == []  # llm-container-instance's
