"""An LLM's KV cache counts in its memory fit (issue 37, item 8): from the model's shape (the spec's,
a local config.json's, or an estimate from the parameter count), the KV dtype, the token limit and
the batch as the container reads them, with the activations and the share of memory each family's
server uses. A refusal says what the cache is made of and what would fit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sagestack.core.catalog.instances import instance_type
from sagestack.llm.advice import fitting_types
from sagestack.llm.environment import rendered_environment, unrendered
from sagestack.llm.models import LlmSpec
from sagestack.llm.optimization_job import published_fields
from sagestack.llm.shape import KNOWN, local_weights_dir, shape_of
from sagestack.llm.sizing import ENGINES, GIB, kv_cache, memory_fit, weights_gib
from tests.unit.test_llm_rules import llm_endpoint
from tests.unit.test_rules import findings

LLAMA3_8B = {"num_layers": 32, "num_kv_heads": 8, "head_dim": 128}
ISSUE = {"dtype": "bf16", "max_total_tokens": 8192, "max_batch_size": 32}  # the issue's 8B on g5.xlarge


def spec(**fields: Any) -> LlmSpec:
    return LlmSpec.model_validate({"container": "vllm", "weights": {"s3": "m/"}, "parameters": 8e9, **fields})


def test_llama3_8b_holds_128_kib_per_token_and_32_gib_at_8192_tokens_by_32_sequences():
    kv = kv_cache(spec(**ISSUE, **LLAMA3_8B))
    assert kv.bytes_per_token == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    assert kv.gib == 32.0  # 8192 x 32 x 128 KiB
    assert kv.formula() == (
        "2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 128 KiB per token x 8192 "
        "tokens (max_total_tokens) x 32 sequences (max_batch_size)"
    )
    assert kv_cache(spec(**ISSUE, **LLAMA3_8B, kv_cache_dtype="fp8")).gib == 16.0
    assert kv_cache(spec(**ISSUE, kv_bytes_per_token=65536)).gib == 16.0  # stated instead of the shape
    assert kv_cache(spec(**{**ISSUE, "dtype": "fp32"}, **LLAMA3_8B)).gib == 64.0


def test_an_unknown_shape_is_the_nearest_known_architectures_and_says_so():
    estimated = shape_of(spec())
    assert (estimated.layers, estimated.kv_heads, estimated.head_dim) == (32, 8, 128)  # Llama-3 8B
    assert estimated.estimate and "an estimate: Llama-3 8B's shape" in estimated.source
    big = shape_of(spec(parameters=70e9))
    assert (big.layers, big.kv_heads, big.head_dim, big.estimate) == (80, 8, 128, True)
    assert not shape_of(spec(**LLAMA3_8B)).estimate
    assert [a.parameters for a in KNOWN] == sorted(a.parameters for a in KNOWN)


def test_the_issues_8b_on_a_g5_xlarge_does_not_fit(project):
    fit = memory_fit(spec(**ISSUE), "ml.g5.xlarge")
    assert fit.weights_gib == pytest.approx(8e9 * 2 / GIB)  # 14.9 GiB
    assert fit.kv_cache_gib == 32.0 and fit.activations_gib == 1.0
    assert fit.available_gib == pytest.approx(24.0 * 0.9)  # vLLM's gpu_memory_utilization
    assert not fit.ok
    assert memory_fit(spec(dtype="bf16"), "ml.g5.xlarge").ok  # one sequence, no token limit: weights only
    text = llm_endpoint("ml.g5.xlarge", container="vllm", parameters="8.0e9", **ISSUE)
    (message,) = findings(project, "llm-memory-fit", text)
    assert message.startswith(
        "endpoints.chat.instance_type: 8e+09 parameters in bf16: 14.9 GiB of weights + 32.0 GiB of KV cache "
        "+ 1.0 GiB of activations = 47.9 GiB; one copy on ml.g5.xlarge has 21.6 GiB (1 x 24.0 GiB A10G, 90% "
        "used by vLLM (gpu_memory_utilization 0.9)). KV cache: 2 (K, V) x 32 layers x 8 KV heads x 128 "
        "head_dim x 2 bytes (bf16) = 128 KiB per token x 8192 tokens (max_total_tokens) x 32 sequences "
        "(max_batch_size); shape: an estimate: Llama-3 8B's shape for 8e+09 parameters"
    )
    # 21.6 - 14.9 - 1.0 = 5.7 GiB for the cache: 5 sequences of 1 GiB, or 32 x 1459 tokens of 128 KiB (in blocks of 16: 1456)
    assert (
        "on ml.g5.xlarge: max_batch_size 5 at 8192 tokens, or max_total_tokens 1456 at 32 sequences"
        in message
    )
    assert "quantization: fp8 / bitsandbytes (8-bit) makes 7.5 GiB of weights, 40.5 GiB in all" in message
    assert "quantization: awq / gptq (4-bit) makes 3.7 GiB of weights, 36.7 GiB in all" in message
    assert "kv_cache_dtype: fp8 halves the KV cache to 16.0 GiB" in message
    _names_the_cheapest_types_that_fit(message, spec(**ISSUE))


def _names_the_cheapest_types_that_fit(message: str, llm: LlmSpec) -> None:
    """The types listed hold the copy at the degree given, cheapest first, and none cheaper is left out."""
    listed = message.split("instance types that hold it, cheapest first: ")[1].split(";")[0]
    entries = [e.strip().split(" (tp ") for e in listed.split("), ")]
    assert len(entries) == 3
    prices = []
    for name, rest in entries:
        tp = int(rest.split(",")[0].rstrip(")"))
        assert memory_fit(llm.model_copy(update={"tensor_parallel_degree": tp}), name).ok
        assert (
            not memory_fit(llm.model_copy(update={"tensor_parallel_degree": max(1, tp // 2)}), name).ok
            or tp == 1
        )
        prices.append(instance_type(name).price_per_hour)
    assert prices == sorted(prices)
    assert [a.instance_type for a in fitting_types(llm, shape_of(llm))] == [n for n, _ in entries]


def test_a_70b_refusal_names_types_that_fit_and_the_quantization(project):
    text = llm_endpoint("ml.g5.12xlarge", container="vllm", parameters="70.0e9", **ISSUE)
    (message,) = findings(project, "llm-memory-fit", text)
    assert "130.4 GiB of weights + 80.0 GiB of KV cache + 4.0 GiB of activations = 214.4 GiB" in message
    assert "2 (K, V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 320 KiB per token" in message
    assert "on ml.g5.12xlarge: the weights and activations alone take 134.4 GiB of 86.4" in message
    assert "quantization: awq / gptq (4-bit) makes 32.6 GiB of weights" in message
    _names_the_cheapest_types_that_fit(message, spec(**{**ISSUE, "parameters": 70e9}))


def test_the_containers_own_variables_are_what_it_sizes(project):
    """llm.environment wins in the container, so it wins in the sizing too."""
    env = {"SM_VLLM_MAX_MODEL_LEN": "2048", "SM_VLLM_MAX_NUM_SEQS": "4", "SM_VLLM_KV_CACHE_DTYPE": "fp8"}
    kv = kv_cache(spec(**ISSUE, **LLAMA3_8B, environment=env))
    assert (kv.tokens, kv.batch, kv.dtype, kv.gib) == (2048, 4, "fp8", 0.5)
    assert memory_fit(spec(**ISSUE, environment=env), "ml.g5.xlarge").ok
    used = spec(environment={"SM_VLLM_GPU_MEMORY_UTILIZATION": "0.5"})
    assert memory_fit(used, "ml.g5.xlarge").available_gib == 12.0
    assert memory_fit(spec(kv_cache_headroom=0.25), "ml.g5.xlarge").available_gib == 18.0
    trt = spec(container="djl-tensorrtllm", **LLAMA3_8B, max_input_tokens=1024, max_total_tokens=4096)
    assert kv_cache(trt).tokens == 4096  # OPTION_MAX_INPUT_LEN + OPTION_MAX_OUTPUT_LEN
    sglang = spec(container="sglang", **ISSUE)
    assert memory_fit(sglang, "ml.g5.xlarge").available_gib == pytest.approx(24.0 * 0.88)


@pytest.mark.parametrize("container", sorted(ENGINES))
def test_the_variables_sized_are_the_ones_rendered(container):
    """The token limit and batch each family's environment carries are the variables sizing reads."""
    llm = spec(container=container, max_batch_size=8, max_input_tokens=1024, max_total_tokens=4096)
    env = rendered_environment(
        llm, instance_type="ml.inf2.48xlarge" if "neuronx" in container else "ml.g5.12xlarge"
    )
    engine = ENGINES[container]
    for name in (*engine.tokens, *([engine.batch] if engine.batch else [])):
        assert name in env, f"{container} sizes {name}, which it does not render"
    tokens = sum(int(env[n]) for n in engine.tokens) if engine.tokens else None
    assert tokens in (4096, None) and (engine.batch is None or env[engine.batch] == "8")


def test_an_fp8_kv_cache_reaches_the_families_that_take_it():
    fp8 = {"kv_cache_dtype": "fp8"}
    assert rendered_environment(spec(**fp8), instance_type="ml.g6.xlarge")["SM_VLLM_KV_CACHE_DTYPE"] == "fp8"
    assert (
        rendered_environment(spec(container="sglang", **fp8), instance_type="ml.g6.xlarge")[
            "SM_SGLANG_KV_CACHE_DTYPE"
        ]
        == "fp8_e5m2"
    )
    assert (
        rendered_environment(spec(container="huggingface-llm", **fp8), instance_type="ml.g6.xlarge")[
            "KV_CACHE_DTYPE"
        ]
        == "fp8"
    )
    assert unrendered(spec(container="djl-lmi", **fp8)) == ["kv_cache_dtype"]  # warned, and sized as 16-bit
    assert kv_cache(spec(container="djl-lmi", **ISSUE, **fp8)).dtype == "bf16"
    assert kv_cache(spec(**ISSUE, **fp8)).dtype == "fp8"


def _config(folder, **keys: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(keys))


LLAMA3_8B_CONFIG = {
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "max_position_embeddings": 8192,
}


def test_the_local_weights_config_json_gives_the_shape(tmp_path):
    folder = tmp_path / "w"
    _config(folder, **{**LLAMA3_8B_CONFIG, "num_key_value_heads": 4})
    shape = shape_of(spec(), folder)
    assert (shape.layers, shape.kv_heads, shape.head_dim, shape.estimate) == (32, 4, 128, False)
    assert shape.source == f"config.json ({folder / 'config.json'})"
    kv = kv_cache(spec(dtype="bf16"), shape)  # no token limit: the model's own, as vLLM takes it
    assert (kv.tokens, kv.gib) == (8192, 0.5)
    assert shape_of(spec(num_kv_heads=8), folder).kv_heads == 8  # the spec wins
    # GPT-2's spelling, and a model that is not the spec's (sagestack's local stand-in) is not used
    _config(folder, n_layer=2, n_head=2, n_embd=64, vocab_size=512, n_positions=512)
    other = shape_of(spec(), folder)
    assert other.estimate and other.note == (
        "the local config.json describes about 1.3e+05 parameters, not 8e+09: its shape is not used"
    )
    (folder / "config.json").write_text("not json")
    assert shape_of(spec(), folder).estimate


def test_validate_reads_the_config_json_where_local_serve_reads_the_weights(project):
    from sagestack.local.llm.endpoint import local_llm

    text = llm_endpoint("ml.g5.xlarge", container="vllm", parameters="8.0e9", dtype="bf16", max_batch_size=32)
    loaded = project.spec(text).load(run_rules=False)
    folder = local_llm(loaded, "chat").weights
    assert folder == local_weights_dir(project.root, loaded.env, loaded.spec.endpoints["chat"].llm)
    assert findings(project, "llm-memory-fit", text) == []  # no token limit known: weights only
    _config(folder, **LLAMA3_8B_CONFIG)  # 8192 positions x 32 sequences x 128 KiB
    (message,) = findings(project, "llm-memory-fit", text)
    assert "32.0 GiB of KV cache" in message and f"shape: config.json ({folder / 'config.json'})" in message
    assert "8192 tokens (unset: config.json's max_position_embeddings)" in message


def test_the_refusal_is_located_at_the_pool_through_the_loader(project):
    text = llm_endpoint("[ml.g6e.12xlarge, ml.g5.xlarge]", container="vllm", parameters="8.0e9", **ISSUE)
    errors = project.spec(text).errors()
    assert len(errors) == 1 and errors[0].startswith(
        "config/sagestack.yaml:11:38: endpoints.chat.instance_type[1]: 8e+09 parameters in bf16: 14.9 GiB of "
        "weights + 32.0 GiB of KV cache"
    )
    assert errors[0].endswith("[llm-memory-fit]")


def test_the_plan_counts_the_kv_cache(project):
    from rich.console import Console

    from sagestack.capacity.ledger import QuotaBook
    from sagestack.ops.report import as_json, plan_report, render
    from sagestack.project import resolve_environment

    text = llm_endpoint("[ml.g5.xlarge, ml.g5.12xlarge]", container="vllm", parameters="8.0e9", **ISSUE)
    project.spec(text).env("dev")
    plan = resolve_environment(project.load("dev", run_rules=False))
    result = plan_report(project.root, plan, QuotaBook.none("off"))
    small, big = as_json(result)["endpoints"]["chat"]["llm"]
    assert (small["kv_cache_gib"], small["needed_gib"], small["fits"]) == (
        32.0,
        pytest.approx(47.9, abs=0.05),
        False,
    )
    assert (big["tensor_parallel_degree"], big["needed_gib"], big["fits"]) == (
        4,
        pytest.approx(50.9, abs=0.05),
        True,
    )
    assert small["shape_estimated"] is True
    console = Console(width=80, record=True, color_system=None)
    render(result, console)
    out = console.export_text()
    assert max(len(line) for line in out.splitlines()) <= 80
    rows = [line.split() for line in out.splitlines() if "ml.g5.xlarge" in line and "A10G" in line]
    assert rows == [["chat", "ml.g5.xlarge", "1x", "A10G", "1", "32.0", "47.9", "/", "21.6", "no"]]
    assert "chat: KV cache = 2 (K, V) x 32 layers x 8 KV heads x 128 head_dim" in " ".join(out.split())


def test_the_examples_chat_still_fits():
    from sagestack.project import load_project
    from sagestack.project.rules import RuleContext, run_rule
    from tests.conftest import REPO

    loaded = load_project(REPO, "staging")
    assert list(run_rule("llm-memory-fit", RuleContext(spec=loaded.spec, env="staging", root=REPO))) == []
    chat = loaded.spec.endpoints["chat"].components["chat"].llm
    assert chat is not None and memory_fit(chat, "ml.g5.2xlarge").kv_cache_gib > 0  # counted, and small


def test_an_optimization_jobs_name_is_kept_when_the_new_fields_are_unset():
    """The job's hash reads the llm: section as it was when names were published."""
    unset = published_fields(spec())
    assert "num_layers" not in unset and "kv_cache_dtype" not in unset and unset["kv_cache_headroom"] == 0.2
    assert published_fields(spec(num_layers=32))["num_layers"] == 32
    assert weights_gib(spec()) == pytest.approx(8e9 * 2 / GIB)


def test_a_containers_variable_counts_only_as_a_positive_whole_number():
    """0, a negative or a non-number is not a limit the server takes: the spec's field counts instead;
    1 is a limit (one sequence, one token of output)."""
    base = {**ISSUE, **LLAMA3_8B}
    for ignored in ("0", "-8", "many"):
        kv = kv_cache(
            spec(**base, environment={"SM_VLLM_MAX_MODEL_LEN": ignored, "SM_VLLM_MAX_NUM_SEQS": ignored})
        )
        assert (kv.tokens, kv.tokens_from, kv.batch, kv.batch_from) == (
            8192,
            "max_total_tokens",
            32,
            "max_batch_size",
        )
    one = kv_cache(spec(**base, environment={"SM_VLLM_MAX_NUM_SEQS": "1"}))
    assert (one.batch, one.batch_from) == (1, "SM_VLLM_MAX_NUM_SEQS")
    assert one.formula().endswith("x 8192 tokens (max_total_tokens) x 1 sequence (SM_VLLM_MAX_NUM_SEQS)")
    trt = kv_cache(
        spec(
            **base,
            container="djl-tensorrtllm",
            environment={"OPTION_MAX_INPUT_LEN": "3000", "OPTION_MAX_OUTPUT_LEN": "1"},
        )
    )
    assert (trt.tokens, trt.tokens_from) == (3001, "OPTION_MAX_INPUT_LEN + OPTION_MAX_OUTPUT_LEN")
    unset = kv_cache(spec(**LLAMA3_8B, max_total_tokens=4096))
    assert (unset.batch, unset.batch_from) == (1, "max_batch_size unset")
    assert unset.formula().endswith("x 4096 tokens (max_total_tokens) x 1 sequence (max_batch_size unset)")
    two = kv_cache(spec(**LLAMA3_8B, max_total_tokens=4096, max_batch_size=2))
    assert two.formula().endswith("x 2 sequences (max_batch_size)")


def test_the_memory_share_variable_counts_only_between_0_and_1():
    from sagestack.llm.sizing import memory_fraction

    def share(value: str) -> float:
        return memory_fraction(spec(environment={"SM_VLLM_GPU_MEMORY_UTILIZATION": value}))

    assert share("1") == 1.0 and share("0.5") == 0.5
    assert share("0") == share("1.5") == share("2") == share("most") == 0.9  # vLLM's default


def test_a_copy_fits_when_it_needs_exactly_the_memory_the_server_uses():
    # 11.5 Gi parameters in fp16 = 23 GiB, no token limit known (no KV cache), 1 GiB of activations:
    # 24 GiB, an A10G's whole memory at gpu_memory_utilization 1
    exact = spec(
        **LLAMA3_8B, dtype="fp16", parameters=11.5 * GIB, environment={"SM_VLLM_GPU_MEMORY_UTILIZATION": "1"}
    )
    fit = memory_fit(exact, "ml.g5.xlarge")
    assert (fit.needed_gib, fit.available_gib, fit.device_gib) == (24.0, 24.0, 24.0)
    assert fit.ok


def test_a_component_spans_its_own_accelerators_not_the_instances():
    """On a 4-GPU g5.12xlarge, a component given 1 accelerator spans 1 GPU, whatever the degree says
    (a degree above it is the tp rule's refusal); without a degree, its degree is 1."""
    own = memory_fit(spec(**LLAMA3_8B), "ml.g5.12xlarge", accelerators=1)
    assert (own.tensor_parallel_degree, own.device_gib, own.activations_gib) == (1, 24.0, 1.0)
    wide = memory_fit(spec(**LLAMA3_8B, tensor_parallel_degree=2), "ml.g5.12xlarge", accelerators=1)
    assert (wide.tensor_parallel_degree, wide.device_gib, wide.activations_gib) == (2, 24.0, 1.0)
    whole = memory_fit(spec(**LLAMA3_8B), "ml.g5.12xlarge")
    assert (whole.tensor_parallel_degree, whole.device_gib, whole.activations_gib) == (4, 96.0, 4.0)


def test_a_cpu_instance_offers_its_host_memory_once_and_no_gpu_activations():
    cpu = memory_fit(spec(**LLAMA3_8B), "ml.m5.2xlarge")
    assert (cpu.device_gib, cpu.activations_gib) == (32.0, 0.0)
    assert cpu.available_gib == pytest.approx(32.0 * 0.9)
    unknown = memory_fit(spec(**LLAMA3_8B), "ml.r7gd.4xlarge")  # the catalog does not know its memory
    assert (unknown.device_gib, unknown.available_gib, unknown.ok) == (0.0, 0.0, False)


def test_a_neuron_family_counts_no_activations_beside_its_weights():
    neuron = memory_fit(spec(**LLAMA3_8B, container="djl-neuronx"), "ml.inf2.24xlarge")
    assert neuron.activations_gib == 0.0
    assert neuron.needed_gib == neuron.weights_gib + neuron.kv_cache_gib
