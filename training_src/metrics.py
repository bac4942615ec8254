"""The one format training metrics are printed in. The spec's metric_definitions parse these
lines (SageMaker applies each regex to the job's log), and so does `sagestack local train`."""

from __future__ import annotations

import re

# name=value pairs, space separated, on one line starting with "metrics:".
PREFIX = "metrics:"
PAIR = re.compile(r"([a-z_]+)=([-+0-9.eE]+|nan|inf)")


def format_metrics(**values: float | int) -> str:
    parts = []
    for name, value in values.items():
        parts.append(f"{name}={value}" if isinstance(value, int) else f"{name}={value:.6f}")
    return f"{PREFIX} " + " ".join(parts)


def parse_metrics(line: str) -> dict[str, float]:
    if not line.startswith(PREFIX):
        return {}
    return {name: float(value) for name, value in PAIR.findall(line)}


def metric_regex(name: str) -> str:
    """The regex a spec's metric_definitions should use for `name` (first group = the value)."""
    return rf"{name}=([-+0-9.eE]+)"
