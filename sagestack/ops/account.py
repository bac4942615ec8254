"""What sagestack reads from a live AWS account: SageMaker's service quotas and what is using them
now, image digests, and the checks of `sagestack check`. boto3 is imported only here, and only
when a command needs the account."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sagestack.capacity.ledger import QuotaBook, book_from_document, snapshot_book
from sagestack.core.catalog.quotas import (
    SERVICE_CODE,
    TRAINING_INSTANCES_TOTAL,
    quota_name,
    snapshot_path,
    training_usage,
)
from sagestack.core.catalog.service_model import enum_values
from sagestack.core.digests import ImageRef
from sagestack.project.environment import ResolvedEnvironment

CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)


def credentials_configured() -> bool:
    """A cheap look for credentials (no boto3 import): environment variables or ~/.aws files.
    Instance-role credentials are not probed here (the metadata service may hang offline)."""
    if any(os.environ.get(v) for v in CREDENTIAL_VARIABLES):
        return True
    home = Path(os.environ.get("HOME", "~")).expanduser()
    config = Path(os.environ.get("AWS_CONFIG_FILE", home / ".aws" / "config"))
    shared = Path(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", home / ".aws" / "credentials"))
    return shared.exists() or config.exists()


def aws_client(service: str, region: str) -> Any:
    """A boto3 client (boto3 is imported here, on first use)."""
    import boto3

    return boto3.client(service, region_name=region)


def list_quotas(region: str, client: Any | None = None) -> list[dict[str, Any]]:
    """Every SageMaker quota of the account in `region` (ListServiceQuotas, all pages)."""
    client = client or aws_client("service-quotas", region)
    return [
        {"QuotaName": q["QuotaName"], "QuotaCode": q["QuotaCode"], "Value": float(q["Value"])}
        for q in _paginate(client, "list_service_quotas", "Quotas", ServiceCode=SERVICE_CODE, MaxResults=100)
    ]


def _paginate(client: Any, operation: str, key: str, **kwargs: Any) -> Iterable[dict[str, Any]]:
    token: str | None = None
    while True:
        page = getattr(client, operation)(**kwargs, **({"NextToken": token} if token else {}))
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return


def count_usage(region: str, client: Any | None = None) -> dict[str, float]:
    """Instances in use per quota name: InProgress training jobs (on-demand and spot, and the
    aggregate) and InService endpoints (current instance count per variant, shadow variants too,
    per instance pool where a variant has pools). Service Quotas does not report usage for
    SageMaker, so it is counted."""
    sm = client or aws_client("sagemaker", region)
    usage: dict[str, float] = {}

    def add(name: str, n: float) -> None:
        usage[name] = usage.get(name, 0.0) + n

    for summary in _paginate(sm, "list_training_jobs", "TrainingJobSummaries", StatusEquals="InProgress"):
        job = sm.describe_training_job(TrainingJobName=summary["TrainingJobName"])
        kind = training_usage(bool(job.get("EnableManagedSpotTraining")))
        rc = job.get("ResourceConfig", {})
        groups = rc.get("InstanceGroups") or (
            [{"InstanceType": rc["InstanceType"], "InstanceCount": rc.get("InstanceCount", 1)}]
            if rc.get("InstanceType")
            else []
        )
        for g in groups:
            add(quota_name(g["InstanceType"], kind), float(g["InstanceCount"]))
            add(TRAINING_INSTANCES_TOTAL, float(g["InstanceCount"]))
    for summary in _paginate(sm, "list_endpoints", "Endpoints", StatusEquals="InService"):
        endpoint = sm.describe_endpoint(EndpointName=summary["EndpointName"])
        config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
        configured = config.get("ProductionVariants", []) + config.get("ShadowProductionVariants", [])
        types = {v["VariantName"]: v.get("InstanceType") for v in configured}
        for variant in endpoint.get("ProductionVariants", []) + endpoint.get("ShadowProductionVariants", []):
            # a variant with instance pools reports its instances per type (it may run on several)
            pools = variant.get("InstancePools") or [
                {
                    "InstanceType": types.get(variant["VariantName"]),
                    "CurrentInstanceCount": variant.get("CurrentInstanceCount", 0),
                }
            ]
            for pool in pools:
                if pool.get("InstanceType"):
                    add(
                        quota_name(pool["InstanceType"], "endpoint"),
                        float(pool.get("CurrentInstanceCount", 0)),
                    )
    return usage


def snapshot_document(
    region: str, quotas: list[dict[str, Any]], usage: dict[str, float], account: str | None
) -> dict[str, Any]:
    return {
        "$comment": "SageMaker service quotas and usage; written by `sagestack quota snapshot`",
        "taken_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "account": account,
        "region": region,
        "quotas": sorted(quotas, key=lambda q: q["QuotaName"]),
        "usage": dict(sorted(usage.items())),
    }


def caller_account(region: str) -> str | None:
    try:
        identity = aws_client("sts", region).get_caller_identity()
    except Exception:
        return None
    return str(identity["Account"])


def take_snapshot(root: Path, env: str, region: str) -> tuple[Path, dict[str, Any]]:
    document = snapshot_document(region, list_quotas(region), count_usage(region), caller_account(region))
    path = snapshot_path(root, env)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    tmp.replace(path)
    return path, document


def live_book(region: str) -> QuotaBook:
    account = caller_account(region)
    document = {"quotas": list_quotas(region), "usage": count_usage(region)}
    return book_from_document(document, "live", f"live, account {account or 'unknown'} in {region}")


# ---------------------------------------------------------------- which quotas a plan uses


QuotaMode = Literal["auto", "live", "snapshot", "off"]


class QuotaSourceError(Exception):
    """The quota source asked for cannot be read; the message says what to do."""


def quota_book(root: Path, plan: ResolvedEnvironment, mode: QuotaMode) -> QuotaBook:
    """live: the account (credentials needed); snapshot: config/envs/<env>.quotas.json; auto: live
    when credentials are configured, else the snapshot, else nothing (and say so); off: nothing."""
    if mode == "off":
        return QuotaBook.none("not checked (quotas: off)")
    live_error: str | None = None
    if mode == "live" or (mode == "auto" and credentials_configured()):
        try:
            return live_book(plan.region)
        except Exception as e:
            if mode == "live":
                raise QuotaSourceError(f"cannot read the account's quotas: {type(e).__name__}: {e}") from None
            live_error = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
    snapshot = snapshot_book(plan.env, plan.files.quotas)
    if snapshot is not None:
        if live_error:
            snapshot.detail += f"; live quotas unavailable ({live_error})"
        return snapshot
    if mode == "snapshot":
        raise QuotaSourceError(
            f"no quota snapshot for '{plan.env}' (config/envs/{plan.env}.quotas.json); take one with "
            f"`sagestack quota snapshot --env {plan.env}`"
        )
    why = f"live quotas unavailable ({live_error})" if live_error else "no credentials"
    return QuotaBook.none(
        f"not checked: {why} and no snapshot (`sagestack quota snapshot --env {plan.env}` writes one)"
    )


# ---------------------------------------------------------------- sagestack check


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool | None  # None: not applicable / skipped
    detail: str


def image_digest(uri: str) -> str | None:
    """The digest ECR reports for a tagged ECR image URI (None when it cannot tell: not an ECR URI,
    no access, no such tag)."""

    ref = ImageRef.parse(uri)
    if ref is None:
        return None
    try:
        found = aws_client("ecr", ref.region).describe_images(
            registryId=ref.registry, repositoryName=ref.repository, imageIds=[{"imageTag": ref.tag}]
        )
    except Exception:
        return None
    details = found.get("imageDetails", [])
    return str(details[0]["imageDigest"]) if details else None


def training_plan_offerings(
    region: str,
    *,
    instance_types: list[str],
    instance_count: int,
    duration_hours: int,
    start_after: Any = None,
    end_before: Any = None,
    client: Any | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """SearchTrainingPlanOfferings for each instance type training plans offer: one row per
    reserved-capacity offering (type, count, start, end, duration, upfront fee); and the types
    training plans do not offer."""

    client = client or aws_client("sagemaker", region)
    offered = set(enum_values("ReservedCapacityInstanceType"))
    rows: list[dict[str, Any]] = []
    for itype in instance_types:
        if itype not in offered:
            continue
        params: dict[str, Any] = {
            "InstanceType": itype,
            "InstanceCount": instance_count,
            "DurationHours": duration_hours,
            "TargetResources": ["training-job"],
        }
        if start_after is not None:
            params["StartTimeAfter"] = start_after
        if end_before is not None:
            params["EndTimeBefore"] = end_before
        for offering in client.search_training_plan_offerings(**params).get("TrainingPlanOfferings", []):
            for rc in offering.get("ReservedCapacityOfferings", []):
                rows.append(
                    {
                        "OfferingId": offering["TrainingPlanOfferingId"],
                        "InstanceType": rc.get("InstanceType", itype),
                        "InstanceCount": rc.get("InstanceCount", instance_count),
                        "AvailabilityZone": rc.get("AvailabilityZone", ""),
                        "StartTime": rc.get("StartTime"),
                        "EndTime": rc.get("EndTime"),
                        "DurationHours": offering.get("DurationHours", duration_hours),
                        "UpfrontFee": offering.get("UpfrontFee", ""),
                        "CurrencyCode": offering.get("CurrencyCode", ""),
                    }
                )
    return rows, [t for t in instance_types if t not in offered]


def training_plan_fit(
    arn: str, instance_type: str, count: int, region: str, client: Any | None = None
) -> tuple[str, str | None]:
    """DescribeTrainingPlan: a line on what the plan reserves and costs, and a problem when its
    reserved capacity is not `count` x `instance_type` (None when it fits)."""
    client = client or aws_client("sagemaker", region)
    plan = client.describe_training_plan(TrainingPlanName=arn.rsplit("/", 1)[-1])
    reserved = [
        (s.get("InstanceType"), int(s.get("TotalInstanceCount", 0)))
        for s in plan.get("ReservedCapacitySummaries", [])
    ]
    of_type = sum(n for t, n in reserved if t == instance_type)
    fee = f"{plan.get('UpfrontFee', '?')} {plan.get('CurrencyCode', '')}".strip()
    hours = plan.get("DurationHours", "?")
    line = (
        f"{plan.get('TrainingPlanName', arn)}: {plan.get('Status', '?')}, "
        + ", ".join(f"{n}x {t}" for t, n in reserved)
        + f" for {hours} h, {fee} up front"
    )
    if of_type < count:
        return line, f"the plan reserves {of_type}x {instance_type}; the job needs {count}"
    return line, None
