"""What of an environment is billed by the hour now (`sagestack cost`'s "running now"): status's
listing (ops/status.py) of its running training jobs and searches, serving endpoints and live
clusters, each at the catalog's on-demand price (capacity/ledger.py's `price_of`, as `plan` prices;
a spot job at the plan's spot estimate). boto3 is not imported here: the caller passes clients."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sagestack.capacity.ledger import SPOT_SAVINGS, Row, price_of
from sagestack.ops.status import (
    Scope,
    endpoint_rows,
    read_clusters,
    read_training_jobs,
    read_tuning_jobs,
)
from sagestack.ops.status_schedules import no_credentials, reason

RUNNING = ("InProgress", "Stopping")
SERVING = ("InService", "Updating", "SystemUpdating", "RollingBack")


def running_now(
    scope: Scope, sm: Any, plan: list[Row], now: datetime, errors: list[str]
) -> list[dict[str, Any]]:
    """What of the environment is billed by the hour now (status's listing), each at the
    catalog's on-demand price (a spot job at the plan's spot estimate)."""
    rows: list[dict[str, Any]] = []
    parts: tuple[tuple[str, Callable[[], list[dict[str, Any]]]], ...] = (
        ("training jobs", lambda: _training(read_training_jobs(scope, sm, now))),
        ("tuning jobs", lambda: _tuning(read_tuning_jobs(scope, sm, now), plan)),
        ("endpoints", lambda: _endpoints(sm, endpoint_rows(scope, sm, errors))),
        ("clusters", lambda: _clusters(read_clusters(scope, sm))),
    )
    for what, read in parts:
        try:
            rows += read()
        except Exception as e:
            if no_credentials(e):
                raise
            errors.append(f"running {what}: {reason(e)}")
    return rows


def _row(
    kind: str, key: str | None, name: str, itype: str | None, count: int, spot: bool = False
) -> dict[str, Any]:
    price = price_of(itype) if itype else None
    per_hour = None if price is None else price * count * ((1 - SPOT_SAVINGS) if spot else 1)
    return {
        "kind": kind,
        "key": key,
        "name": name,
        "instance_type": itype,
        "count": count,
        "spot": spot,
        "price_per_hour": price,
        "per_hour": None if per_hour is None else round(per_hour, 4),
    }


def _training(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        _row("training", j["job"], j["name"], j["instance_type"], j["instance_count"] or 1, j["spot"])
        for j in jobs
        if j["status"] in RUNNING
    ]


def _tuning(searches: list[dict[str, Any]], plan: list[Row]) -> list[dict[str, Any]]:
    """A search's running trials, at the instance type its plan row chose (a tuning job's
    description does not say which of its candidates each trial got)."""
    rows = []
    for s in searches:
        if s["status"] not in RUNNING or not s["in_progress"]:
            continue
        chosen = next((r for r in plan if r.kind == "tuning" and r.key == s["search"] and r.chosen), None)
        itype, per_trial = (chosen.instance_type, chosen.count) if chosen else (None, 1)
        rows.append(_row("search", s["search"], s["name"], itype, s["in_progress"] * per_trial))
    return rows


def _endpoints(sm: Any, endpoints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each serving endpoint's instances: its variants' counts, their types from its endpoint
    config (DescribeEndpoint does not carry them). Serverless variants bill per request: none."""
    rows = []
    for e in endpoints:
        if e["status"] not in SERVING or not e.get("config"):
            continue
        config = sm.describe_endpoint_config(EndpointConfigName=e["config"])
        types = {v["VariantName"]: v.get("InstanceType") for v in config.get("ProductionVariants", [])}
        for v in e["variants"]:
            if v["serverless"]:
                continue
            pools = v["pools"] or [{"instance_type": types.get(v["name"]), "current": v["current"]}]
            for p in pools:
                if p["current"]:
                    rows.append(
                        _row(
                            "endpoint", e["key"], f"{e['name']}/{v['name']}", p["instance_type"], p["current"]
                        )
                    )
    return rows


def _clusters(clusters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        _row("cluster", c["key"], f"{c['name']}/{g['name']}", g["instance_type"], g["current"])
        for c in clusters
        if c["status"] and c["status"] not in ("Deleting", "Failed")
        for g in c["groups"]
        if g["current"]
    ]
