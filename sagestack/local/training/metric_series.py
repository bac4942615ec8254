"""A training job's metrics read from its log as SageMaker reads them.

SageMaker applies each of the job's metric definitions (name -> a regex whose first group is the
value) to every line every host writes, and publishes each match as a CloudWatch datapoint
(namespace /aws/sagemaker/TrainingJobs, the metric's name, dimension Host=algo-N, the time the
line was written); DescribeTrainingJob's FinalMetricDataList holds the last value of each
(botocore's MetricData shape: MetricName, Value, Timestamp), and a tuning job reads its objective
the same way. The local run does the same here, line by line as the processes write.

A line starting with `metrics:` (name=value pairs: training_src/metrics.py's format) is read as
well, as a local extra: its `step` and `total_steps` drive the progress display and place each
datapoint of that host on the optimizer-step axis; SageMaker sees such a line as any other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "/aws/sagemaker/TrainingJobs"
METRICS_PREFIX = "metrics:"


# what `mpirun --tag-output` (the SDK v3's MPI driver passes it) puts before each rank's line
OPEN_MPI_TAG = re.compile(r"^\[\d+,\d+\]<stdout>:")


def parse_metrics_line(line: str) -> dict[str, float]:
    """The name=value pairs of a `metrics:` line ({} for any other line), an Open MPI rank's tag
    before it allowed. Same format as training_src/metrics.py (kept in step by a test;
    training_src imports nothing from here)."""
    line = OPEN_MPI_TAG.sub("", line, count=1)
    if not line.startswith(METRICS_PREFIX):
        return {}
    out = {}
    for pair in line[len(METRICS_PREFIX) :].split():
        name, _, value = pair.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def compile_definitions(definitions: Mapping[str, str]) -> dict[str, re.Pattern[str]]:
    """The job's metric_definitions compiled (the spec's rules have checked each has a group)."""
    return {name: re.compile(regex) for name, regex in definitions.items()}


def match_line(line: str, patterns: Mapping[str, re.Pattern[str]]) -> dict[str, float]:
    """Each metric whose regex matches the line, with its first group's value (the first match in
    the line; a group that is not a number is no datapoint)."""
    out: dict[str, float] = {}
    for name, pattern in patterns.items():
        found = pattern.search(line)
        if found is None or pattern.groups < 1:
            continue
        try:
            out[name] = float(found.group(1))
        except (TypeError, ValueError):
            continue
    return out


def last_value(lines: Iterable[str], regex: str) -> float | None:
    """One metric's last value in a log (what FinalMetricDataList and a tuning objective hold)."""
    patterns = compile_definitions({"m": regex})
    value = None
    for line in lines:
        value = match_line(line, patterns).get("m", value)
    return value


@dataclass(frozen=True)
class Datapoint:
    timestamp: float  # seconds since the epoch, when the line was read
    value: float
    step: int | None  # the host's latest `metrics:` step (a local extra; CloudWatch has none)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class MetricSeries:
    """Every host's datapoints of every defined metric, fed one log line at a time by `read`."""

    definitions: Mapping[str, str]
    points: dict[tuple[str, str], list[Datapoint]] = field(default_factory=dict)  # (metric, host)
    extras: list[dict[str, Any]] = field(default_factory=list)  # the `metrics:` lines, with host and time
    _steps: dict[str, int] = field(default_factory=dict)  # host -> latest step

    def __post_init__(self) -> None:
        self._patterns = compile_definitions(self.definitions)

    def read(self, host: str, line: str, timestamp: float) -> dict[str, float]:
        """What the line gives: the defined metrics it matches (recorded as datapoints of `host`),
        over the values of its `metrics:` pairs (recorded as an extra)."""
        extra = parse_metrics_line(line)
        if "step" in extra:
            self._steps[host] = int(extra["step"])
            self.extras.append({"Host": host, "Timestamp": _iso(timestamp), **extra})
        elif extra:
            self.extras.append({"Host": host, "Timestamp": _iso(timestamp), **extra})
        matched = match_line(line, self._patterns)
        for name, value in matched.items():
            point = Datapoint(timestamp, value, self._steps.get(host))
            self.points.setdefault((name, host), []).append(point)
        return {**extra, **matched}

    def hosts(self) -> list[str]:
        return sorted({host for _, host in self.points}, key=_host_order)

    def series(self, name: str, host: str) -> list[Datapoint]:
        return self.points.get((name, host), [])

    def final(self) -> list[dict[str, Any]]:
        """DescribeTrainingJob's FinalMetricDataList: each metric's last value (any host), in the
        order the job defines them; a metric never matched has no entry."""
        out = []
        for name in self.definitions:
            points = [p for (metric, _), ps in self.points.items() if metric == name for p in ps]
            if points:
                last = max(points, key=lambda p: p.timestamp)
                out.append({"MetricName": name, "Value": last.value, "Timestamp": _iso(last.timestamp)})
        return out

    def last(self, name: str) -> float | None:
        return next((m["Value"] for m in self.final() if m["MetricName"] == name), None)

    def document(self) -> dict[str, Any]:
        """metrics.json: the series as CloudWatch holds them, the final list as DescribeTrainingJob
        returns it, and the `metrics:` lines."""
        return {
            "Namespace": NAMESPACE,
            "MetricDefinitions": [{"Name": k, "Regex": v} for k, v in self.definitions.items()],
            "Series": [
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": "Host", "Value": host}],
                    "Datapoints": [
                        {"Timestamp": _iso(p.timestamp), "Value": p.value}
                        | ({"Step": p.step} if p.step is not None else {})
                        for p in self.series(name, host)
                    ],
                }
                for name in self.definitions
                for host in self.hosts()
                if self.series(name, host)
            ],
            "FinalMetricDataList": self.final(),
            "MetricsLines": self.extras,
        }


def _host_order(host: str) -> tuple[int, str]:
    number = host.rsplit("-", 1)[-1]
    return (int(number), host) if number.isdigit() else (0, host)
