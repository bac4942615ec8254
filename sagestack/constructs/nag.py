"""cdk-nag acknowledgements: each one names its rule finding and the reason it is acceptable."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct, IValidation

from sagestack.constructs.read_once import stack_of


def acknowledge(construct: IConstruct, findings: dict[str, str]) -> None:
    """findings: {'AwsSolutions-IAM5[Resource::…]': 'why this is right here', …}"""
    Validations.of(construct).acknowledge(*(Acknowledgment(id=i, reason=r) for i, r in findings.items()))


def nag_text(scope: IConstruct, value: str) -> str:
    """A string with CDK tokens as cdk-nag writes it in finding IDs: Ref X -> <X>, GetAtt X.Arn -> <X.Arn>,
    an import of another stack's output -> the export's name."""
    return _render(stack_of(scope).resolve(value))


def nag_texts(scope: IConstruct, values: Sequence[str]) -> list[str]:
    """nag_text of each value, resolved together: one round trip through jsii for all of them
    (a role's acknowledgements name a dozen ARNs)."""
    return [_render(node) for node in stack_of(scope).resolve(list(values))]


def _render(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and len(node) == 1:
        ((fn, arg),) = node.items()
        if fn == "Ref":
            return f"<{arg}>"
        if fn == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if fn == "Fn::ImportValue" and isinstance(arg, str):
            return arg
        if fn == "Fn::Join":
            sep, parts = arg
            return str(sep).join(_render(p) for p in parts)
    return json.dumps(node)


def unacknowledged_findings(assembly_dir: str | Path) -> list[str]:
    """Every violation in the cloud assembly's validation report, as 'path: rule: description'."""
    report = Path(assembly_dir) / "validation-report.json"
    if not report.exists():
        return []
    data = json.loads(report.read_text())
    out = []
    for plugin in data.get("pluginReports", []):
        for v in plugin.get("violations", []):
            for c in v.get("violatingConstructs", []):
                out.append(f"{c['constructPath']}: {v['ruleName']}: {v['description']}")
    return sorted(out)


@jsii.implements(IValidation)
class _LateAcknowledgement:
    def __init__(self, construct: IConstruct, findings: dict[Any, str]) -> None:
        self._construct = construct
        self._findings = findings

    def validate(self) -> list[str]:
        acknowledge(self._construct, {key(self._construct): reason for key, reason in self._findings.items()})
        return []


def acknowledge_at_synth(construct: IConstruct, findings: dict[Any, str]) -> None:
    """Like acknowledge, for finding IDs that name a value of another stack: each key is a function
    of the construct that returns the ID, called at synth, once CDK has turned cross-stack references
    into imports (`Fn::ImportValue` of the producer's export), which is how cdk-nag names them."""
    construct.node.add_validation(_LateAcknowledgement(construct, findings))
