"""What a deploy's changes (ops/diff.py) do to running things, in sagestack's words: a training job
whose content hash changes trains again, an endpoint config replaced starts new instances (blue/green
or rolling, as the endpoint's DeploymentConfig says), a stateful resource replaced or deleted loses
or leaves behind its data, a run started on deploy."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sagestack.ops.diff import ADD, REMOVE, REPLACE, UPDATE, ResourceChange, StackDiff, text_of

WARNING, NOTICE, INFO = "warning", "notice", "info"
# A job's name in a pipeline's definition: '<prefix>-<job>-<hash8>-<candidate>' (training) or
# '<project>-<search>-<hash8>' (tuning), each after its request field.
_JOB_NAME = re.compile(
    r'"(TrainingJobName|HyperParameterTuningJobName)"\s*:\s*"([A-Za-z0-9-]+?)-([0-9a-f]{8})(-(?:\d+|p))?"'
)
_PIPELINE_OF = re.compile(r"pipeline for (?:job )?'([^']+)'")


@dataclass(frozen=True)
class Effect:
    """One sentence a user reads: what the change does (`kind`: retrains, replaces instances,
    deletes data, …) and how much it matters (`severity`)."""

    severity: str
    kind: str
    subject: str
    text: str


def effects(stack: StackDiff) -> list[Effect]:
    """Every effect of one stack's changes, the ones that cost most first."""
    found: list[Effect] = []
    by_id = {c.logical_id: c for c in stack.changes}
    for change in stack.changes:
        if change.type == "AWS::StepFunctions::StateMachine":
            found += _pipeline(change)
        elif change.type == "AWS::SageMaker::Endpoint":
            found += _endpoint(change, by_id, stack)
        elif _starts_a_run(change):
            found.append(Effect(NOTICE, "starts a run", change.logical_id, _RUN_ON_DEPLOY))
        if change.stateful and change.action in (REPLACE, REMOVE):
            found.append(_data(change))
        elif change.action == REPLACE and change.type not in _SAID:
            found.append(_replaced(change))
    order = {WARNING: 0, NOTICE: 1, INFO: 2}
    return sorted(found, key=lambda e: order[e.severity])


def _starts_a_run(change: ResourceChange) -> bool:
    """A run_on_deploy starter (a custom resource calling StartExecution) created or changed."""
    return (
        change.type.startswith("Custom::")
        and change.action != REMOVE
        and "startExecution" in text_of(change.new or {})
    )


_RUN_ON_DEPLOY = "the deploy starts the pipeline (run_on_deploy): a new content hash trains once"
_SAID = {"AWS::StepFunctions::StateMachine", "AWS::SageMaker::Endpoint"}


def job_names(definition: Any) -> dict[str, tuple[str, str]]:
    """A pipeline's jobs in its definition: stem ('digits-dev-classifier') → (hash, full name)."""
    return {m[1]: (m[2], f"{m[1]}-{m[2]}{m[3]}") for m in _JOB_NAME.findall(_unescaped(definition))}


def _unescaped(definition: Any) -> str:
    return text_of(definition).replace('\\"', '"')


def _pipeline(change: ResourceChange) -> list[Effect]:
    old = job_names((change.old or {}).get("Properties", {}).get("DefinitionString"))
    new_def = (change.new or {}).get("Properties", {}).get("DefinitionString")
    new = job_names(new_def)
    label = _PIPELINE_OF.search(_unescaped(new_def))
    subject = f"pipeline '{label[1]}'" if label else f"pipeline {change.logical_id}"
    if change.action == ADD:
        return [Effect(INFO, "new pipeline", subject, "created; nothing runs until it is started")]
    if change.action == REMOVE:
        return [Effect(NOTICE, "pipeline removed", subject, "deleted (its finished jobs stay in SageMaker)")]
    out = []
    for stem, (digest, name) in new.items():
        if stem in old and old[stem][0] != digest:
            out.append(
                Effect(
                    WARNING,
                    "retrains",
                    subject,
                    f"its content hash changes {old[stem][0]} → {digest}: the next run trains again, "
                    f"as {name} (the last run's job, {old[stem][1]}, is not reused)",
                )
            )
    if not out and "DefinitionString" in change.properties:
        out.append(Effect(INFO, "pipeline updated", subject, "its jobs keep their names: nothing retrains"))
    elif not out:
        out.append(Effect(INFO, "pipeline updated", subject, f"{', '.join(change.properties)} change"))
    return out


def _endpoint(change: ResourceChange, by_id: Mapping[str, ResourceChange], stack: StackDiff) -> list[Effect]:
    props = (change.new or change.old or {}).get("Properties", {})
    subject = f"endpoint {_name(props.get('EndpointName'), change.logical_id)}"
    if change.action == ADD:
        return [Effect(INFO, "new endpoint", subject, "created: instances start and are billed from now")]
    if change.action == REMOVE:
        return [Effect(WARNING, "endpoint deleted", subject, "deleted: its requests fail from then on")]
    if change.action == REPLACE:
        why = ", ".join(change.causes)
        text = f"deleted and created again ({why}): it answers no request in between"
        return [Effect(WARNING, "endpoint replaced", subject, text)]
    if "EndpointConfigName" not in change.properties:
        return [Effect(INFO, "endpoint updated", subject, f"{', '.join(change.properties)} change in place")]
    configs = [by_id[lid] for lid in _refs(props.get("EndpointConfigName")) if lid in by_id]
    what = _variants(configs[0]) if configs else ""
    text = f"a new endpoint config: SageMaker starts new instances{what}, {_rollout(props)}"
    return [Effect(WARNING, "replaces instances", subject, text)]


def _refs(value: Any) -> list[str]:
    if isinstance(value, Mapping) and "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        return [target[0] if isinstance(target, list) else str(target).split(".")[0]]
    if isinstance(value, Mapping) and "Ref" in value:
        return [str(value["Ref"])]
    return []


def _variants(config: ResourceChange) -> str:
    """' (ml.c5.xlarge x1 → ml.c5.2xlarge x1)' when the fleet changes, '' when only the rest does."""

    def fleet(entry: Mapping[str, Any] | None) -> str:
        variants = (entry or {}).get("Properties", {}).get("ProductionVariants") or []
        parts = [
            f"{v['InstanceType']} x{v.get('InitialInstanceCount', 1)}"
            if "InstanceType" in v
            else "serverless"
            for v in variants
            if isinstance(v, Mapping)
        ]
        return ", ".join(parts)

    before, after = fleet(config.old), fleet(config.new)
    if before and after and before != after:
        return f" ({before} → {after})"
    return f" ({after})" if after else ""


def _rollout(props: Mapping[str, Any]) -> str:
    """How the endpoint's DeploymentConfig moves traffic to the new fleet."""
    config = props.get("DeploymentConfig") or {}
    rollback = " and rolls back on its alarms" if config.get("AutoRollbackConfiguration") else ""
    rolling = config.get("RollingUpdatePolicy")
    if rolling:
        batch = rolling.get("MaximumBatchSize", {})
        size = f" {batch.get('Value')} {str(batch.get('Type', '')).lower().replace('_', ' ')}"
        return f"rolling, in batches of{size}{rollback}".replace("instance count", "instance(s)")
    blue = config.get("BlueGreenUpdatePolicy")
    if blue:
        routing = blue.get("TrafficRoutingConfiguration", {}).get("Type", "ALL_AT_ONCE")
        shift = {"CANARY": "a canary first", "LINEAR": "in linear steps"}.get(routing, "all at once")
        return f"blue/green, traffic moved {shift}{rollback}"
    return "blue/green (SageMaker's default: all traffic at once once the new fleet is healthy)"


def _data(change: ResourceChange) -> Effect:
    kind = change.stateful or "resource"
    subject = f"{kind} {change.old_id or change.logical_id}"
    verb = "replaced" if change.action == REPLACE else "removed"
    why = f" ({', '.join(change.causes)})" if change.causes else ""
    if change.retained:
        fate = "the old one is kept (retained, no longer managed by the stack)"
        fate += "; the new one starts empty" if change.action == REPLACE else ""
        return Effect(NOTICE, f"{kind} {verb}", subject, f"{verb}{why}: {fate}")
    return Effect(WARNING, "deletes data", subject, f"{verb}{why}: it is deleted with its data")


def _replaced(change: ResourceChange) -> Effect:
    subject = f"{change.type.split('::')[-1]} {change.logical_id}"
    return Effect(INFO, "replaced", subject, f"replaced ({', '.join(change.causes)})")


def _name(value: Any, fallback: str) -> str:
    return value if isinstance(value, str) else fallback


def summary(stacks: Iterable[StackDiff]) -> dict[str, int]:
    """How many changes of each action, across stacks."""
    counts = {ADD: 0, UPDATE: 0, REPLACE: 0, REMOVE: 0}
    for stack in stacks:
        for change in stack.changes:
            counts[change.action] += 1
    return counts
