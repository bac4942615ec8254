"""The LLM feature's core: each family's image from sagemaker-core's own tables, the environment each
family documents, the weights' size, tensor-parallel degree, memory fit and timeouts."""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any

import pytest

from sagestack.llm.environment import container_environment, rendered_environment
from sagestack.llm.images import (
    CONTAINERS,
    LlmImageError,
    accelerator_kinds,
    llm_image_uri,
    newest_version,
)
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import memory_fit, tensor_parallel_degree, timeouts, weights_gib

GPU_TYPE = "ml.g5.12xlarge"

# The rules the LLM feature and the endpoint pools add (issue 27).
RULES_EXPLAINED = (
    "llm-container-instance",
    "llm-image",
    "llm-tensor-parallel",
    "llm-memory-fit",
    "llm-endpoint-shape",
    "llm-quantization",
    "llm-optimize-compilation",
    "llm-environment",
    "endpoint-provision-timeout",
    "endpoint-pool-accelerators",
    "endpoint-capacity-reservation",
    "endpoint-shadow-region",
)


def spec(**fields: Any) -> LlmSpec:
    return LlmSpec.model_validate(
        {"container": "djl-lmi", "weights": {"s3": "m/"}, "parameters": 8e9, **fields}
    )


def table(container: str) -> dict[str, Any]:
    path = metadata.distribution("sagemaker-core").locate_file(
        f"sagemaker/core/image_uri_config/{container}.json"
    )
    data: dict[str, Any] = json.loads(path.read_text())  # type: ignore[union-attr]
    return data.get("inference", data)


@pytest.mark.parametrize("container", CONTAINERS)
def test_each_family_resolves_its_newest_image_on_an_instance_it_runs_on(container):
    from sagemaker.core import image_uris

    itype = "ml.inf2.xlarge" if "neuronx" in container else "ml.g5.2xlarge"
    uri = llm_image_uri(spec(container=container), region="eu-west-1", instance_type=itype)
    expected = image_uris.retrieve(
        container,
        region="eu-west-1",
        version=newest_version(container),
        instance_type=itype,
        image_scope="inference",
    )
    assert uri == expected and ".eu-west-1." in uri
    assert newest_version(container) in table(container)["versions"]


def test_neuron_families_run_on_trainium_with_the_inferentia2_image():
    neuron = spec(container="huggingface-llm-neuronx", dtype="bf16")
    assert llm_image_uri(neuron, region="us-east-1", instance_type="ml.trn1.32xlarge") == llm_image_uri(
        neuron, region="us-east-1", instance_type="ml.inf2.xlarge"
    )
    assert accelerator_kinds("djl-neuronx") == {"inferentia", "trainium"}
    assert accelerator_kinds("djl-tensorrtllm") == {"nvidia"}


def test_image_errors_say_why():
    with pytest.raises(LlmImageError, match=r"no version '9\.9'.*known: 0\.38\.0"):
        llm_image_uri(spec(version="9.9"), region="us-east-1", instance_type=GPU_TYPE)
    with pytest.raises(LlmImageError, match=r"runs on NVIDIA GPUs; ml\.trn1\.2xlarge has Trainium"):
        llm_image_uri(spec(container="vllm"), region="us-east-1", instance_type="ml.trn1.2xlarge")
    with pytest.raises(LlmImageError, match="Unsupported region: mars-1"):
        llm_image_uri(spec(), region="mars-1", instance_type=GPU_TYPE)


def test_each_family_gets_its_own_variables():
    s = spec(max_batch_size=32, max_input_tokens=2048, max_total_tokens=4096, tensor_parallel_degree=2)
    lmi = container_environment(s, instance_type=GPU_TYPE)
    assert lmi == {
        "HF_MODEL_ID": "/opt/ml/model",
        "OPTION_TENSOR_PARALLEL_DEGREE": "2",
        "OPTION_ROLLING_BATCH": "vllm",
        "OPTION_MAX_MODEL_LEN": "4096",
        "OPTION_MAX_ROLLING_BATCH_SIZE": "32",
        "OPTION_DTYPE": "fp16",
    }
    tgi = container_environment(s.model_copy(update={"container": "huggingface-llm"}), instance_type=GPU_TYPE)
    assert (
        tgi["SM_NUM_GPUS"] == "2" and tgi["MAX_INPUT_TOKENS"] == "2048" and tgi["MAX_TOTAL_TOKENS"] == "4096"
    )
    assert tgi["MAX_CONCURRENT_REQUESTS"] == "32" and tgi["DTYPE"] == "float16"
    old_tgi = s.model_copy(update={"container": "huggingface-llm", "version": "1.4.5"})
    assert "MAX_INPUT_LENGTH" in rendered_environment(old_tgi, instance_type=GPU_TYPE)
    awq = rendered_environment(
        s.model_copy(update={"container": "huggingface-llm", "quantization": "awq"}), instance_type=GPU_TYPE
    )
    assert awq["HF_MODEL_QUANTIZE"] == "awq" and "DTYPE" not in awq  # TGI refuses --dtype with --quantize
    vllm = rendered_environment(s.model_copy(update={"container": "vllm"}), instance_type=GPU_TYPE)
    assert vllm["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2" and vllm["SM_VLLM_MAX_NUM_SEQS"] == "32"
    sglang = rendered_environment(s.model_copy(update={"container": "sglang"}), instance_type=GPU_TYPE)
    assert sglang["SM_SGLANG_TP_SIZE"] == "2" and sglang["SM_SGLANG_CONTEXT_LENGTH"] == "4096"
    trt = rendered_environment(s.model_copy(update={"container": "djl-tensorrtllm"}), instance_type=GPU_TYPE)
    assert (trt["OPTION_ROLLING_BATCH"], trt["OPTION_MAX_INPUT_LEN"], trt["OPTION_MAX_OUTPUT_LEN"]) == (
        "trtllm",
        "2048",
        "2048",
    )
    neuron = spec(container="huggingface-llm-neuronx", dtype="bf16", max_batch_size=4)
    assert rendered_environment(neuron, instance_type="ml.inf2.48xlarge") == {
        "HF_MODEL_ID": "/opt/ml/model",
        "HF_NUM_CORES": "24",
        "HF_AUTO_CAST_TYPE": "bf16",
        "MAX_BATCH_SIZE": "4",
    }


def test_the_users_environment_wins_and_a_component_bounds_the_degree():
    s = spec(environment={"OPTION_DTYPE": "bf16", "HF_TOKEN": "t"})
    env = container_environment(s, instance_type=GPU_TYPE, accelerators=2)
    assert env["OPTION_DTYPE"] == "bf16" and env["HF_TOKEN"] == "t"
    assert env["OPTION_TENSOR_PARALLEL_DEGREE"] == "2"


def test_sizing_per_instance_type():
    assert weights_gib(spec()) == pytest.approx(8e9 * 2 / 2**30)
    assert weights_gib(spec(quantization="awq")) == pytest.approx(8e9 * 0.5 / 2**30)
    assert weights_gib(spec(weights={"s3": "m/", "size_gb": 16})) == pytest.approx(16e9 / 2**30)
    assert tensor_parallel_degree(spec(), "ml.p4d.24xlarge") == 8
    assert (
        tensor_parallel_degree(spec(container="djl-neuronx"), "ml.inf2.24xlarge") == 12
    )  # 6 chips x 2 cores
    assert tensor_parallel_degree(spec(), "ml.g5.48xlarge", accelerators=2) == 2
    big = spec(parameters=70e9)
    assert memory_fit(big, "ml.p4d.24xlarge").ok  # 130 GiB + 8 x 1 GiB within 90 % of 8 x 40 GiB
    small = memory_fit(big, "ml.g5.12xlarge")
    assert (small.ok, small.available_gib, small.tensor_parallel_degree) == (False, 86.4, 4)
    assert small.needed_gib == pytest.approx(small.weights_gib + 4 * 1.0)  # no token limit: no KV cache


def test_timeouts_grow_with_the_weights_and_stay_in_the_apis_range():
    tiny, huge = spec(parameters=1e8), spec(parameters=400e9)
    assert timeouts(tiny) < timeouts(spec()) and timeouts(huge) == (3600, 3600)
    assert all(60 <= t <= 3600 for t in timeouts(tiny))
    neuron = spec(container="djl-neuronx")
    assert timeouts(neuron)[1] > timeouts(spec())[1]  # compiles for the NeuronCores on start
    assert timeouts(spec(download_timeout=120, startup_timeout=900)) == (120, 900)


def test_sagestack_rules_explains_every_llm_rule():
    from typer.testing import CliRunner

    from sagestack.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["rules"], terminal_width=200)
    for rule_id in RULES_EXPLAINED:
        assert rule_id in listed.stdout
        out = runner.invoke(app, ["rules", "--explain", rule_id])
        assert out.exit_code == 0 and "Why:" in out.stdout and "What to do:" in out.stdout


def test_an_llm_endpoint_resolves_to_its_familys_image_and_every_pools_family(project):
    from sagestack.endpoints.resolved import resolve_endpoint
    from sagestack.project import resolve_environment
    from tests.conftest import MINIMAL

    llm = "    llm: {container: huggingface-llm, weights: {s3: models/chat/}, parameters: 1.0e9}\n"
    project.spec(
        MINIMAL + "endpoints:\n  chat:\n    instance_type: [ml.g5.2xlarge, ml.g6.2xlarge]\n" + llm
    ).env("dev")
    ep = resolve_endpoint(resolve_environment(project.load("dev")), "chat")
    assert ep.image_uri == llm_image_uri(ep.spec.llm, region="us-east-1", instance_type="ml.g5.2xlarge")
    assert "huggingface-pytorch-tgi-inference" in ep.image_uri
    families = {t.rsplit(".", 1)[0] for t in ep.supported_instance_types}
    assert families == {"ml.g5", "ml.g6"}


def test_settings_a_family_has_no_variable_for_are_named():
    from sagestack.llm.environment import unrendered

    tgi32 = spec(container="huggingface-llm", dtype="fp32")
    assert "DTYPE" not in rendered_environment(tgi32, instance_type=GPU_TYPE)
    assert unrendered(tgi32) == ["dtype"]
    triton = spec(container="sagemaker-tritonserver", tensor_parallel_degree=2, max_batch_size=8)
    assert unrendered(triton) == ["tensor_parallel_degree", "max_batch_size"]
    assert unrendered(spec(max_input_tokens=10, max_total_tokens=20)) == ["max_input_tokens"]
    assert unrendered(spec(container="huggingface-llm", max_input_tokens=10, max_total_tokens=20)) == []


def test_a_components_devices_count_gpus_or_neuron_devices_not_cores():
    from sagestack.llm.sizing import accelerator_devices

    assert accelerator_devices(spec(tensor_parallel_degree=2), "ml.g5.12xlarge") == 2
    neuron = spec(container="djl-neuronx", tensor_parallel_degree=4)
    assert accelerator_devices(neuron, "ml.inf2.24xlarge") == 2  # 4 NeuronCores on 2 Inferentia2 devices
    assert accelerator_devices(neuron, "ml.inf2.24xlarge", accelerators=3) == 3


# Each family's load-time quantization variable, as its launcher reads it (module docstring of
# sagestack/llm/environment.py): a quantized model loaded without it is loaded at full size.
QUANTIZATION_VARIABLE = {
    "djl-lmi": "OPTION_QUANTIZE",
    "huggingface-llm": "HF_MODEL_QUANTIZE",
    "vllm": "SM_VLLM_QUANTIZATION",
    "sglang": "SM_SGLANG_QUANTIZATION",
}


@pytest.mark.parametrize(("container", "variable"), sorted(QUANTIZATION_VARIABLE.items()))
def test_each_familys_quantization_reaches_its_variable(container, variable):
    for quantization in ("awq", "gptq"):
        env = rendered_environment(
            spec(container=container, quantization=quantization), instance_type=GPU_TYPE
        )
        assert env[variable] == quantization
    # an fp8 dtype is fp8 quantization at load time; without either, the variable is left out
    assert (
        rendered_environment(spec(container=container, dtype="fp8"), instance_type=GPU_TYPE)[variable]
        == "fp8"
    )
    assert variable not in rendered_environment(spec(container=container), instance_type=GPU_TYPE)
    from sagestack.llm.environment import unrendered

    assert "quantization" not in unrendered(spec(container=container, quantization="awq"))


def test_a_degree_that_spans_part_of_a_neuron_device_takes_the_whole_device():
    """NumberOfAcceleratorDevicesRequired counts whole Inferentia2 devices (2 NeuronCores each): a
    degree of 3 needs 2 devices, 1 needs 1, never 0 or fewer than its cores."""
    from sagestack.llm.sizing import accelerator_devices

    neuron = spec(container="djl-neuronx")
    for degree, wanted in ((1, 1), (2, 1), (3, 2), (5, 3), (8, 4)):
        got = accelerator_devices(
            neuron.model_copy(update={"tensor_parallel_degree": degree}), "ml.inf2.24xlarge"
        )
        assert got == wanted, degree
    # GPUs are devices of their own: the degree is the count
    assert accelerator_devices(spec(tensor_parallel_degree=3), "ml.g5.12xlarge") == 3


def test_the_devices_a_copy_spans_on_cpu_gpu_and_neuron_types():
    from sagestack.core.catalog.instances import instance_type
    from sagestack.llm.sizing import NEURON_COMPILE_S, Devices, accelerator_devices, devices

    cpu = instance_type("ml.m5.xlarge")
    assert devices("ml.m5.xlarge") == Devices(0, cpu.memory_gib, "none")
    inf2 = instance_type("ml.inf2.24xlarge").accelerator
    assert inf2 is not None and inf2.neuron_cores_per_chip == 2
    assert devices("ml.inf2.24xlarge") == Devices(12, inf2.memory_gib / 2, f"NeuronCore ({inf2.model})", 2)
    # without a degree, a Neuron copy spans every core: 12 NeuronCores are 6 devices
    assert accelerator_devices(spec(container="djl-neuronx"), "ml.inf2.24xlarge") == 6
    # a type the catalog does not know: one device, the degree's default
    assert tensor_parallel_degree(spec(), "ml.nope.xlarge") == 1
    # a size in GB is bytes: 16 GB on disk, exactly 16e9 / 2**30 GiB
    assert weights_gib(spec(weights={"s3": "m/", "size_gb": 16})) == 16e9 / 2**30
    # only a Neuron family compiles on start: the same weights start exactly NEURON_COMPILE_S later
    small = {"parameters": 1e9}
    gpu, vllm = timeouts(spec(**small))[1], timeouts(spec(container="vllm", **small))[1]
    assert gpu == vllm and timeouts(spec(container="djl-neuronx", **small))[1] - gpu == NEURON_COMPILE_S


M = "/opt/ml/model"
# Every setting given, each family's whole environment and what it ignores (the module docstring of
# sagestack/llm/environment.py names each variable's source): a slip in any one family's renderer
# shows here. Neuron families run on ml.inf2.48xlarge, the rest on GPU_TYPE.
FULL = {"max_batch_size": 16, "max_input_tokens": 1024, "max_total_tokens": 3072, "tensor_parallel_degree": 2}
LMI = {"HF_MODEL_ID": M, "OPTION_TENSOR_PARALLEL_DEGREE": "2"}
VLLM = {"SM_VLLM_MODEL": M, "SM_VLLM_TENSOR_PARALLEL_SIZE": "2", "SM_VLLM_MAX_NUM_SEQS": "16"}
VLLM |= {"SM_VLLM_MAX_MODEL_LEN": "3072", "SM_VLLM_DTYPE": "bfloat16", "SM_VLLM_QUANTIZATION": "awq"}
RENDERED = {
    "djl-lmi": (
        LMI
        | {
            "OPTION_ROLLING_BATCH": "vllm",
            "OPTION_MAX_MODEL_LEN": "3072",
            "OPTION_MAX_ROLLING_BATCH_SIZE": "16",
        }
        | {"OPTION_DTYPE": "bf16", "OPTION_QUANTIZE": "awq"},
        ["max_input_tokens"],
    ),
    "djl-neuronx": (
        LMI
        | {
            "OPTION_ROLLING_BATCH": "auto",
            "OPTION_N_POSITIONS": "3072",
            "OPTION_MAX_ROLLING_BATCH_SIZE": "16",
        }
        | {"OPTION_DTYPE": "bf16", "OPTION_QUANTIZE": "awq"},
        ["max_input_tokens"],
    ),
    "djl-tensorrtllm": (
        LMI
        | {"OPTION_ROLLING_BATCH": "trtllm", "OPTION_MAX_INPUT_LEN": "1024", "OPTION_MAX_OUTPUT_LEN": "2048"}
        | {"OPTION_MAX_ROLLING_BATCH_SIZE": "16", "OPTION_DTYPE": "bf16", "OPTION_QUANTIZE": "awq"},
        [],
    ),
    "huggingface-llm": (
        {"HF_MODEL_ID": M, "SM_NUM_GPUS": "2", "MAX_INPUT_TOKENS": "1024", "MAX_TOTAL_TOKENS": "3072"}
        | {"MAX_BATCH_PREFILL_TOKENS": "1074", "MAX_CONCURRENT_REQUESTS": "16", "HF_MODEL_QUANTIZE": "awq"},
        [],
    ),
    "huggingface-vllm": (VLLM, ["max_input_tokens"]),
    "vllm": (VLLM, ["max_input_tokens"]),
    "sglang": (
        {"SM_SGLANG_MODEL_PATH": M, "SM_SGLANG_TP_SIZE": "2", "SM_SGLANG_MAX_RUNNING_REQUESTS": "16"}
        | {
            "SM_SGLANG_CONTEXT_LENGTH": "3072",
            "SM_SGLANG_DTYPE": "bfloat16",
            "SM_SGLANG_QUANTIZATION": "awq",
        },
        ["max_input_tokens"],
    ),
    "sagemaker-tritonserver": (
        {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "model"},
        ["tensor_parallel_degree", "max_batch_size", "max_input_tokens", "max_total_tokens", "quantization"],
    ),
}


@pytest.mark.parametrize("container", sorted(RENDERED))
def test_each_familys_whole_environment_with_every_setting_given(container):
    from sagestack.llm.environment import unrendered

    s = spec(container=container, dtype="bf16", quantization="awq", **FULL)
    itype = "ml.inf2.48xlarge" if "neuron" in container else GPU_TYPE
    env, ignored = RENDERED[container]
    assert (rendered_environment(s, instance_type=itype), unrendered(s)) == (env, ignored)


def test_what_tgi_on_neuron_renders_and_what_an_fp32_dtype_leaves_out():
    from sagestack.llm.environment import unrendered

    s = spec(container="huggingface-llm-neuronx", dtype="bf16", **FULL)
    assert rendered_environment(s, instance_type="ml.inf2.48xlarge") == {
        "HF_MODEL_ID": M,
        "HF_NUM_CORES": "2",
        "HF_AUTO_CAST_TYPE": "bf16",
        "MAX_BATCH_SIZE": "16",
        "MAX_INPUT_TOKENS": "1024",
        "MAX_TOTAL_TOKENS": "3072",
    }
    for container in ("huggingface-llm", "huggingface-llm-neuronx"):  # 16-bit types only
        assert unrendered(spec(container=container, dtype="fp32")) == ["dtype"]
    assert unrendered(spec(container="vllm", dtype="fp32")) == []
    # TensorRT-LLM's output length needs the input length: a total alone is not rendered
    assert unrendered(spec(container="djl-tensorrtllm", max_total_tokens=10)) == ["max_total_tokens"]
    assert unrendered(spec(container="djl-tensorrtllm", max_input_tokens=10)) == []


def test_tgi_names_its_input_limit_by_the_version_that_renamed_it():
    """MAX_INPUT_LENGTH became MAX_INPUT_TOKENS in TGI 2.1 (optimum-neuron 0.0.25 ships that TGI);
    the first version that has the new name gets it."""

    def key(container: str, version: str, instance: str) -> set[str]:
        env = rendered_environment(
            spec(container=container, version=version, max_input_tokens=1024, max_total_tokens=2048),
            instance_type=instance,
        )
        return {k for k in env if k.startswith("MAX_INPUT")}

    assert key("huggingface-llm", "2.1", GPU_TYPE) == {"MAX_INPUT_TOKENS"}
    assert key("huggingface-llm", "2.0.4", GPU_TYPE) == {"MAX_INPUT_LENGTH"}
    assert key("huggingface-llm-neuronx", "0.0.25", "ml.inf2.48xlarge") == {"MAX_INPUT_TOKENS"}
    assert key("huggingface-llm-neuronx", "0.0.24", "ml.inf2.48xlarge") == {"MAX_INPUT_LENGTH"}


def test_tgi_neuronx_casts_to_fp16_when_asked():
    neuron = spec(container="huggingface-llm-neuronx", dtype="fp16")
    assert rendered_environment(neuron, instance_type="ml.inf2.48xlarge")["HF_AUTO_CAST_TYPE"] == "fp16"


def test_tensorrt_llm_gets_an_output_length_only_when_both_limits_are_given():
    for fields in ({"max_total_tokens": 4096}, {"max_input_tokens": 1024}, {}):
        env = rendered_environment(spec(container="djl-tensorrtllm", **fields), instance_type=GPU_TYPE)
        assert "OPTION_MAX_OUTPUT_LEN" not in env, fields
