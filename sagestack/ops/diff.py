"""What a deploy would change, resource by resource: the synthesized template against the deployed
one (GetTemplate), each change an addition, an update, a replacement or a removal.

Which property changes replace a resource is CloudFormation's own knowledge: the resource provider
schemas' `createOnlyProperties` (core/catalog/data/cfn_create_only.json, taken from the schemas
cfn-lint ships; tests/support/cfn_schemas.py writes it and a test holds it equal). A resource whose
logical ID changes is replaced too (CloudFormation creates the new ID and deletes the old), and a
resource that names a replaced one (Ref, Fn::GetAtt, Fn::Sub) sees that value change: an endpoint
whose endpoint config is replaced is updated, though its own template text is the same."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

ADD, UPDATE, REPLACE, REMOVE = "add", "update", "replace", "remove"
IGNORED_TYPES = frozenset({"AWS::CDK::Metadata"})
# What a stack deletes or replaces with its data: a retained one is left behind, unmanaged, and
# the new one starts empty; any other is deleted with what it holds.
STATEFUL_TYPES = {
    "AWS::S3::Bucket": "bucket",
    "AWS::KMS::Key": "KMS key",
    "AWS::Logs::LogGroup": "log group",
    "AWS::SageMaker::ModelPackageGroup": "model package group",
    "AWS::ECR::Repository": "ECR repository",
    "AWS::EFS::FileSystem": "EFS file system",
    "AWS::FSx::FileSystem": "FSx file system",
    "AWS::SageMaker::MlflowTrackingServer": "MLflow tracking server",
    "AWS::SageMaker::Cluster": "HyperPod cluster",
    "AWS::DynamoDB::Table": "DynamoDB table",
}
RETAINING = ("Retain", "RetainExceptOnCreate", "Snapshot")


@cache
def create_only() -> dict[str, tuple[tuple[str, ...], ...]]:
    """Resource type → its create-only property paths (each a tuple of keys; `*` is any item)."""
    text = resources.files("sagestack.core.catalog").joinpath("data/cfn_create_only.json").read_text()
    table: dict[str, list[str]] = json.loads(text)
    return {t: tuple(tuple(p.split("/")) for p in paths) for t, paths in table.items()}


@dataclass(frozen=True)
class ResourceChange:
    """One resource's change. `causes`: why it is replaced (create-only properties, the logical ID,
    the type); `old`/`new`: its template entries (None when added/removed)."""

    logical_id: str
    type: str
    action: str
    properties: tuple[str, ...] = ()
    causes: tuple[str, ...] = ()
    old: Mapping[str, Any] | None = None
    new: Mapping[str, Any] | None = None
    old_id: str | None = None  # a replacement by a new logical ID: the one it replaces

    @property
    def retained(self) -> bool:
        """Whether what this change deletes is kept: the old entry's UpdateReplacePolicy for a
        replacement, its DeletionPolicy for a removal."""
        if self.old is None:
            return False
        policy = "DeletionPolicy" if self.action == REMOVE else "UpdateReplacePolicy"
        return str(self.old.get(policy, "Delete")) in RETAINING

    @property
    def stateful(self) -> str | None:
        """What kind of data this resource holds, or None."""
        if self.type in STATEFUL_TYPES:
            return STATEFUL_TYPES[self.type]
        if self.old is not None and str(self.old.get("DeletionPolicy")) in RETAINING:
            return "retained resource"
        return None


@dataclass
class StackDiff:
    """One stack: its changes, and whether it is deployed (`status` from DescribeStacks)."""

    name: str
    path: str
    status: str | None
    changes: list[ResourceChange] = field(default_factory=list)
    old: Mapping[str, Any] = field(default_factory=dict)
    new: Mapping[str, Any] = field(default_factory=dict)

    @property
    def deployed(self) -> bool:
        return self.status is not None


def compare(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[ResourceChange]:
    """Every resource change from the deployed template `old` (None: not deployed) to `new`."""
    before = _resources(old or {})
    after = _resources(new)
    changes: dict[str, ResourceChange] = {}
    for lid in before.keys() & after.keys():
        change = _changed(lid, before[lid], after[lid], set())
        if change is not None:
            changes[lid] = change
    removed = {lid: before[lid] for lid in before.keys() - after.keys()}
    added = {lid: after[lid] for lid in after.keys() - before.keys()}
    for lid, entry in added.items():
        moved = _moved_from(entry, removed)
        if moved is not None:
            changes[lid] = ResourceChange(
                lid, entry["Type"], REPLACE, causes=(f"logical ID {moved} → {lid}",),
                old=removed.pop(moved), new=entry, old_id=moved,
            )  # fmt: skip
        else:
            changes[lid] = ResourceChange(lid, entry["Type"], ADD, new=entry)
    for lid, entry in removed.items():
        changes[lid] = ResourceChange(lid, entry["Type"], REMOVE, old=entry)
    _cascade(changes, before, after)
    order = {ADD: 1, UPDATE: 2, REPLACE: 0, REMOVE: 0}
    return sorted(changes.values(), key=lambda c: (order[c.action], c.logical_id))


def _resources(template: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    found = template.get("Resources") or {}
    return {lid: r for lid, r in found.items() if r.get("Type") not in IGNORED_TYPES}


def _moved_from(entry: Mapping[str, Any], removed: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The removed logical ID an added resource takes over: the removed one of its type with the
    same properties, else the only removed one of its type."""
    same = [lid for lid, r in removed.items() if r["Type"] == entry["Type"]]
    alike = [lid for lid in same if removed[lid].get("Properties") == entry.get("Properties")]
    if len(alike) == 1:
        return alike[0]
    return same[0] if len(same) == 1 else None


def _changed(
    lid: str, old: Mapping[str, Any], new: Mapping[str, Any], moved: set[str]
) -> ResourceChange | None:
    """The change of a resource kept under its logical ID; `moved`: properties whose value changes
    because they name a replaced resource."""
    if old.get("Type") != new.get("Type"):
        return ResourceChange(lid, new["Type"], REPLACE, causes=("its type",), old=old, new=new)
    before, after = old.get("Properties") or {}, new.get("Properties") or {}
    props = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} | moved
    policies = [k for k in ("DeletionPolicy", "UpdateReplacePolicy") if old.get(k) != new.get(k)]
    if not props and not policies:
        return None
    causes = tuple(
        "/".join(path)
        for path in create_only().get(new["Type"], ())
        if path[0] in props and (path[0] in moved or _at(before, path) != _at(after, path))
    )
    action = REPLACE if causes else UPDATE
    return ResourceChange(lid, new["Type"], action, tuple(sorted(props)) + tuple(policies), causes, old, new)


def _at(value: Any, path: tuple[str, ...]) -> list[Any]:
    """The values at a create-only path (`*`: every item of a list)."""
    if not path:
        return [value]
    head, rest = path[0], path[1:]
    if head == "*":
        return [v for item in value for v in _at(item, rest)] if isinstance(value, list) else []
    if isinstance(value, Mapping) and head in value:
        return _at(value[head], rest)
    return []


def _cascade(changes: dict[str, ResourceChange], before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
    """A replaced resource has a new physical ID, name and ARN: every property that names it
    changes too, which may replace that resource in turn."""
    while True:
        replaced = {c.old_id or c.logical_id for c in changes.values() if c.action == REPLACE}
        replaced |= {c.logical_id for c in changes.values() if c.action == REPLACE}
        grew = False
        for lid in before.keys() & after.keys():
            if lid in changes and changes[lid].action == REPLACE:
                continue
            props = after[lid].get("Properties") or {}
            moved = {k for k, v in props.items() if _names(v) & replaced}
            known = set(changes[lid].properties) if lid in changes else set()
            if moved - known:
                change = _changed(lid, before[lid], after[lid], moved)
                if change is not None:
                    changes[lid] = change
                    grew = True
        if not grew:
            return


_SUB = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[^}]*)?\}")


def _names(value: Any) -> set[str]:
    """The logical IDs a property value refers to."""
    found: set[str] = set()
    for node in _walk(value):
        if isinstance(node, Mapping) and len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                target = arg[0] if isinstance(arg, list) else str(arg).split(".")[0]
                found.add(str(target))
            elif key == "Fn::Sub":
                text = arg[0] if isinstance(arg, list) else arg
                found |= set(_SUB.findall(str(text)))
    return found


def _walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def text_of(value: Any) -> str:
    """Every string in a value joined (a state machine's DefinitionString is an Fn::Join of parts)."""
    return "".join(v for v in _walk(value) if isinstance(v, str))


# Stack states whose template is not what runs: a creation that failed and rolled back, a change set
# never executed.
NOT_DEPLOYED = frozenset({"ROLLBACK_COMPLETE", "REVIEW_IN_PROGRESS", "DELETE_COMPLETE"})


def deployed_template(cfn: Any, name: str) -> tuple[str | None, dict[str, Any]]:
    """A stack's status and its deployed template (GetTemplate); (None, {}) when it is not deployed."""
    from botocore.exceptions import ClientError

    try:
        (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "ValidationError":  # "… does not exist"
            return None, {}
        raise
    status = str(stack["StackStatus"])
    if status in NOT_DEPLOYED:
        return None, {}
    body = cfn.get_template(StackName=stack["StackId"], TemplateStage="Original")["TemplateBody"]
    return status, body if isinstance(body, dict) else json.loads(body)


def against_deployed(cfn: Any, stacks: Any) -> list[StackDiff]:
    """Each synthesized stack (ops/cdk_cli.py's AssemblyStack) against its deployed template."""
    out = []
    for stack in stacks:
        status, old = deployed_template(cfn, stack.name)
        new = stack.template()
        out.append(StackDiff(stack.name, stack.path, status, compare(old if status else None, new), old, new))
    return out
