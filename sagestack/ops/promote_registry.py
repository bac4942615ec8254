"""The registry side of `sagestack promote`: which package an entry is promoted from, and with which
credentials it is read.

A package is found by the entry it was registered for: sagestack's pipelines stamp it in
CustomerMetadataProperties (`sagestack:endpoint` or `sagestack:transform` = the entry's key, by
endpoints/request.py and llm/optimization_job.py), and its kind must be the target's (a real-time
endpoint or component lists SupportedRealtimeInferenceInstanceTypes, a batch transform
SupportedTransformInstanceTypes, an LLM serves uncompressed files under an S3 prefix). One group
per environment holds every entry's packages, so the newest Approved package of the group is not
necessarily the entry's.

Across accounts, `promote --to DST` runs with DST's credentials and reads the source group by its
ARN through the source environment's promotion reader role (`Names.promotion_reader_role`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sagestack.core.names import Names
from sagestack.core.types import arn_region
from sagestack.ops.account import aws_client
from sagestack.project import load_project
from sagestack.project.loader import LoadedSpec

Kind = Literal["endpoint", "transform", "llm"]
KIND_LABEL: dict[Kind, str] = {
    "endpoint": "a real-time endpoint",
    "transform": "a batch transform",
    "llm": "an LLM endpoint (files under an S3 prefix)",
}
# What the metadata key says the entry is (request.py: 'sagestack:endpoint' / 'sagestack:transform').
ENTRY_KEYS = {"sagestack:endpoint": "endpoint", "sagestack:transform": "transform"}


class PromotionError(Exception):
    """The promotion is refused; the message says why and what to do. exit_code 2: the command line
    asked for something that does not fit (another entry's or kind's package, none to take, a
    direction `promotion:` does not give); 1: a refusal of the package or a failure."""

    def __init__(self, message: str, *, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def package_kinds(description: dict[str, Any]) -> set[Kind]:
    """What a described package can serve as."""
    spec = description.get("InferenceSpecification") or {}
    containers = spec.get("Containers") or []
    sources = [(c.get("ModelDataSource") or {}).get("S3DataSource") or {} for c in containers]
    if any(s.get("S3DataType") == "S3Prefix" for s in sources):
        return {"llm"}
    kinds: set[Kind] = set()
    if spec.get("SupportedRealtimeInferenceInstanceTypes"):
        kinds.add("endpoint")
    if spec.get("SupportedTransformInstanceTypes"):
        kinds.add("transform")
    return kinds


def recorded_entry(description: dict[str, Any]) -> tuple[str, str] | None:
    """(endpoint | transform, the entry's key) the package was registered for; None: not recorded
    (a package registered outside sagestack's pipelines)."""
    meta = description.get("CustomerMetadataProperties") or {}
    for key, what in ENTRY_KEYS.items():
        if key in meta:
            return what, str(meta[key])
    return None


def misfit(description: dict[str, Any], entry: str, kind: Kind) -> str | None:
    """Why the package cannot be `entry`'s (a `kind`); None when it fits."""
    arn = description.get("ModelPackageArn", "the package")
    recorded = recorded_entry(description)
    wanted = "transform" if kind == "transform" else "endpoint"
    kinds = package_kinds(description)
    if recorded is not None and recorded != (wanted, entry):
        what, key = recorded
        its = "an LLM endpoint" if kinds == {"llm"} and what == "endpoint" else what
        return f"package {arn} was registered for {its} '{key}'; '{entry}' is {KIND_LABEL[kind]}"
    if kind not in kinds:
        has = " and ".join(KIND_LABEL[k] for k in sorted(kinds)) or "nothing sagestack serves"
        return f"package {arn} serves as {has}; '{entry}' is {KIND_LABEL[kind]}"
    return None


def group_arn(names: Names, region: str, account: str | None) -> str:
    """The environment's model package group: by ARN where the account is known (a caller in
    another account reads it so), else by name (the caller's own account)."""
    group = names.model_package_group
    if account is None:
        return group
    return f"arn:aws:sagemaker:{region}:{account}:model-package-group/{group}"


def _summaries(sm: Any, group: str, approved_only: bool) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"ModelPackageGroupName": group, "SortBy": "CreationTime"}
    if approved_only:
        args["ModelApprovalStatus"] = "Approved"
    out: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = sm.list_model_packages(
            **args, SortOrder="Descending", **({"NextToken": token} if token else {})
        )
        out += page.get("ModelPackageSummaryList", [])
        token = page.get("NextToken")
        if not token:
            break
    # newest first: versions count up within a group (creation times may tie)
    return sorted(
        out, key=lambda s: (s.get("ModelPackageVersion") or 0, str(s.get("CreationTime"))), reverse=True
    )


def packages(sm: Any, group: str, *, approved_only: bool = True) -> Iterator[dict[str, Any]]:
    """The group's packages, newest first, each described (read lazily: the first fit ends it)."""
    for summary in _summaries(sm, group, approved_only):
        yield sm.describe_model_package(ModelPackageName=summary["ModelPackageArn"])


def newest_for(sm: Any, group: str, entry: str, kind: Kind) -> dict[str, Any] | None:
    """The newest Approved package of `group` recorded as registered for `entry`, of `kind` (one
    that records no entry is never taken unasked)."""
    return next(
        (d for d in packages(sm, group) if recorded_entry(d) and misfit(d, entry, kind) is None), None
    )


def no_package(group: str, entry: str, kind: Kind) -> PromotionError:
    return PromotionError(
        f"model package group {group} has no Approved package registered for '{entry}' "
        f"({KIND_LABEL[kind]}); approve one (`aws sagemaker update-model-package "
        "--model-package-arn ARN --model-approval-status Approved`), or pass --package ARN",
        exit_code=2,
    )


def refused_package(
    sm: Any, description: dict[str, Any], group: str, entry: str, kind: Kind, why: str
) -> PromotionError:
    """`why`, with what would fit: the entry's newest Approved package of the group."""
    try:
        fit = newest_for(sm, group, entry, kind)
    except Exception:  # what would fit is a hint; the refusal stands without it
        fit = None
    hint = (
        f"its newest Approved package is {fit['ModelPackageArn']} (drop --package to take it)"
        if fit
        else f"group {group} has no Approved package registered for it"
    )
    return PromotionError(f"{why}: {hint}", exit_code=2)


@dataclass(frozen=True)
class Credentials:
    """What `promote` across accounts needs, spelled for a refusal: DST's caller holds the
    promoter policy; SRC's reader role trusts DST's account."""

    project: str
    source: str
    target: str
    source_account: str
    target_account: str
    region: str

    @property
    def reader_role_arn(self) -> str:
        return f"arn:aws:iam::{self.source_account}:role/{Names(self.project, self.source).promotion_reader_role}"

    @property
    def promoter_policy(self) -> str:
        return Names(self.project, self.target).promoter_policy

    def needs(self) -> str:
        names = Names(self.project, self.target)
        return (
            f"`sagestack promote --from {self.source} --to {self.target}` runs with {self.target}'s "
            f"credentials (account {self.target_account}) holding the managed policy "
            f"{self.promoter_policy} ({self.target}'s foundation stack creates it: attach it to the "
            f"role or user that runs promote). It allows sts:AssumeRole on {self.reader_role_arn}; "
            f"cloudformation:DescribeStacks on {names.stack('foundation')} (to find the bucket); "
            "s3:GetObject, s3:PutObject and s3:ListBucket on the bucket's models/promoted/; "
            "kms:GenerateDataKey and kms:Decrypt on the project key through S3; "
            "sagemaker:CreateModelPackage, sagemaker:AddTags, sagemaker:ListModelPackages and "
            f"sagemaker:DescribeModelPackage on group {names.model_package_group}"
        )

    def reader_needs(self) -> str:
        return (
            f"the role {self.reader_role_arn} ({self.source}'s foundation stack creates it when "
            f"`promotion:` lists {self.target} right after {self.source}) trusts account "
            f"{self.target_account} and allows sagemaker:ListModelPackages, "
            "sagemaker:DescribeModelPackage and sagemaker:DescribeModelPackageGroup on group "
            f"{Names(self.project, self.source).model_package_group}, s3:GetObject and s3:ListBucket on "
            "its bucket's models/, output/ and optimized/, and kms:Decrypt through S3"
        )


def _code(e: Exception) -> str:
    response = getattr(e, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def caller_account(creds: Credentials) -> str:
    """The account the caller's credentials act in (it must be the target's)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        account = str(aws_client("sts", creds.region).get_caller_identity()["Account"])
    except NoCredentialsError:
        raise PromotionError(f"no AWS credentials found. {creds.needs()}") from None
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(f"the credentials could not be checked ({e}). {creds.needs()}") from None
    if account != creds.target_account:
        raise PromotionError(
            f"these credentials act in account {account}, not {creds.target}'s ({creds.target_account}). "
            + creds.needs()
        )
    return account


@dataclass(frozen=True)
class Reader:
    """Clients acting as the source's promotion reader role."""

    sagemaker: Any
    s3: Any


def assume_reader(creds: Credentials) -> Reader:
    """AssumeRole into the source's reader role with the caller's (the target's) credentials."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        c = boto3.client("sts", region_name=creds.region).assume_role(
            RoleArn=creds.reader_role_arn,
            RoleSessionName=f"sagestack-promote-{creds.target}"[:64],
            DurationSeconds=3600,
        )["Credentials"]
    except NoCredentialsError:
        raise PromotionError(f"no AWS credentials found. {creds.needs()}") from None
    except ClientError as e:
        if _code(e) in ("AccessDenied", "AccessDeniedException"):
            raise PromotionError(
                f"not allowed to assume {creds.reader_role_arn} ({e}). Check both sides: "
                f"{creds.needs()}; and {creds.reader_needs()}"
            ) from None
        raise PromotionError(f"cannot assume {creds.reader_role_arn}: {e}") from None
    except BotoCoreError as e:
        raise PromotionError(f"cannot assume {creds.reader_role_arn}: {e}") from None
    keys = {
        "aws_access_key_id": c["AccessKeyId"],
        "aws_secret_access_key": c["SecretAccessKey"],
        "aws_session_token": c["SessionToken"],
    }
    return Reader(
        boto3.client("sagemaker", region_name=creds.region, **keys),
        boto3.client("s3", region_name=creds.region, **keys),
    )


def denied(e: Exception) -> bool:
    return _code(e) in ("AccessDenied", "AccessDeniedException", "403")


def describe(sm: Any, arn: str, hint: str = "") -> dict[str, Any]:
    """DescribeModelPackage, a refusal saying what to check when it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        d: dict[str, Any] = sm.describe_model_package(ModelPackageName=arn)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot read model package {arn}: {e}. "
            + (
                hint
                or "Check the credentials and region (or pass --offline to write the pin unchecked, "
                "which environments that require approved models refuse)"
            )
        ) from None
    return d


def status_and_types(arn: str, field: str) -> tuple[str, list[str]]:
    """(approval status, the instance types the package supports for real-time or transform use),
    read with the caller's credentials."""

    d = describe(aws_client("sagemaker", arn_region(arn)), arn)
    supported = d.get("InferenceSpecification", {}).get(field, []) or []
    return str(d.get("ModelApprovalStatus", "PendingManualApproval")), list(supported)


def _account_of(arn: str) -> str:
    fields = arn.split(":", 5)
    return fields[4] if len(fields) == 6 else ""


def _group_of(arn: str) -> str:
    """The group of a versioned package ARN (…:model-package/<group>/<version>)."""
    return arn.split(":", 5)[-1].split("/")[1] if arn.count("/") >= 2 else arn


def promotes_from(order: list[str] | None, target: str) -> str | None:
    """The environment `target` promotes from under `promotion:` (None: none)."""
    if not order or target not in order:
        return None
    i = order.index(target)
    return order[i - 1] if i > 0 else None


def _direction(order: list[str] | None, source: str, target: str, accounts: str) -> None:
    if order is None:
        raise PromotionError(
            f"{accounts}: promotion across accounts follows `promotion:` in config/sagestack.yaml, "
            f"which is not set. Add e.g. `promotion: [{source}, {target}]` and deploy both "
            f"foundations ({source}'s then creates the role {target} reads its packages with)",
            exit_code=2,
        )
    shown = f"promotion: [{', '.join(order)}]"
    before = promotes_from(order, target)
    if before != source:
        where = f"'{target}' promotes from '{before}'" if before else f"'{target}' promotes from nothing"
        raise PromotionError(f"{accounts}: {where} ({shown}), not from '{source}'", exit_code=2)


def crossing(
    root: Path,
    source: LoadedSpec | None,
    source_env: str | None,
    target: LoadedSpec,
    target_env: str,
    package_arn: str | None,
) -> Credentials | None:
    """What promoting into `target_env` across accounts needs (None: the package and the target are in
    one account, or the target names none: the package is pinned as it is)."""
    target_account = target.spec.account
    source_account = (
        _account_of(package_arn) if package_arn else (source.spec.account if source is not None else None)
    )
    if target_account is None or not source_account or source_account == target_account:
        return None
    order: list[str] | None = list(getattr(target.spec, "promotion", None) or []) or None
    if source_env is None:  # --package alone: from the environment `promotion:` puts before the target
        before = promotes_from(order, target_env)
        if before is None or load_project(root, before).spec.account not in (None, source_account):
            raise PromotionError(
                f"{package_arn} is in account {source_account}, not '{target_env}''s ({target_account}): "
                f"give --from ENV, the environment it comes from (it is copied into {target_env}'s account)",
                exit_code=2,
            )
        source_env, source = before, load_project(root, before)
    assert source is not None
    if source.spec.account not in (None, source_account):
        raise PromotionError(
            f"{package_arn} is in account {source_account}, not '{source_env}''s ({source.spec.account}): "
            f"promote it into '{source_env}' first",
            exit_code=2,
        )
    _direction(
        order,
        source_env,
        target_env,
        f"'{source_env}' (account {source_account}) and '{target_env}' (account {target_account}) are "
        "different accounts",
    )
    return Credentials(
        target.spec.project, source_env, target_env, source_account, target_account, target.spec.region
    )


def within_account(
    source: LoadedSpec | None,
    source_env: str | None,
    entry: str,
    kind: Kind,
    package_arn: str | None,
    offline: bool,
) -> str:
    """The package to pin as it is (one account): --package or the source's pin, checked to be the
    entry's; else the newest Approved package the source's group holds for the entry."""
    from botocore.exceptions import BotoCoreError, ClientError

    if package_arn is not None:
        if offline:
            return package_arn
        sm = aws_client("sagemaker", arn_region(package_arn))
        d = describe(sm, package_arn)
        why = misfit(d, entry, kind)
        if why is not None:
            raise refused_package(sm, d, _group_of(package_arn), entry, kind, why)
        return package_arn
    assert source is not None and source_env is not None
    if offline:
        raise PromotionError(f"'{source_env}' pins no package for '{entry}'; pass --package ARN", exit_code=2)
    group = group_arn(Names(source.spec.project, source_env), source.spec.region, source.spec.account)
    try:
        found = newest_for(aws_client("sagemaker", source.spec.region), group, entry, kind)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot list the packages of model package group {group} in {source.spec.region}: {e}"
        ) from None
    if found is None:
        raise no_package(group, entry, kind)
    return str(found["ModelPackageArn"])


def find_across(
    creds: Credentials, entry: str, kind: Kind, package_arn: str | None
) -> tuple[dict[str, Any], Reader]:
    """The source package (described) and the reader's clients: with the caller's (the target's)
    credentials, as the source's promotion reader role, by the source group's ARN."""
    from botocore.exceptions import BotoCoreError, ClientError

    caller_account(creds)
    reader = assume_reader(creds)
    group = group_arn(Names(creds.project, creds.source), creds.region, creds.source_account)
    if package_arn is not None:
        d = describe(reader.sagemaker, package_arn, creds.reader_needs())
        why = misfit(d, entry, kind)
        if why is not None:
            raise refused_package(reader.sagemaker, d, group, entry, kind, why)
        return d, reader
    try:
        found = newest_for(reader.sagemaker, group, entry, kind)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot list group {group} as {creds.reader_role_arn}: {e}; {creds.reader_needs()}"
        ) from None
    if found is None:
        raise no_package(group, entry, kind)
    return found, reader
