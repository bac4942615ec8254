"""`sagestack destroy`: which deployed stacks of an environment sagestack may delete and what each
keeps. A stack is destroyed only when it is one of this app's stacks for the environment and its
tags say sagestack created it (`sagestack:project`, `sagestack:environment`); a stack of that name
without them is someone else's, and the destroy is refused. What a template retains
(DeletionPolicy Retain: `retain_data: true`) is listed before anything is deleted. An environment
named `prod*`, or one the delivery pipeline deploys only after an approval, is protected: it is
destroyed only when its name is typed (`--confirm ENV`, or at the prompt)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagestack.core.names import Names
from sagestack.foundation.rules import PROTECTED_ENV_PREFIXES
from sagestack.ops.diff import NOT_DEPLOYED, RETAINING, STATEFUL_TYPES, deployed_template


@dataclass(frozen=True)
class Kept:
    """A resource the stack's deletion leaves behind."""

    stack: str
    logical_id: str
    type: str
    physical_id: str | None
    policy: str

    @property
    def kind(self) -> str:
        return STATEFUL_TYPES.get(self.type, self.type)


@dataclass
class DestroyPlan:
    """The environment's stacks: `ours` (deployed, sagestack's: destroyed, as app paths for `cdk
    destroy`), `foreign` (deployed under this app's name but not tagged by sagestack: refused),
    `absent` (not deployed) and `stray` (sagestack's for this environment, deployed, but no longer
    in the app: left alone, named)."""

    ours: list[tuple[str, str]] = field(default_factory=list)  # (stack name, app path)
    foreign: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)


def protection(env: str, spec: Any) -> str | None:
    """Why an environment needs its name typed before it is destroyed, or None."""
    if env.startswith(PROTECTED_ENV_PREFIXES):
        return f"'{env}' is a production environment (its name starts with 'prod')"
    delivery = getattr(spec, "delivery", None)
    if delivery is not None and env in delivery.approval:
        return f"the delivery pipeline deploys '{env}' only after an approval"
    return None


def created_by_sagestack(tags: Mapping[str, str], names: Names) -> bool:
    """Whether a stack's tags say sagestack created it for this project and environment."""
    return all(tags.get(k) == v for k, v in names.tags.items())


def plan_destroy(cfn: Any, names: Names, stacks: Sequence[Any]) -> DestroyPlan:
    """What destroying the environment does, read from CloudFormation (`stacks`: its synthesized
    AssemblyStacks, ops/cdk_cli.py)."""
    plan = DestroyPlan()
    deployed = _deployed_of(cfn, names)
    for stack in stacks:
        if stack.name not in deployed:
            plan.absent.append(stack.name)
            continue
        tags = deployed[stack.name]
        if not created_by_sagestack(tags, names):
            plan.foreign.append((stack.name, tags))
            continue
        plan.ours.append((stack.name, stack.path))
        plan.kept += _kept(cfn, stack.name)
    synthesized = {s.name for s in stacks}
    plan.stray = sorted(
        n for n, tags in deployed.items() if n not in synthesized and created_by_sagestack(tags, names)
    )
    return plan


def _deployed_of(cfn: Any, names: Names) -> dict[str, dict[str, str]]:
    """Every deployed stack whose name starts with the environment's prefix → its tags."""
    found: dict[str, dict[str, str]] = {}
    for page in cfn.get_paginator("describe_stacks").paginate():
        for stack in page["Stacks"]:
            name = str(stack["StackName"])
            if name.startswith(f"{names.prefix}-") and stack["StackStatus"] not in NOT_DEPLOYED:
                found[name] = {t["Key"]: t["Value"] for t in stack.get("Tags", [])}
    return found


def _kept(cfn: Any, stack: str) -> list[Kept]:
    """The resources a stack's deletion keeps: DeletionPolicy Retain (or Snapshot) in its deployed
    template, with their physical IDs."""
    _, template = deployed_template(cfn, stack)
    retained = {
        lid: r
        for lid, r in (template.get("Resources") or {}).items()
        if str(r.get("DeletionPolicy")) in RETAINING
    }
    if not retained:
        return []
    physical = {
        r["LogicalResourceId"]: r.get("PhysicalResourceId")
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for r in page["StackResourceSummaries"]
    }
    return [
        Kept(stack, lid, str(r["Type"]), physical.get(lid), str(r["DeletionPolicy"]))
        for lid, r in sorted(retained.items())
    ]
