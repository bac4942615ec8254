"""`sagestack local monitor`: Model Monitor's data-quality check on this machine.

The baseline (statistics.json, constraints.json) is computed from a dataset the way the analyzer
lays it out — features named by the CSV header, or `_c0`, `_c1`, … without one; per feature the
inferred type, completeness, mean / sum / std_dev / min / max and a 10-bucket distribution — and
the requests `local serve` captured are checked against it: missing or extra columns, data type,
completeness, and baseline drift (the largest distance between the baseline's and the captured
data's cumulative distributions, above `comparison_threshold`). The violations are written as
constraint_violations.json with the analyzer's check names.

JSON requests are flattened as the model sees them: each instance of {"instances": [...]} (or of a
bare nested list) becomes one row of its numbers in order, `_c0` … `_cN`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.serving.capture import decoded, read_capture

BUCKETS = 10
COMPARISON_THRESHOLD = 0.1


@dataclass
class Dataset:
    names: list[str]
    rows: list[list[Any]]


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _instances(data: Any) -> list[Any]:
    if isinstance(data, dict):
        data = data.get("instances", [data])
    if isinstance(data, list) and data and isinstance(data[0], list):
        return data
    return [data]


def _column_names(width: int) -> list[str]:
    return [f"_c{i}" for i in range(width)]


def read_dataset(path: Path, dataset_format: str, header: bool) -> Dataset:
    """A baseline dataset: CSV (with or without a header) or JSON Lines (objects or arrays)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    rows: list[list[Any]] = []
    names: list[str] = []
    for f in files:
        text = f.read_text()
        if dataset_format == "csv":
            parsed = [r for r in csv.reader(io.StringIO(text)) if r]
            if header and parsed:
                names = names or parsed[0]
                parsed = parsed[1:]
            rows += [[_number(v) for v in r] for r in parsed]
        else:
            for line in text.splitlines():
                if not line.strip():
                    continue
                record = json.loads(line)
                if isinstance(record, dict):
                    names = names or list(record)
                    rows.append([record.get(k) for k in names])
                else:
                    rows.append(_flatten(record))
    width = max((len(r) for r in rows), default=0)
    return Dataset(names or _column_names(width), rows)


def captured_dataset(capture_root: Path) -> Dataset:
    """The inputs an endpoint captured, one row per instance."""
    rows: list[list[Any]] = []
    for record in read_capture(capture_root):
        part = record["captureData"]["endpointInput"]
        body = decoded(part).decode("utf-8", "replace")
        if part.get("encoding") == "CSV":
            rows += [[_number(v) for v in r] for r in csv.reader(io.StringIO(body)) if r]
            continue
        if part.get("encoding") != "JSON":
            continue  # binary payloads carry no features the analyzer can read
        lines = body.splitlines() if "jsonlines" in part.get("observedContentType", "") else [body]
        for line in lines:
            if line.strip():
                rows += [_flatten(i) for i in _instances(json.loads(line))]
    width = max((len(r) for r in rows), default=0)
    return Dataset(_column_names(width), rows)


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text if text != "" else None
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _inferred(values: Sequence[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) is False and isinstance(v, int) for v in present):
        return "Integral"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "Fractional"
    return "String"


def statistics(data: Dataset) -> dict[str, Any]:
    features = []
    for i, name in enumerate(data.names):
        column = [r[i] if i < len(r) else None for r in data.rows]
        kind = _inferred(column)
        present = [v for v in column if v is not None]
        feature: dict[str, Any] = {"name": name, "inferred_type": kind}
        common = {"num_present": len(present), "num_missing": len(column) - len(present)}
        if kind == "String":
            feature["string_statistics"] = {
                "common": common,
                "distinctness": len(set(map(str, present))) / max(1, len(present)),
            }
        else:
            nums = [float(v) for v in present]
            mean = sum(nums) / len(nums) if nums else 0.0
            lo, hi = (min(nums), max(nums)) if nums else (0.0, 0.0)
            feature["numerical_statistics"] = {
                "common": common,
                "mean": mean,
                "sum": sum(nums),
                "std_dev": math.sqrt(sum((x - mean) ** 2 for x in nums) / len(nums)) if nums else 0.0,
                "min": lo,
                "max": hi,
                "distribution": {"kll": {"buckets": _buckets(nums, lo, hi)}},
            }
        features.append(feature)
    return {"version": 0.0, "dataset": {"item_count": len(data.rows)}, "features": features}


def _buckets(values: list[float], lo: float, hi: float) -> list[dict[str, float]]:
    width = (hi - lo) / BUCKETS or 1.0
    counts = [0] * BUCKETS
    for v in values:
        counts[min(BUCKETS - 1, int((v - lo) / width))] += 1
    return [
        {"lower_bound": lo + i * width, "upper_bound": lo + (i + 1) * width, "count": float(c)}
        for i, c in enumerate(counts)
    ]


def constraints(stats: dict[str, Any]) -> dict[str, Any]:
    features = []
    for f in stats["features"]:
        s = f.get("numerical_statistics") or f.get("string_statistics")
        common = s["common"]
        total = common["num_present"] + common["num_missing"]
        entry: dict[str, Any] = {
            "name": f["name"],
            "inferred_type": f["inferred_type"],
            "completeness": common["num_present"] / total if total else 1.0,
        }
        if "numerical_statistics" in f:
            entry["num_constraints"] = {"is_non_negative": f["numerical_statistics"]["min"] >= 0}
        features.append(entry)
    return {
        "version": 0.0,
        "features": features,
        "monitoring_config": {
            "evaluate_constraints": "Enabled",
            "emit_metrics": "Enabled",
            "datatype_check_threshold": 1.0,
            "domain_content_threshold": 1.0,
            "distribution_constraints": {
                "perform_comparison": "Enabled",
                "comparison_threshold": COMPARISON_THRESHOLD,
                "comparison_method": "Robust",
            },
        },
    }


def _cdf(buckets: list[dict[str, float]], values: Iterable[float]) -> list[float]:
    """The share of `values` in each bucket and below, bucketed as the baseline was (a value on an
    edge belongs to the bucket above it; values outside the baseline's range to the end buckets)."""
    values = list(values)
    if not values:
        return [0.0] * len(buckets)
    lo = buckets[0]["lower_bound"]
    width = (buckets[0]["upper_bound"] - lo) or 1.0
    counts = [0] * len(buckets)
    for v in values:
        counts[max(0, min(len(buckets) - 1, int((v - lo) / width)))] += 1
    out, running = [], 0
    for c in counts:
        running += c
        out.append(running / len(values))
    return out


def violations(
    baseline_stats: dict[str, Any], baseline_constraints: dict[str, Any], current: Dataset
) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    config = baseline_constraints.get("monitoring_config", {})
    threshold = float(
        config.get("distribution_constraints", {}).get("comparison_threshold", COMPARISON_THRESHOLD)
    )
    expected = [f["name"] for f in baseline_constraints["features"]]
    width = max((len(r) for r in current.rows), default=0)
    if width < len(expected):
        for name in expected[width:]:
            out.append(
                {
                    "feature_name": name,
                    "constraint_check_type": "missing_column_check",
                    "description": f"There are missing columns in current dataset. Number of columns in current "
                    f"dataset: {width}, Number of columns in baseline constraints: {len(expected)}",
                }
            )
    if width > len(expected):
        out.append(
            {
                "feature_name": "",
                "constraint_check_type": "extra_column_check",
                "description": f"There are extra columns in current dataset. Number of columns in current dataset: "
                f"{width}, Number of columns in baseline constraints: {len(expected)}",
            }
        )
    stats = {f["name"]: f for f in baseline_stats["features"]}
    for i, c in enumerate(baseline_constraints["features"][:width]):
        name = c["name"]
        column = [r[i] if i < len(r) else None for r in current.rows]
        present = [v for v in column if v is not None]
        if c["inferred_type"] in ("Integral", "Fractional"):
            bad = [v for v in present if not isinstance(v, (int, float)) or isinstance(v, bool)]
            if bad:
                out.append(
                    {
                        "feature_name": name,
                        "constraint_check_type": "data_type_check",
                        "description": f"Data type match requirement is not met. Expected data type: {c['inferred_type']}, "
                        f"{len(bad)} of {len(present)} value(s) are not numbers",
                    }
                )
                continue
        completeness = len(present) / len(column) if column else 1.0
        if completeness < c["completeness"] - 1e-9:
            out.append(
                {
                    "feature_name": name,
                    "constraint_check_type": "completeness_check",
                    "description": f"Data completeness requirement is not met. Expected completeness: "
                    f"{c['completeness']:g}, Actual: {completeness:g}",
                }
            )
        numeric = stats.get(name, {}).get("numerical_statistics")
        if numeric and present:
            buckets = numeric["distribution"]["kll"]["buckets"]
            total = sum(b["count"] for b in buckets) or 1.0
            running, base_cdf = 0.0, []
            for b in buckets:
                running += b["count"]
                base_cdf.append(running / total)
            cur_cdf = _cdf(buckets, (float(v) for v in present))
            distance = max(abs(a - b) for a, b in zip(base_cdf, cur_cdf, strict=True))
            if distance > threshold:
                out.append(
                    {
                        "feature_name": name,
                        "constraint_check_type": "baseline_drift_check",
                        "description": f"Baseline drift distance: {distance:.4g} exceeds threshold: {threshold:g}",
                    }
                )
    return out


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path
