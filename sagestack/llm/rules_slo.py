"""Rules about an LLM endpoint's performance target (`endpoints.<name>.slo`): it states the token
lengths it is measured at, and some candidate's memory bandwidth can reach it (llm/slo.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.llm.rules import Served, served
from sagestack.llm.slo import Ceiling, ceiling


def _targeted(ctx: RuleContext) -> Iterator[tuple[str, Served, Any]]:
    """Each LLM of an endpoint with an slo:, with that slo."""
    for name, s in served(ctx):
        slo = ctx.spec.endpoints[name].slo
        if slo is not None:
            yield name, s, slo


@rule(
    "llm-slo-token-profile",
    "error",
    "an LLM's performance target states its token lengths, within the model's limits",
    why=(
        "An LLM's latency and throughput depend on how long prompts and answers are: time to first "
        "token grows with the prompt (prefill), a request's time with the answer (one decode step a "
        "token). A target without input and output lengths cannot be measured, and two benchmarks of "
        "it would not agree; lengths beyond max_input_tokens / max_total_tokens are refused by the "
        "container."
    ),
    fix="Add slo.tokens: {input: N, output: M} with your traffic's typical lengths, within the limits.",
)
def llm_slo_token_profile(ctx: RuleContext) -> Iterator[Finding]:
    for name, s, slo in _targeted(ctx):
        at = ("endpoints", name, "slo")
        if slo.tokens is None:
            yield Finding(
                at,
                f"'{name}' serves an LLM, but its slo has no token length profile; add tokens: "
                "{input: N, output: M} (prompt and generated tokens per request)",
            )
            continue
        t, spec = slo.tokens, s.spec
        if spec.max_input_tokens is not None and t.input > spec.max_input_tokens:
            yield Finding(
                (*at, "tokens", "input"),
                f"tokens.input {t.input} is more than llm.max_input_tokens {spec.max_input_tokens}: the "
                "container refuses such prompts",
            )
        if spec.max_total_tokens is not None and t.input + t.output > spec.max_total_tokens:
            yield Finding(
                (*at, "tokens"),
                f"tokens.input + tokens.output = {t.input + t.output} is more than llm.max_total_tokens "
                f"{spec.max_total_tokens}: the container refuses such requests",
            )


@rule(
    "llm-slo-bandwidth",
    "error",
    "some candidate's memory bandwidth allows the LLM's tokens/s per user and time to first token",
    why=(
        "Decoding one sequence reads every weight once per token, so one user's tokens/s is at most the "
        "memory bandwidth of the devices a copy spans divided by the weights' bytes (the roofline bound "
        "NVIDIA's and Databricks' inference guides use; bandwidths from the vendors' datasheets in the "
        "catalog), and the first token needs at least one such read. Batching adds users, not one "
        "user's speed; a target above every candidate's ceiling is missed whatever the configuration."
    ),
    fix="Add a candidate with more bandwidth per copy (a larger GPU, a higher tensor_parallel_degree), "
    "serve fewer bytes (quantization: awq / fp8), use speculative decoding, or lower the target.",
)
def llm_slo_bandwidth(ctx: RuleContext) -> Iterator[Finding]:
    for name, s, slo in _targeted(ctx):
        candidates = ctx.spec.endpoints[name].slo_candidates
        found = [ceiling(s.spec, t, s.accelerators) for t in candidates]
        ceilings = [c for c in found if c is not None]
        if not ceilings or len(ceilings) < len(found):
            continue  # a candidate the catalog cannot bound might meet it
        at = ("endpoints", name, "slo")
        speculative = s.spec.optimize is not None and s.spec.optimize.speculative_decoding is not None
        best = max(c.tokens_per_second for c in ceilings)
        if slo.tokens_per_second is not None and not speculative and slo.tokens_per_second > best:
            yield Finding(
                (*at, "tokens_per_second"),
                f"tokens_per_second {slo.tokens_per_second:g} per user is above what any candidate's memory "
                f"bandwidth allows: {_listed(ceilings)}",
            )
        fastest = min(c.first_token_ms for c in ceilings)
        if slo.ttft_ms is not None and slo.ttft_ms < fastest:
            yield Finding(
                (*at, "ttft_ms"),
                f"ttft_ms {slo.ttft_ms:g} is less than one read of the weights on any candidate (at least "
                f"{fastest:.1f} ms: {ceilings[0].weights_gb:.1f} GB at "
                f"{max(c.bandwidth_gbps for c in ceilings):,.0f} GB/s)",
            )


def _listed(ceilings: list[Ceiling]) -> str:
    return "; ".join(c.describe() for c in ceilings)
