"""`sagestack promote`: pin a registered model package in another environment's config.

Promotion is a reviewed change to config/envs/<target>.yaml (comments and layout kept), which
`cdk deploy` then rolls out. The package is read from the registry first: a Rejected package is
never promoted, and an environment with `require_approved_models: true` takes Approved ones only.

What is pinned: an endpoint (`digits`), one inference component of an endpoint (`shared/small`) or
a batch transform (`score`) — each has its own `model_package`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from sagestack.core.errors import SpecError
from sagestack.core.names import Names
from sagestack.ops.account import aws_client
from sagestack.project import load_project


class PromotionError(Exception):
    """The promotion is refused; the message says why and what to do."""


@dataclass(frozen=True)
class PinTarget:
    """Where a pin lives in the spec: its key path, and the instance types it must support."""

    path: tuple[str, ...]  # e.g. ("endpoints", "digits") — model_package sits under it
    label: str
    instance_types: tuple[str, ...]
    supported_field: str  # the package's list of supported types to check them against

    def pin(self, spec: object) -> str | None:
        node: object = spec
        for part in self.path:
            node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
            if node is None:
                return None
        return getattr(node, "model_package", None)


def pin_target(spec: object, key: str) -> PinTarget | None:
    """`key` as an endpoint, `endpoint/component` or a transform of `spec` (None: no such thing)."""
    endpoints = getattr(spec, "endpoints", {})
    transforms = getattr(spec, "transforms", {})
    if "/" in key:
        endpoint, component = key.split("/", 1)
        ep = endpoints.get(endpoint)
        if ep is None or component not in ep.components:
            return None
        return PinTarget(
            ("endpoints", endpoint, "components", component),
            f"endpoints.{endpoint}.components.{component}",
            (ep.primary_instance_type,) if ep.primary_instance_type else (),
            "SupportedRealtimeInferenceInstanceTypes",
        )
    if key in endpoints:
        ep = endpoints[key]
        return PinTarget(
            ("endpoints", key),
            f"endpoints.{key}",
            (ep.primary_instance_type,) if ep.primary_instance_type else (),
            "SupportedRealtimeInferenceInstanceTypes",
        )
    if key in transforms:
        return PinTarget(
            ("transforms", key),
            f"transforms.{key}",
            tuple(transforms[key].instance_type),
            "SupportedTransformInstanceTypes",
        )
    return None


def _known(spec: object) -> str:
    endpoints = getattr(spec, "endpoints", {})
    keys = [*endpoints, *(f"{k}/{c}" for k, ep in endpoints.items() for c in ep.components)]
    keys += list(getattr(spec, "transforms", {}))
    return ", ".join(keys) or "none"


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


def describe_status(
    arn: str, field: str = "SupportedRealtimeInferenceInstanceTypes"
) -> tuple[str, list[str]]:
    """(approval status, the instance types the package supports for real-time or transform use)."""
    from botocore.exceptions import BotoCoreError, ClientError

    region = arn.split(":")[3]
    try:
        d = aws_client("sagemaker", region).describe_model_package(ModelPackageName=arn)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(
            f"cannot read model package {arn}: {e}. Check the credentials and region (or pass --offline to "
            "write the pin unchecked, which environments that require approved models refuse)"
        ) from None
    supported = d.get("InferenceSpecification", {}).get(field, []) or []
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
    pins = []
    for loaded, env in ((source, source_env), (target, target_env)):
        found = pin_target(loaded.spec, endpoint)
        if found is None:
            raise PromotionError(
                f"environment '{env}' has no endpoint, component or transform '{endpoint}' "
                f"(there: {_known(loaded.spec)})"
            )
        pins.append(found)
    source_pin, target_pin = pins
    if package_arn is None:
        package_arn = source_pin.pin(source.spec)
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
        status, supported = describe_status(package_arn, target_pin.supported_field)
        if status == "Rejected":
            raise PromotionError(f"{package_arn} is Rejected; promote another package")
        if status != "Approved" and target.spec.require_approved_models:
            raise PromotionError(
                f"{package_arn} is {status}, and '{target_env}' takes Approved packages only "
                "(require_approved_models: true). After review: `aws sagemaker update-model-package "
                f"--model-package-arn {package_arn} --model-approval-status Approved`"
            )
        missing = [t for t in target_pin.instance_types if supported and t not in supported]
        if missing:
            raise PromotionError(
                f"{package_arn} supports {', '.join(supported[:6])}{' …' if len(supported) > 6 else ''}, not "
                f"{', '.join(missing)} ({target_pin.label}.instance_type in {target_env}); the model was "
                "registered (or compiled) for other instance types"
            )

    previous = target_pin.pin(target.spec)
    path = root / "config" / "envs" / f"{target_env}.yaml"
    if previous != package_arn:
        _write_pin(root, path, target_env, target_pin.path, package_arn)
    return Promotion(endpoint, source_env, target_env, package_arn, status, previous, path)


def _write_pin(root: Path, path: Path, env: str, where: tuple[str, ...], arn: str) -> None:
    """Set <where>.model_package in the overlay (e.g. endpoints.digits), keeping its comments and
    layout; restore the file if the result does not load."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    original = path.read_text()
    data = yaml.load(original) or CommentedMap()
    node = data
    for part in where:
        child = node.get(part)
        if child is None:
            child = node[part] = CommentedMap()
        node = child
    node["model_package"] = arn
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
