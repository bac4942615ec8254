"""Each endpoint's latest recommendation for `sagestack status` (ops/status.py): the verdict of the
newest successful run of its recommendation pipeline — read from the execution's output, where the
pipeline leaves the job's Describe answer, the job's name and the model package it measured — and
whether that package is still the one served (ops/recommend.py decides both; nothing is judged
twice). A run under way or failed since is named; an endpoint never measured says how to measure it.

Reads, to keep status fast: one ListStateMachines for all endpoints; per endpoint one ListExecutions
(its newest runs) and, when one succeeded, one DescribeExecution (a second ListExecutions only when
none of the newest runs succeeded); one ListModelPackages for the environment's group when a classic
endpoint is served unpinned. An endpoint AWS refuses to answer for gets one line saying why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.ops.recommend import (
    measure_command,
    measures_package,
    package_version,
    result_of,
    rows_json,
    served_package,
    stale_reason,
    verdict_of,
)
from sagestack.ops.status_schedules import iso

RUNS = 3  # the newest runs listed; the newest successful one is usually among them


def read_recommendations(
    names: Names,
    slos: Mapping[str, EndpointSpec],
    sfn: Any,
    sm: Any,
    failed: Callable[[Exception], str],
) -> list[dict[str, Any]]:
    """A row per endpoint with slo: candidates (in the spec's order). `failed` turns an error AWS
    gave for one endpoint into its line (missing credentials are raised by it, not kept)."""
    if not slos:
        return []
    wanted = {names.recommendation_state_machine(key): key for key in slos}
    machines: dict[str, str] = {}
    for page in sfn.get_paginator("list_state_machines").paginate():
        machines |= {
            wanted[m["name"]]: m["stateMachineArn"] for m in page["stateMachines"] if m["name"] in wanted
        }
    served: dict[str | None, str | None] = {}  # pin (None: the group's newest approved) -> package

    def serving(ep: EndpointSpec) -> str | None:
        if ep.model_package not in served:
            served[ep.model_package] = served_package(sm, names, ep)
        return served[ep.model_package]

    rows = []
    for key, ep in slos.items():
        row = _blank(names, key, ep)
        if key not in machines:
            row["state"] = "not_deployed"
        else:
            try:
                _read_one(row, ep, machines[key], sfn, serving, names)
            except Exception as e:
                row["state"], row["error"] = "error", failed(e)
        rows.append(row)
    return rows


def _blank(names: Names, key: str, ep: EndpointSpec) -> dict[str, Any]:
    return {
        "endpoint": key,
        "state_machine": names.recommendation_state_machine(key),
        "state": None,  # measured | never_measured | not_deployed | error
        "kind": None,
        "execution": None,
        "measured_at": None,
        "job": None,
        "model_package": None,
        "model_package_version": None,
        "recommended": None,
        "candidates": list(ep.slo_candidates),
        "rows": [],
        "stale": None,
        "newer_run": None,  # a run after the one measured: {"status", "started"}
        "error": None,
        "measure": measure_command(key, names.env),
        "show": f"sagestack recommend {key} --env {names.env}",
    }


def _read_one(
    row: dict[str, Any],
    ep: EndpointSpec,
    machine: str,
    sfn: Any,
    serving: Callable[[EndpointSpec], str | None],
    names: Names,
) -> None:
    listed = sfn.list_executions(stateMachineArn=machine, maxResults=RUNS)["executions"]
    runs = sorted(listed, key=lambda e: e["startDate"], reverse=True)
    done = next((e for e in runs if e["status"] == "SUCCEEDED"), None)
    if done is None and len(runs) == RUNS:  # none of the newest: an older run may have succeeded
        found = sfn.list_executions(stateMachineArn=machine, statusFilter="SUCCEEDED", maxResults=1)
        done = next(iter(found["executions"]), None)
    newer = runs[0] if runs and (done is None or runs[0]["executionArn"] != done["executionArn"]) else None
    if newer is not None:
        row["newer_run"] = {"status": newer["status"], "started": iso(newer.get("startDate"))}
    if done is None:
        row["state"] = "never_measured"
        return
    result = result_of(sfn, done["executionArn"])
    v = verdict_of(row["endpoint"], ep, result.output)
    measured = result.output.get("ModelPackage")
    row |= {
        "state": "measured",
        "kind": v.kind,
        "execution": done["executionArn"].rsplit(":", 1)[-1],
        "measured_at": iso(done.get("stopDate") or done.get("startDate")),
        "job": result.output.get("JobName"),
        "model_package": measured,
        "model_package_version": None if measured is None else package_version(str(measured)),
        "candidates": list(v.candidates),
        "recommended": v.best.instance_type if v.best else None,
        "rows": rows_json(v),
    }
    if measures_package(v):
        row["stale"] = stale_reason(result.output, serving(ep), names.model_package_group)
