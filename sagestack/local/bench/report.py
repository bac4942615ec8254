"""What a sweep measured: one row per configuration and load (clients), its figures, and whether
it meets the endpoint's target — the table `local bench` prints, `--json` writes and the chart draws."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

# slo key -> (the row's figure, whether the target is an upper bound)
TARGETS: dict[str, tuple[str, bool]] = {
    "p95_ms": ("p95_ms", True),
    "p99_ms": ("p99_ms", True),
    "requests_per_second": ("requests_per_second", False),
    "ttft_ms": ("ttft_p95_ms", True),
    "tokens_per_second": ("tokens_per_second", False),
}


@dataclass(frozen=True)
class Point:
    """One configuration under one load."""

    configuration: str  # "batch 16, delay 5 ms, 2 workers"
    knobs: dict[str, float]
    clients: int
    requests: int
    failed: int
    requests_per_second: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    ttft_p95_ms: float | None = None  # LLMs: time to the first token
    tokens_per_second: float | None = None  # LLMs: one user's decode rate, median
    misses: tuple[str, ...] = field(default=())  # the slo keys this point misses

    @property
    def meets(self) -> bool:
        return not self.misses and self.failed == 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["misses"] = list(self.misses)
        data["meets"] = self.meets
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}


def judged(point: Point, targets: dict[str, float]) -> Point:
    """`point` with the target keys it misses (a figure not measured misses nothing)."""
    misses = []
    for key, target in targets.items():
        figure_name, upper = TARGETS[key]
        figure = getattr(point, figure_name)
        if figure is None or math.isnan(figure):
            continue
        if (figure > target) if upper else (figure < target):
            misses.append(key)
    return Point(**{**asdict(point), "misses": tuple(misses)})


def targets_of(slo: Any) -> dict[str, float]:
    """The slo's measurable targets, key -> value (none without an slo)."""
    if slo is None:
        return {}
    return {k: float(getattr(slo, k)) for k in TARGETS if getattr(slo, k) is not None}


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank), NaN of nothing."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def best(points: list[Point]) -> Point | None:
    """The point that meets the target with the most requests per second (None: none meets)."""
    meeting = [p for p in points if p.meets]
    return max(meeting, key=lambda p: p.requests_per_second) if meeting else None
