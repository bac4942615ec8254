"""A registry of semantic spec rules, in the manner of cdk-nag: one small pure function per rule,
each returning the findings for one project spec, each tested with a passing and a failing spec.
Like cdk-nag's NagRules (info, explanation and level together), a rule is declared with its
explanation: why it exists and what to do about a finding (`sagestack rules --explain ID`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sagestack.core.errors import Path_, Severity, SpecIssue
from sagestack.core.yamldoc import Document


class Project(Protocol):
    """What the rules read of a project: the project layer's `ProjectSpec` is one. Core sits below
    the features that define the sections, so a section's entries are `Any` here; each feature's rule
    knows its own section's type."""

    @property
    def project(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def account(self) -> str | None: ...
    @property
    def retain_data(self) -> bool: ...
    @property
    def tags(self) -> Mapping[str, str]: ...
    @property
    def promotion(self) -> Sequence[str]: ...
    @property
    def images(self) -> Mapping[str, Any]: ...
    @property
    def jobs(self) -> Mapping[str, Any]: ...
    @property
    def tuning(self) -> Mapping[str, Any]: ...
    @property
    def endpoints(self) -> Mapping[str, Any]: ...
    @property
    def transforms(self) -> Mapping[str, Any]: ...
    @property
    def clusters(self) -> Mapping[str, Any]: ...
    @property
    def queues(self) -> Mapping[str, Any]: ...
    @property
    def tracking(self) -> Any: ...
    @property
    def delivery(self) -> Any: ...
    def job_of(self, source: str) -> str:
        """The job key a `from:` reference names."""
        ...


@dataclass(frozen=True)
class RuleContext:
    spec: Project
    env: str | None
    root: Path


@dataclass(frozen=True)
class Finding:
    path: Path_
    message: str


Check = Callable[[RuleContext], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    summary: str  # what the rule checks, one line (`sagestack rules`)
    why: str  # what goes wrong without the rule, and where (AWS's own limit or behaviour)
    fix: str  # what to change in the spec
    check: Check


RULES: dict[str, Rule] = {}


def rule(rule_id: str, severity: Severity, summary: str, *, why: str, fix: str) -> Callable[[Check], Check]:
    """Register `fn` as rule `rule_id`; `why` and `fix` are its explanation, required and non-empty."""
    if not why.strip() or not fix.strip():
        raise ValueError(f"rule {rule_id} needs an explanation: why it exists and what to do (why=, fix=)")

    def register(fn: Check) -> Check:
        if rule_id in RULES:
            raise ValueError(f"duplicate rule id {rule_id}")
        RULES[rule_id] = Rule(rule_id, severity, summary, why, fix, fn)
        return fn

    return register


def run_rule(rule_id: str, ctx: RuleContext) -> list[Finding]:
    return list(RULES[rule_id].check(ctx))


def check_spec(ctx: RuleContext, doc: Document | None = None) -> Iterator[SpecIssue]:
    """Every rule's findings, each once (a rule that looks at every candidate of a job may find the
    same job-level problem more than once)."""
    for r in RULES.values():
        for f in dict.fromkeys(r.check(ctx)):
            yield SpecIssue(
                f.message,
                path=f.path,
                location=doc.locate(f.path) if doc else None,
                severity=r.severity,
                rule=r.id,
            )
