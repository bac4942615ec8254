"""`sagestack promote`: pin a registered model package in another environment's config.

Promotion is a reviewed change to config/envs/<target>.yaml (comments and layout kept), which
`cdk deploy` then rolls out. The package is read from the registry first: a Rejected package is
never promoted, and an environment with `require_approved_models: true` takes Approved ones only.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from sagestack.account import aws_client
from sagestack.plan.names import Names
from sagestack.spec import SpecError, load_project


class PromotionError(Exception):
    """The promotion is refused; the message says why and what to do."""


@dataclass(frozen=True)
class Promotion:
    endpoint: str
    source_env: str
    target_env: str
    package_arn: str
    status: str | None  # the package's approval status (None: not read, --offline)
    previous: str | None
    config_file: Path

    @property
    def changed(self) -> bool:
        return self.previous != self.package_arn


def latest_approved(group: str, region: str) -> str:
    """The newest Approved package of a group."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        page = aws_client("sagemaker", region).list_model_packages(
            ModelPackageGroupName=group,
            ModelApprovalStatus="Approved",
            SortBy="CreationTime",
            SortOrder="Descending",
            MaxResults=1,
        )
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot list the packages of model package group '{group}' in {region}: {e}"
        ) from None
    summaries = page.get("ModelPackageSummaryList", [])
    if not summaries:
        raise PromotionError(
            f"model package group '{group}' has no Approved package; approve one with `aws sagemaker "
            "update-model-package --model-package-arn ARN --model-approval-status Approved`, or pass --package ARN"
        )
    arn: str = summaries[0]["ModelPackageArn"]
    return arn


def describe_status(arn: str) -> tuple[str, list[str]]:
    """(approval status, supported real-time instance types) of a package."""
    from botocore.exceptions import BotoCoreError, ClientError

    region = arn.split(":")[3]
    try:
        d = aws_client("sagemaker", region).describe_model_package(ModelPackageName=arn)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot read model package {arn}: {e}. Check the credentials and region (or pass --offline to "
            "write the pin unchecked, which environments that require approved models refuse)"
        ) from None
    supported = d.get("InferenceSpecification", {}).get("SupportedRealtimeInferenceInstanceTypes", []) or []
    return str(d.get("ModelApprovalStatus", "PendingManualApproval")), list(supported)


def promote(
    root: Path,
    endpoint: str,
    source_env: str,
    target_env: str,
    *,
    package_arn: str | None = None,
    offline: bool = False,
) -> Promotion:
    if source_env == target_env:
        raise PromotionError("--from and --to name the same environment")
    source = load_project(root, source_env)
    target = load_project(root, target_env)
    for loaded, env in ((source, source_env), (target, target_env)):
        if endpoint not in loaded.spec.endpoints:
            known = ", ".join(loaded.spec.endpoints) or "none"
            raise PromotionError(f"environment '{env}' has no endpoint '{endpoint}' (endpoints: {known})")
    target_ep = target.spec.endpoints[endpoint]
    if package_arn is None:
        package_arn = source.spec.endpoints[endpoint].model_package
    if package_arn is None:
        if offline:
            raise PromotionError(f"'{source_env}' pins no package for '{endpoint}'; pass --package ARN")
        group = Names(source.spec.project, source_env).model_package_group
        package_arn = latest_approved(group, source.spec.region)
    region = package_arn.split(":")[3] if package_arn.count(":") >= 5 else ""
    if region != target.spec.region:
        raise PromotionError(
            f"{package_arn} is not a model package ARN in {target.spec.region}, where '{target_env}' deploys"
        )

    status: str | None = None
    if offline:
        if target.spec.require_approved_models:
            raise PromotionError(
                f"'{target_env}' requires Approved model packages (require_approved_models: true); the approval "
                "status cannot be checked with --offline"
            )
    else:
        status, supported = describe_status(package_arn)
        if status == "Rejected":
            raise PromotionError(f"{package_arn} is Rejected; promote another package")
        if status != "Approved" and target.spec.require_approved_models:
            raise PromotionError(
                f"{package_arn} is {status}, and '{target_env}' takes Approved packages only "
                "(require_approved_models: true). After review: `aws sagemaker update-model-package "
                f"--model-package-arn {package_arn} --model-approval-status Approved`"
            )
        itype = target_ep.instance_type
        if itype and supported and itype not in supported:
            raise PromotionError(
                f"{package_arn} supports {', '.join(supported[:6])}{' …' if len(supported) > 6 else ''}, not "
                f"{itype} (endpoints.{endpoint}.instance_type in {target_env}); the model was compiled for "
                "another instance family"
            )

    previous = target_ep.model_package
    path = root / "config" / "envs" / f"{target_env}.yaml"
    if previous != package_arn:
        _write_pin(root, path, target_env, endpoint, package_arn)
    return Promotion(endpoint, source_env, target_env, package_arn, status, previous, path)


def _write_pin(root: Path, path: Path, env: str, endpoint: str, arn: str) -> None:
    """Set endpoints.<endpoint>.model_package in the overlay, keeping its comments and layout;
    restore the file if the result does not load."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    original = path.read_text()
    data = yaml.load(original) or CommentedMap()
    endpoints = data.get("endpoints")
    if endpoints is None:
        endpoints = data["endpoints"] = CommentedMap()
    entry = endpoints.get(endpoint)
    if entry is None:
        entry = endpoints[endpoint] = CommentedMap()
    entry["model_package"] = arn
    out = io.StringIO()
    yaml.dump(data, out)
    path.write_text(out.getvalue())
    try:
        load_project(root, env)
    except SpecError as e:
        path.write_text(original)
        raise PromotionError(
            "the promoted config does not load, so it was left as it was:\n"
            + "\n".join(issue.format() for issue in e.issues)
        ) from None
