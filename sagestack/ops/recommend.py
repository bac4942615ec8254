"""An endpoint's recommendation, after its pipeline ran: the verdict read from the newest successful
execution's output (the job's Describe answer, as the pipeline kept it, with the job's name and the
model package it measured), whether that package is still the one the environment serves (a version
approved since was not measured: its verdict is not this one), and the pin — the recommended
instance type written into the environment's overlay as `promote` pins a package: a change to a
reviewed file, never a deployment, and never from a verdict about another model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.names import Names
from sagestack.endpoints.models import EndpointSpec
from sagestack.endpoints.verdict import Verdict, verdict
from sagestack.ops.promote import edit_overlay, overlay_path, set_scalar


class NoRecommendation(Exception):
    """No result to read (nothing deployed, never run, or no run succeeded); the message says which."""


@dataclass(frozen=True)
class Result:
    execution: str
    output: dict[str, Any]


def newest_result(sfn: Any, project: str, env: str, endpoint: str) -> Result:
    """The newest SUCCEEDED execution of the endpoint's recommendation pipeline, and its output."""
    from sagestack.ops import remote  # start-up: boto3's exceptions

    name = Names(project, env).recommendation_state_machine(endpoint)
    try:
        arn = remote.state_machine_arn(sfn, name)
    except remote.PipelineNotFound:
        raise NoRecommendation(
            f"state machine '{name}' is not deployed: deploy the environment first"
        ) from None
    runs = sfn.list_executions(stateMachineArn=arn, statusFilter="SUCCEEDED", maxResults=1)["executions"]
    if not runs:
        raise NoRecommendation(f"'{name}' has no successful run yet: `{measure_command(endpoint, env)}`")
    return result_of(sfn, runs[0]["executionArn"])


def result_of(sfn: Any, execution_arn: str) -> Result:
    """One execution's output (a run of the recommendation pipeline that succeeded)."""
    described = sfn.describe_execution(executionArn=execution_arn)
    return Result(execution_arn, json.loads(described.get("output") or "{}"))


def measure_command(endpoint: str, env: str) -> str:
    """What measures the endpoint's candidates (as it runs when pasted)."""
    return f"sagestack run {endpoint} --env {env} --recommend"


def served_package(sm: Any, names: Names, ep: EndpointSpec) -> str | None:
    """The package the environment serves, which a run measures: its pin, else the newest approved
    version of its group (as the pipeline finds it); None when the group has none approved."""
    if ep.model_package is not None:
        return ep.model_package
    found = sm.list_model_packages(
        ModelPackageGroupName=names.model_package_group,
        ModelApprovalStatus="Approved",
        SortBy="CreationTime",
        SortOrder="Descending",
        MaxResults=1,
    )["ModelPackageSummaryList"]
    return str(found[0]["ModelPackageArn"]) if found else None


def package_version(arn: str) -> str:
    """'…:model-package/<group>/<version>' → '<version>' (an unversioned package: its name)."""
    return arn.rsplit("/", 1)[-1]


def stale_reason(output: dict[str, Any], served: str | None, group: str) -> str | None:
    """Why a classic endpoint's result is not about the model the environment serves now, or None
    when it is: the package the run measured against its pin or its group's newest approved."""
    measured = output.get("ModelPackage")
    if measured is None:
        return "its run did not record which model package it measured"  # a run from before it did
    if measured == served:
        return None
    was = f"it measured model package version {package_version(str(measured))}"
    if served is None:
        return f"{was}; {group} has no approved one now"
    return f"{was}; version {package_version(served)} is served now"


def measures_package(v: Verdict) -> bool:
    """Whether the verdict is about a model package (classic), whose version may have moved on
    since; an LLM's is about the spec's weights."""
    return v.kind == "classic"


def rows_json(v: Verdict) -> list[dict[str, Any]]:
    """The verdict's table as data (`recommend --json`, `status --json`)."""
    return [
        {"instance_type": r.instance_type, "latency_ms": r.latency_ms, "throughput": r.throughput,
         "cost": r.cost, "meets": r.meets, "shortfalls": list(r.shortfalls)}
        for r in v.rows
    ]  # fmt: skip


def verdict_of(endpoint: str, ep: EndpointSpec, output: dict[str, Any]) -> Verdict:
    assert ep.slo is not None
    kind = str(output.get("Kind") or ("llm" if "Recommendations" in output else "classic"))
    candidates = tuple(output.get("Candidates") or ep.slo_candidates)
    return verdict(endpoint, kind, ep.slo, candidates, output)


def pin_recommended(root: Path, env: str, endpoint: str, ep: EndpointSpec, instance_type: str) -> str | None:
    """Write endpoints.<endpoint>.instance_type: <instance_type> into env's overlay (the config loads
    afterwards, or the file is restored). The change as 'key: old → new', or None when it holds already."""
    previous = ep.instance_type
    if list(previous or ()) == [instance_type]:
        return None
    path = overlay_path(root, env)
    edit_overlay(
        root,
        path,
        env,
        ("endpoints", endpoint),
        lambda node: set_scalar(node, "instance_type", instance_type),
    )
    was = ", ".join(previous) if previous else "(none)"
    return f"endpoints.{endpoint}.instance_type: {was} → {instance_type}"
