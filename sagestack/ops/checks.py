"""`sagestack check`: is this machine ready to deploy an environment? One line per check, each
saying what to do when it fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sagestack.capacity.assess import assess
from sagestack.capacity.ledger import snapshot_book
from sagestack.core.catalog.service_model import sagemaker_regions
from sagestack.ops.account import Check, aws_client, live_book
from sagestack.project.environment import ResolvedEnvironment
from sagestack.project.loader import delivery_of
from sagestack.project.requests import render_training

BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"


def _error(e: Exception) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:200]


def check_credentials(plan: ResolvedEnvironment) -> tuple[Check, str | None]:
    try:
        identity = aws_client("sts", plan.region).get_caller_identity()
    except Exception as e:
        return (
            Check("credentials", False, f"none usable ({_error(e)}); run `aws configure` or set AWS_PROFILE"),
            None,
        )
    account = str(identity["Account"])
    if plan.account and plan.account != account:
        return (
            Check(
                "credentials",
                False,
                f"{identity['Arn']} is in account {account}, but '{plan.env}' deploys to {plan.account}; "
                f"use that account's profile",
            ),
            account,
        )
    return Check("credentials", True, f"{identity['Arn']} (account {account})"), account


def check_region(plan: ResolvedEnvironment) -> Check:
    if plan.region in sagemaker_regions():
        return Check("region", True, f"SageMaker is available in {plan.region}")
    return Check("region", False, f"SageMaker has no endpoint in {plan.region}")


def check_bootstrap(plan: ResolvedEnvironment, account: str) -> Check:
    how = f"run `cdk bootstrap aws://{account}/{plan.region}`"
    try:
        stacks = aws_client("cloudformation", plan.region).describe_stacks(StackName="CDKToolkit")["Stacks"]
    except Exception as e:
        return Check("bootstrap", False, f"no CDKToolkit stack in {plan.region} ({_error(e)}); {how}")
    status = stacks[0]["StackStatus"]
    if not status.endswith("_COMPLETE") or "ROLLBACK" in status or "DELETE" in status:
        return Check("bootstrap", False, f"CDKToolkit is {status}; {how}")
    try:
        version = aws_client("ssm", plan.region).get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)["Parameter"][
            "Value"
        ]
    except Exception:
        version = "unknown"
    return Check("bootstrap", True, f"CDKToolkit {status}, bootstrap version {version}")


def check_delivery_trust(root: Path, plan: ResolvedEnvironment, account: str) -> Check | None:
    """With `delivery:`, the environment's bootstrap must trust the tooling account the pipeline runs
    in (`cdk bootstrap --trust`): its deploy actions assume this account's bootstrap roles."""

    delivery = delivery_of(root)
    if delivery is None or plan.env not in delivery.environments:
        return None
    tooling = delivery.account
    if account == tooling:
        return Check("delivery trust", True, f"the pipeline runs in this account ({tooling})")
    how = (
        f"run `cdk bootstrap aws://{account}/{plan.region} --trust {tooling} "
        "--cloudformation-execution-policies arn:aws:iam::aws:policy/AdministratorAccess` (or a narrower "
        "policy of your own)"
    )
    try:
        stack = aws_client("cloudformation", plan.region).describe_stacks(StackName="CDKToolkit")["Stacks"][0]
    except Exception as e:
        return Check(
            "delivery trust", False, f"no CDKToolkit stack to trust the pipeline ({_error(e)}); {how}"
        )
    params = {p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])}
    # A CommaDelimitedList parameter: "111111111111,222222222222" (moto reports it as a list's text).
    trusted = re.findall(r"\d{12}", params.get("TrustedAccounts", ""))
    if tooling in trusted:
        return Check(
            "delivery trust",
            True,
            f"CDKToolkit trusts the delivery account {tooling} (`cdk bootstrap --trust`)",
        )
    now = f"it trusts {', '.join(trusted)}" if trusted else "it trusts no other account"
    return Check(
        "delivery trust",
        False,
        f"CDKToolkit in {account} does not trust the delivery account {tooling} ({now}); {how}",
    )


def check_quotas(root: Path, plan: ResolvedEnvironment) -> Check:
    try:
        book = live_book(plan.region)
    except Exception as e:
        snapshot = snapshot_book(plan.env, plan.files.quotas)
        if snapshot is None:
            return Check("quotas", None, f"could not read them ({_error(e)}) and there is no snapshot")
        book = snapshot
    report = assess(plan, render_training(plan, root), book)
    if report.short:
        return Check("quotas", False, " | ".join(s.message() for s in report.shortfalls))
    checked = sum(1 for r in report.rows if r.chosen and r.status == "ok")
    unchecked = sum(1 for r in report.rows if r.chosen and r.status == "unchecked")
    if checked == 0:
        return Check("quotas", None, f"none of the plan's quotas is listed ({book.detail})")
    extra = f", {unchecked} not listed" if unchecked else ""
    return Check("quotas", True, f"{checked} needs fit ({book.detail}{extra})")


def check_ecr(plan: ResolvedEnvironment) -> Check:
    ecr = aws_client("ecr", plan.region)
    try:
        ecr.get_authorization_token()
    except Exception as e:
        return Check(
            "ECR", False, f"no authorization token ({_error(e)}); the role needs ecr:GetAuthorizationToken"
        )
    try:
        repo: dict[str, Any] = ecr.describe_repositories(repositoryNames=[plan.names.repository])[
            "repositories"
        ][0]
    except Exception:
        return Check(
            "ECR",
            True,
            f"login works; repository {plan.names.repository} is not deployed yet (cdk deploy creates it)",
        )
    return Check("ECR", True, f"login works; {repo['repositoryUri']} reachable")


def run_checks(root: Path, plan: ResolvedEnvironment) -> list[Check]:
    checks = [check_region(plan)]
    credentials, account = check_credentials(plan)
    checks.insert(0, credentials)
    if account is None:
        needs = "needs credentials"
        checks += [Check(n, None, needs) for n in ("bootstrap", "quotas", "ECR")]
        return checks
    checks.append(check_bootstrap(plan, account))
    trust = check_delivery_trust(root, plan, account)
    if trust is not None:
        checks.append(trust)
    checks += [check_quotas(root, plan), check_ecr(plan)]
    return checks
