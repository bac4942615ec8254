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


def _normalize(node: Any, key: str = "") -> Any:
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
                for field in sorted(set(a[lid]) | set(b[lid])):
                    if a[lid].get(field) != b[lid].get(field):
                        out.append(
                            f"{stack}/{lid}.{field}: {json.dumps(b[lid].get(field))[:400]} -> "
                            f"{json.dumps(a[lid].get(field))[:400]}"
                        )
    return out
