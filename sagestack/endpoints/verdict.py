"""The verdict of a recommendation job: per candidate, what it measured (latency, throughput), what
it costs (per 1,000 requests, or per million tokens for an LLM) and whether it meets the endpoint's
target — read from the job's Describe answer (the pipeline's output), never from a guess. The
cheapest candidate that meets the target is the recommendation; a target no candidate meets is a
verdict too ("none meets"), with each candidate's shortfall.

Inference Recommender reports per recommendation `Metrics` {ModelLatency (ms, at the percentile of
the job's latency threshold), MaxInvocations (per minute), CostPerInference, CostPerHour}; an AI
recommendation job `ExpectedPerformance` [{Metric, Stat, Value, Unit}] (strings), its metrics named
as its constraints are ('ttft-ms', 'throughput', 'cost')."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagestack.endpoints.models import SloSpec

WIDTH = 80


@dataclass(frozen=True)
class Row:
    instance_type: str
    latency_ms: float | None  # classic: the job's latency percentile; LLM: time to first token
    throughput: float | None  # classic: requests/s; LLM: tokens/s
    cost: float | None  # classic: USD per 1,000 requests; LLM: USD per million tokens
    shortfalls: tuple[str, ...]  # empty: meets the target
    count: int = 1

    @property
    def meets(self) -> bool:
        return not self.shortfalls and (self.latency_ms is not None or self.throughput is not None)


@dataclass(frozen=True)
class Verdict:
    endpoint: str
    kind: str  # "llm" | "classic"
    rows: tuple[Row, ...]
    candidates: tuple[str, ...]

    @property
    def best(self) -> Row | None:
        meeting = [r for r in self.rows if r.meets]
        return min(meeting, key=lambda r: (r.cost is None, r.cost or 0.0)) if meeting else None

    @property
    def unmeasured(self) -> tuple[str, ...]:
        seen = {r.instance_type for r in self.rows}
        return tuple(c for c in self.candidates if c not in seen)


def _num(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _shortfalls(slo: SloSpec, kind: str, latency: float | None, throughput: float | None) -> tuple[str, ...]:
    out = []
    if kind == "classic":
        limit = slo.p95_ms if slo.p95_ms is not None else slo.p99_ms
        if limit is not None and (latency is None or latency > limit):
            out.append(f"latency {_fmt(latency)} ms > {limit:g}")
        if slo.requests_per_second is not None and (
            throughput is None or throughput < slo.requests_per_second
        ):
            out.append(f"{_fmt(throughput)} req/s < {slo.requests_per_second:g}")
    else:
        if slo.ttft_ms is not None and (latency is None or latency > slo.ttft_ms):
            out.append(f"TTFT {_fmt(latency)} ms > {slo.ttft_ms:g}")
        if slo.tokens_per_second is not None and (throughput is None or throughput < slo.tokens_per_second):
            out.append(f"{_fmt(throughput)} tok/s < {slo.tokens_per_second:g}")
    return tuple(out)


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:,.4g}"


def _classic_rows(answer: Mapping[str, Any], slo: SloSpec) -> list[Row]:
    rows = []
    for rec in answer.get("InferenceRecommendations") or []:
        m = rec.get("Metrics") or {}
        config = rec.get("EndpointConfiguration") or {}
        latency = _num(m.get("ModelLatency"))
        per_minute = _num(m.get("MaxInvocations"))
        throughput = None if per_minute is None else per_minute / 60
        per_inference = _num(m.get("CostPerInference"))
        rows.append(
            Row(
                config.get("InstanceType", "?"),
                latency,
                throughput,
                None if per_inference is None else per_inference * 1000,
                _shortfalls(slo, "classic", latency, throughput),
                int(config.get("InitialInstanceCount") or 1),
            )
        )
    return rows


def _metric(perf: list[Mapping[str, Any]], *names: str) -> float | None:
    for p in perf:
        if str(p.get("Metric", "")).lower() in names:
            return _num(p.get("Value"))
    return None


def _llm_rows(answer: Mapping[str, Any], slo: SloSpec) -> list[Row]:
    rows = []
    for rec in answer.get("Recommendations") or []:
        deploy = rec.get("DeploymentConfiguration") or {}
        details = (rec.get("ModelDetails") or {}).get("InstanceDetails") or [{}]
        instance = deploy.get("InstanceType") or details[0].get("InstanceType") or "?"
        perf = rec.get("ExpectedPerformance") or []
        latency = _metric(perf, "ttft-ms", "ttft")
        throughput = _metric(perf, "throughput", "tokens-per-second")
        rows.append(
            Row(
                instance,
                latency,
                throughput,
                _metric(perf, "cost", "cost-per-million-tokens"),
                _shortfalls(slo, "llm", latency, throughput),
                int(deploy.get("InstanceCount") or details[0].get("InstanceCount") or 1),
            )
        )
    return rows


def verdict(
    endpoint: str, kind: str, slo: SloSpec, candidates: tuple[str, ...], answer: Mapping[str, Any]
) -> Verdict:
    """The verdict from a Describe answer (DescribeAIRecommendationJob or
    DescribeInferenceRecommendationsJob, as the pipeline's output holds it)."""
    rows = _llm_rows(answer, slo) if kind == "llm" else _classic_rows(answer, slo)
    return Verdict(endpoint, kind, tuple(rows), candidates)


def table_lines(v: Verdict) -> list[str]:
    """The table, 80 columns at most."""
    llm = v.kind == "llm"
    head = ("candidate", "TTFT ms" if llm else "latency ms", "tok/s" if llm else "req/s",
            "$/1M tok" if llm else "$/1k req", "meets")  # fmt: skip
    lines = [f"{head[0]:<20} {head[1]:>10} {head[2]:>9} {head[3]:>9}  {head[4]}"]
    for r in v.rows:
        cost = "?" if r.cost is None else f"{r.cost:,.4f}"
        mark = "yes" if r.meets else "no: " + "; ".join(r.shortfalls)
        start = f"{r.instance_type:<20} {_fmt(r.latency_ms):>10} {_fmt(r.throughput):>9} {cost:>9}  "
        lines.extend(textwrap.wrap(start + mark, WIDTH, subsequent_indent=" " * (len(start) + 4)))
    for c in v.unmeasured:
        lines.append(f"{c:<20} {'-':>10} {'-':>9} {'-':>9}  not measured")
    best = v.best
    if best is None:
        lines.append("Verdict: no candidate meets the target.")
    else:
        lines.append(f"Verdict: {best.instance_type} meets the target at the lowest cost.")
    return lines
