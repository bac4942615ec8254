"""What a sweep measured: one row per configuration and load (clients), its figures, and whether
it meets the endpoint's target — the table `local bench` prints, `--json` writes and the chart draws;
and the whole run (Sweep), which `--json` writes and the docs' charts are drawn from (read back)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
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

    @classmethod
    def from_json(cls, data: Any) -> Point:
        """The point `to_json` wrote (ValueError: a key missing or unknown, a figure not a number,
        a verdict that does not follow from the misses)."""
        _keys(data, [*(f.name for f in fields(cls)), "meets"], "a point")
        for key in ("requests_per_second", "p50_ms", "p95_ms", "p99_ms", "ttft_p95_ms", "tokens_per_second"):
            if not (data[key] is None or isinstance(data[key], int | float)):
                raise ValueError(f"a point's {key} is {data[key]!r}, not a number")
        values = {k: v for k, v in data.items() if k != "meets"}
        for key in ("requests_per_second", "p50_ms", "p95_ms", "p99_ms"):  # NaN is written as null
            values[key] = float("nan") if values[key] is None else float(values[key])
        point = cls(**{**values, "misses": tuple(data["misses"])})
        if point.meets != data["meets"]:
            raise ValueError(
                f"a point's meets is {data['meets']}, but its misses and failures say {point.meets}"
            )
        return point


@dataclass(frozen=True)
class Sweep:
    """One `local bench` run: the endpoint, its targets, the workload sent, where the chart was
    written, and every point (what `--json` writes)."""

    endpoint: str
    environment: str | None
    llm: bool
    targets: dict[str, float]
    workload: str
    chart: str
    points: tuple[Point, ...]

    @property
    def title(self) -> str:
        where = self.environment or "project"
        return f"{self.endpoint} ({where}): latency against throughput on this machine"

    def to_json(self) -> dict[str, Any]:
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "points": [p.to_json() for p in self.points],
        }

    @classmethod
    def from_json(cls, data: Any) -> Sweep:
        """The run `to_json` wrote (ValueError naming what does not fit: a format that changed)."""
        _keys(data, [f.name for f in fields(cls)], "a sweep")
        if not isinstance(data["targets"], dict) or not all(k in TARGETS for k in data["targets"]):
            raise ValueError(f"a sweep's targets are {data['targets']!r}: keys of {', '.join(TARGETS)}")
        if not isinstance(data["points"], list):
            raise ValueError("a sweep's points are not a list")
        targets = {k: float(v) for k, v in data["targets"].items()}
        points = tuple(Point.from_json(p) for p in data["points"])
        return cls(**{**data, "targets": targets, "points": points})


def _keys(data: Any, expected: list[str], what: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is {type(data).__name__}, not an object")
    missing = [k for k in expected if k not in data]
    unknown = [k for k in data if k not in expected]
    if missing or unknown:
        said = [f"missing {', '.join(missing)}"] if missing else []
        said += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise ValueError(f"{what} does not read as `local bench --json` writes it: {'; '.join(said)}")


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
