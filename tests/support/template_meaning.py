"""What a synthesized template means, independent of how the code that built it is arranged.

`meaning(assembly_dir)` reads every stack template of a cloud assembly (nested stages included) and
returns {stack: {logical id: {"Type", "Properties", "DependsOn", "DeletionPolicy", …}}} with what
carries no meaning taken out: CDK metadata, the order of IAM statements, actions and resources
(IAM evaluates them as sets), and asset hashes (the same files give the same hash; a layout change
that moves no file must not show up, and a refactor of the code must not change what is deployed).

The baseline in tests/constructs/baseline/ was written before the construct library was split out
of the stacks; tests/constructs/test_template_meaning.py compares today's templates with it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# Resources whose logical ID is their identity: a changed ID replaces them and loses their data.
STATEFUL_TYPES = (
    "AWS::KMS::Key",
    "AWS::S3::Bucket",
    "AWS::ECR::Repository",
    "AWS::SageMaker::ModelPackageGroup",
    "AWS::Logs::LogGroup",
)
_HASH = re.compile(r"[0-9a-f]{64}")
_SET_KEYS = ("Action", "NotAction", "Resource", "NotResource")


def _join_to_json(node: dict[str, Any]) -> Any:
    """A state machine's Fn::Join of JSON text and references, as the JSON it renders, with each
    reference kept as a marker string (so key order in the text no longer matters)."""
    sep, parts = node["Fn::Join"]
    text = sep.join(
        p if isinstance(p, str) else "<ref " + json.dumps(p, sort_keys=True).replace('"', "'") + ">"
        for p in parts
    )
    return json.loads(text)


def _normalize(node: Any, key: str = "") -> Any:
    if key == "DefinitionString" and isinstance(node, dict) and "Fn::Join" in node:
        return _normalize(_join_to_json(node))
    if isinstance(node, dict):
        out = {k: _normalize(v, k) for k, v in node.items()}
        if key == "PolicyDocument" or ("Statement" in out and "Version" in out):
            out["Statement"] = sorted(out.get("Statement", []), key=lambda s: json.dumps(s, sort_keys=True))
        return out
    if isinstance(node, list):
        items = [_normalize(v) for v in node]
        if key in _SET_KEYS:
            return sorted(items, key=lambda s: json.dumps(s, sort_keys=True))
        return items
    if isinstance(node, str):
        text = _HASH.sub("<hash>", node)
        if key == "DefinitionString" or text.startswith("{"):
            try:
                return _normalize(json.loads(text))
            except ValueError:
                return text
        return text
    return node


def _templates(assembly: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    manifest = json.loads((assembly / "manifest.json").read_text())
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") == "aws:cloudformation:stack":
            props = artifact["properties"]
            label = props.get("stackName", name)
            out[label] = json.loads((assembly / props["templateFile"]).read_text())
        elif artifact.get("type") == "cdk:cloud-assembly":
            out.update(_templates(assembly / artifact["properties"]["directoryName"]))
    return out


def meaning(assembly_dir: str | Path) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}
    for stack, template in sorted(_templates(Path(assembly_dir)).items()):
        resources = {}
        for lid, res in sorted(template.get("Resources", {}).items()):
            if res.get("Type") == "AWS::CDK::Metadata":
                continue
            res = {k: v for k, v in res.items() if k != "Metadata"}
            if isinstance(res.get("DependsOn"), list):
                res["DependsOn"] = sorted(res["DependsOn"])
            resources[lid] = _normalize(res)
        result[stack] = resources
    return result


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Human-readable differences: stacks, logical IDs, types and properties."""
    out = []
    for stack in sorted(set(before) | set(after)):
        b, a = before.get(stack), after.get(stack)
        if b is None or a is None:
            out.append(f"{stack}: stack {'added' if b is None else 'removed'}")
            continue
        for lid in sorted(set(b) | set(a)):
            if lid not in a:
                out.append(f"{stack}/{lid}: removed ({b[lid]['Type']})")
            elif lid not in b:
                out.append(f"{stack}/{lid}: added ({a[lid]['Type']})")
            elif a[lid] != b[lid]:
                sm_b = b[lid].get("Properties", {}).get("DefinitionString")
                sm_a = a[lid].get("Properties", {}).get("DefinitionString")
                if (
                    isinstance(sm_a, dict)
                    and isinstance(sm_b, dict)
                    and "States" in sm_a
                    and "States" in sm_b
                ):
                    for state in sorted(set(sm_a["States"]) | set(sm_b["States"])):
                        x, y = sm_b["States"].get(state), sm_a["States"].get(state)
                        if x != y:
                            out.append(
                                f"{stack}/{lid} state {state!r}: {json.dumps(x)[:300]} -> {json.dumps(y)[:300]}"
                            )
                    continue
                for field in sorted(set(a[lid]) | set(b[lid])):
                    if a[lid].get(field) != b[lid].get(field):
                        out.append(
                            f"{stack}/{lid}.{field}: {json.dumps(b[lid].get(field))[:400]} -> "
                            f"{json.dumps(a[lid].get(field))[:400]}"
                        )
    return out


def dangling_transitions(definition: dict[str, Any]) -> list[str]:
    """Transitions to states that do not exist, and states nothing reaches (Step Functions refuses
    the first at CreateStateMachine; a local interpreter may not). `definition` may be the template's
    Fn::Join of text and references."""
    if "Fn::Join" in definition:
        definition = _join_to_json(definition)
    states = definition["States"]
    targets: dict[str, list[str]] = {}
    for name, state in states.items():
        nxt = [state.get("Next"), state.get("Default")]
        nxt += [c.get("Next") for c in state.get("Choices", [])]
        nxt += [c.get("Next") for c in state.get("Catch", [])]
        targets[name] = [n for n in nxt if n]
    out = [f"{src} -> {dst}" for src, dsts in targets.items() for dst in dsts if dst not in states]
    if definition["StartAt"] not in states:
        out.append(f"StartAt -> {definition['StartAt']}")
    seen, todo = set(), [definition["StartAt"]]
    while todo:
        name = todo.pop()
        if name in seen or name not in states:
            continue
        seen.add(name)
        todo += targets[name]
    out += [f"unreachable: {name}" for name in states if name not in seen]
    return out
