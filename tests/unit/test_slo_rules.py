"""The performance target (`slo:`): its validation and its rules, each with a spec that passes and
one that fails (the message asserted), located at file:line:column through the real loader."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_llm_rules import llm_endpoint
from tests.unit.test_rules import findings

DIGITS = (
    MINIMAL
    + """\
endpoints:
  digits:
    model: {from: classifier}
    compile: {target_device: ml_c5, framework_version: "2.0", input_shapes: {input0: [1, 1, 8, 8]}}
    instance_type: ml.c5.xlarge
    batching: {max_batch_size: 16, max_delay_ms: 5}
"""
)


def with_slo(text: str, slo: str) -> str:
    return text + f"    slo: {slo}\n"


def test_slo_needs_a_target_and_ordered_percentiles(project):
    assert project.spec(with_slo(DIGITS, "{candidates: [ml.c5.xlarge]}")).errors() == [
        "config/sagestack.yaml:15:10: endpoints.digits.slo: give at least one target "
        "(p95_ms, p99_ms, requests_per_second, ttft_ms, tokens_per_second)"
    ]
    errors = project.spec(with_slo(DIGITS, "{p95_ms: 20, p99_ms: 10}")).errors()
    assert len(errors) == 1 and "p99_ms (10) is below p95_ms (20)" in errors[0]
    errors = project.spec(with_slo(DIGITS, "{p95_ms: 20, latency: 3}")).errors()
    assert len(errors) == 1 and errors[0].startswith("config/sagestack.yaml:15:") and "latency" in errors[0]
    errors = project.spec(with_slo(DIGITS, "{p95_ms: 20, candidates: [ml.c5.xlarge, ml.c5.xlarge]}")).errors()
    assert len(errors) == 1 and "names an instance type twice" in errors[0]
    errors = project.spec(with_slo(DIGITS, "{p95_ms: 20, candidates: [ml.c5.xlrge]}")).errors()
    assert (
        len(errors) == 1 and "endpoints.digits.slo.candidates[0]" in errors[0] and "ml.c5.xlarge" in errors[0]
    )
    assert project.spec(with_slo(DIGITS, "{p95_ms: 20, requests_per_second: 100}")).load().spec


def test_endpoint_slo_llm_keys(project):
    assert findings(project, "endpoint-slo-llm-keys", with_slo(DIGITS, "{p95_ms: 20}")) == []
    assert findings(
        project, "endpoint-slo-llm-keys", with_slo(DIGITS, "{ttft_ms: 200, tokens: {input: 8, output: 8}}")
    ) == [
        "endpoints.digits.slo.ttft_ms: ttft_ms is an LLM target, but 'digits' serves no llm: (it answers "
        "each request whole); use p95_ms, p99_ms or requests_per_second",
        "endpoints.digits.slo.tokens: tokens is an LLM target, but 'digits' serves no llm: (it answers "
        "each request whole); use p95_ms, p99_ms or requests_per_second",
    ]


def test_endpoint_slo_candidates(project):
    ok = with_slo(DIGITS, "{p95_ms: 20, candidates: [ml.c5.large, ml.c5.xlarge, ml.c5.2xlarge]}")
    assert findings(project, "endpoint-slo-candidates", ok) == []
    assert findings(project, "endpoint-slo-candidates", ok.replace("ml.c5.large", "ml.m5.large")) == [
        "endpoints.digits.slo.candidates.0: ml.m5.large cannot run the model compiled for ml_c5 (it runs on "
        "ml.c5.* instances); list ml.c5.* candidates"
    ]


def test_endpoint_slo_batching_delay(project):
    assert findings(project, "endpoint-slo-batching-delay", with_slo(DIGITS, "{p95_ms: 20}")) == []
    assert findings(project, "endpoint-slo-batching-delay", with_slo(DIGITS, "{p95_ms: 5, p99_ms: 40}")) == [
        "endpoints.digits.slo.p95_ms: p95_ms 5 is not above batching.max_delay_ms 5: a request whose batch "
        "does not fill waits that long before its forward pass"
    ]


def llm_with_slo(slo: str, instance_type: str = "ml.g5.2xlarge", **llm: object) -> str:
    return llm_endpoint(instance_type, **llm) + f"    slo: {slo}\n"


def test_llm_slo_token_profile(project):
    ok = llm_with_slo("{ttft_ms: 500, tokens: {input: 512, output: 128}}", max_total_tokens=4096)
    assert findings(project, "llm-slo-token-profile", ok) == []
    assert findings(project, "llm-slo-token-profile", llm_with_slo("{ttft_ms: 500}")) == [
        "endpoints.chat.slo: 'chat' serves an LLM, but its slo has no token length profile; add tokens: "
        "{input: N, output: M} (prompt and generated tokens per request)"
    ]
    assert findings(project, "llm-slo-token-profile", ok.replace("4096", "600")) == [
        "endpoints.chat.slo.tokens: tokens.input + tokens.output = 640 is more than llm.max_total_tokens "
        "600: the container refuses such requests"
    ]
    short = llm_with_slo("{ttft_ms: 500, tokens: {input: 512, output: 128}}", max_input_tokens=256)
    assert findings(project, "llm-slo-token-profile", short) == [
        "endpoints.chat.slo.tokens.input: tokens.input 512 is more than llm.max_input_tokens 256: the "
        "container refuses such prompts"
    ]


def test_llm_slo_bandwidth(project):
    # 1e9 fp16 parameters: 2.0 GB of weights; an A10G reads 600 GB/s (300 tokens/s per user at most),
    # an L4 300 GB/s (150).
    profile = "tokens: {input: 512, output: 128}"
    ok = llm_with_slo(f"{{tokens_per_second: 250, ttft_ms: 50, {profile}}}", "[ml.g5.2xlarge, ml.g6.2xlarge]")
    assert findings(project, "llm-slo-bandwidth", ok) == []
    fast = ok.replace("tokens_per_second: 250", "tokens_per_second: 400")
    assert findings(project, "llm-slo-bandwidth", fast) == [
        "endpoints.chat.slo.tokens_per_second: tokens_per_second 400 per user is above what any candidate's "
        "memory bandwidth allows: ml.g5.2xlarge: 600 GB/s / 2.0 GB of weights = at most 300 tokens/s per "
        "user; ml.g6.2xlarge: 300 GB/s / 2.0 GB of weights = at most 150 tokens/s per user"
    ]
    # quantized to 4 bits, the same target fits: a quarter of the bytes
    assert (
        findings(
            project,
            "llm-slo-bandwidth",
            fast.replace("parameters: 1.0e9", "parameters: 1.0e9\n      quantization: awq"),
        )
        == []
    )
    # candidates replace the pools: an H100's 3,350 GB/s reaches it
    candidates = fast.replace(profile, f"{profile}, candidates: [ml.g5.2xlarge, ml.p5.4xlarge]")
    assert findings(project, "llm-slo-bandwidth", candidates) == []
    instant = ok.replace("ttft_ms: 50", "ttft_ms: 2")
    assert findings(project, "llm-slo-bandwidth", instant) == [
        "endpoints.chat.slo.ttft_ms: ttft_ms 2 is less than one read of the weights on any candidate (at "
        "least 3.3 ms: 2.0 GB at 600 GB/s)"
    ]
    # a CPU candidate: the catalog bounds nothing there, so no verdict
    cpu = fast.replace(profile, f"{profile}, candidates: [ml.g5.2xlarge, ml.m5.xlarge]")
    assert findings(project, "llm-slo-bandwidth", cpu) == []


def test_slo_rules_locate_their_findings(project):
    errors = project.spec(llm_with_slo("{ttft_ms: 500}")).errors()
    assert errors == [
        "config/sagestack.yaml:16:10: endpoints.chat.slo: 'chat' serves an LLM, but its slo has no token "
        "length profile; add tokens: {input: N, output: M} (prompt and generated tokens per request) "
        "[llm-slo-token-profile]"
    ]


def test_a_sweep_point_runs_the_batch_it_names_even_where_the_containers_variable_is_set():
    """llm.environment's OPTION_MAX_ROLLING_BATCH_SIZE wins over max_batch_size (as in the cloud):
    a sweep point drops it, so the row labelled batch 8 runs 8 sequences at once."""
    from sagestack.llm.models import LlmSpec
    from sagestack.llm.sizing import max_batch
    from sagestack.local.bench.llm import swept

    spec = LlmSpec.model_validate(
        {
            "container": "djl-lmi",
            "parameters": 1.0e9,
            "weights": {"s3": "s3://weights/llama/"},
            "environment": {"OPTION_MAX_ROLLING_BATCH_SIZE": "32"},
        }
    )
    assert max_batch(spec)[0] == 32
    point = swept(spec, 8)
    assert max_batch(point) == (8, "max_batch_size")
    assert "OPTION_MAX_ROLLING_BATCH_SIZE" not in point.environment
