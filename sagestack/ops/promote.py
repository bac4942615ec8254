"""`sagestack promote`: pin a registered model package in another environment's config.

Promotion is a reviewed change to config/envs/<target>.yaml (comments and layout kept), which
`cdk deploy` then rolls out. The package is read from the registry first: a Rejected package is
never promoted, and an environment with `require_approved_models: true` takes Approved ones only.

What is pinned: an endpoint (`digits`), one inference component of an endpoint (`shared/small`) or
a batch transform (`score`) — each has its own `model_package`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sagestack.core.config import PROJECT_FILE
from sagestack.core.errors import SpecError
from sagestack.core.names import Names
from sagestack.core.types import arn_region
from sagestack.endpoints.models import EndpointSpec
from sagestack.ops.account import aws_client
from sagestack.ops.promote_copy import PROMOTED_FROM, Copied, copy_package
from sagestack.ops.promote_registry import (
    Kind,
    PromotionError,
    crossing,
    describe,
    find_across,
    within_account,
)
from sagestack.project import load_project
from sagestack.project.loader import LoadedSpec

__all__ = ["PinTarget", "Promotion", "PromotionError", "pin_target", "promote"]


@dataclass(frozen=True)
class PinTarget:
    """Where a pin lives in the spec: its key path, and the instance types it must support."""

    path: tuple[str, ...]  # e.g. ("endpoints", "digits") — model_package sits under it
    label: str
    instance_types: tuple[str, ...]
    supported_field: str  # the package's list of supported types to check them against
    kind: Kind = "endpoint"  # what the package must serve as

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
            tuple(ep.instance_type or ()),  # every pool: SageMaker may place the fleet on any
            "SupportedRealtimeInferenceInstanceTypes",
            "llm" if ep.components[component].llm is not None else "endpoint",
        )
    if key in endpoints:
        ep = endpoints[key]
        return PinTarget(
            ("endpoints", key),
            f"endpoints.{key}",
            tuple(ep.instance_type or ()),  # every pool: SageMaker may place the variant on any
            "SupportedRealtimeInferenceInstanceTypes",
            "llm" if ep.llm is not None else "endpoint",
        )
    if key in transforms:
        return PinTarget(
            ("transforms", key),
            f"transforms.{key}",
            tuple(transforms[key].instance_type),
            "SupportedTransformInstanceTypes",
            "transform",
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
    source_env: str | None
    target_env: str
    package_arn: str
    status: str | None  # the package's approval status (None: not read, --offline)
    previous: str | None  # what the changed key held (the pin, or the shadow's package)
    config_file: Path
    kind: Literal["pin", "shadow", "shadow-promoted"] = "pin"
    changes: list[str] = field(default_factory=list)  # 'key: old → new', as written
    copied: Copied | None = None  # across accounts: the target's own copy of the source package

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def promote(
    root: Path,
    endpoint: str,
    source_env: str | None,
    target_env: str,
    *,
    package_arn: str | None = None,
    offline: bool = False,
    shadow: bool = False,
) -> Promotion:
    """Pin a package in `target_env`'s overlay: as what an endpoint, component or transform serves;
    with `shadow`, as an endpoint's shadow variant; and, for an endpoint that has a shadow, its
    shadow's package as production (the shadow removed). A package in another account than the
    target's is copied into the target's account first (promote_copy), and the copy is pinned."""
    if source_env is not None and source_env == target_env:
        raise PromotionError("--from and --to name the same environment", exit_code=2)
    target = load_project(root, target_env)
    target_pin = pin_target(target.spec, endpoint)
    if target_pin is None:
        raise PromotionError(
            f"environment '{target_env}' has no endpoint, component or transform '{endpoint}' "
            f"(there: {_known(target.spec)})",
            exit_code=2,
        )
    ep = target.spec.endpoints.get(endpoint)
    if shadow:
        return _to_shadow(root, target, endpoint, source_env, target_env, package_arn, offline)
    if ep is not None and ep.shadow is not None:
        return _shadow_to_production(root, target, endpoint, source_env, target_env, package_arn, offline)
    arn, copied = _candidate(root, target, target_pin, endpoint, source_env, target_env, package_arn, offline)
    status = _check(arn, target, target_env, target_pin, offline)
    previous = target_pin.pin(target.spec)
    path = overlay_path(root, target_env)
    changes = []
    if previous != arn:
        edit_overlay(
            root, path, target_env, target_pin.path, lambda node: set_scalar(node, "model_package", arn)
        )
        changes.append(f"{target_pin.label}.model_package: {previous or '(none)'} → {arn}")
    return Promotion(endpoint, source_env, target_env, arn, status, previous, path, "pin", changes, copied)


def overlay_path(root: Path, env: str) -> Path:
    return root / "config" / "envs" / f"{env}.yaml"


def _candidate(
    root: Path,
    target: LoadedSpec,
    pin: PinTarget,
    key: str,
    source_env: str | None,
    target_env: str,
    package_arn: str | None,
    offline: bool,
) -> tuple[str, Copied | None]:
    """What `target_env` pins: --package, else the source environment's pin, else the newest Approved
    package its group holds for `key` — itself within one account, the target's copy of it across
    accounts."""
    source = load_project(root, source_env) if source_env is not None else None
    if package_arn is None:
        if source is None:
            raise PromotionError(
                "say which package: give --from ENV or --package ARN (--from takes its pin, else its newest "
                "Approved package)",
                exit_code=2,
            )
        found = pin_target(source.spec, key)
        if found is None:
            raise PromotionError(
                f"environment '{source_env}' has no endpoint, component or transform '{key}' "
                f"(there: {_known(source.spec)})",
                exit_code=2,
            )
        package_arn = found.pin(source.spec)
    if package_arn is not None and arn_region(package_arn) != target.spec.region:
        raise PromotionError(
            f"{package_arn} is not a model package ARN in {target.spec.region}, where '{target_env}' deploys"
        )
    creds = crossing(root, source, source_env, target, target_env, package_arn)
    if creds is None:
        return within_account(source, source_env, key, pin.kind, package_arn, offline), None
    if offline:
        raise PromotionError(
            f"'{creds.source}' (account {creds.source_account}) and '{target_env}' (account "
            f"{creds.target_account}) are different accounts: the package is copied into "
            f"{target_env}'s, which needs both registries; drop --offline",
            exit_code=2,
        )
    description, reader = find_across(creds, key, pin.kind, package_arn)
    problem = _status_problem(str(description["ModelPackageArn"]), description, target, target_env, pin)
    if problem is not None:
        raise PromotionError(problem)
    names = Names(target.spec.project, target_env)
    copied = copy_package(
        description,
        reader_s3=reader.s3,
        entry=key,
        group=names.model_package_group,
        stack=names.stack("foundation"),
        target_env=target_env,
        tags={**target.spec.tags, **names.tags},
        creds=creds,
    )
    return copied.arn, copied


def _status_problem(
    arn: str, description: dict[str, Any], target: LoadedSpec, target_env: str, pin: PinTarget
) -> str | None:
    """Why the described package may not be served at `pin` in `target_env` (None: it may)."""
    status = str(description.get("ModelApprovalStatus", "PendingManualApproval"))
    supported = list(description.get("InferenceSpecification", {}).get(pin.supported_field, []) or [])
    if status == "Rejected":
        return f"{arn} is Rejected; promote another package"
    if status != "Approved" and target.spec.require_approved_models:
        return (
            f"{arn} is {status}, and '{target_env}' takes Approved packages only "
            "(require_approved_models: true). After review: `aws sagemaker update-model-package "
            f"--model-package-arn {arn} --model-approval-status Approved`"
        )
    missing = [t for t in pin.instance_types if supported and t not in supported]
    if missing:
        return (
            f"{arn} supports {', '.join(supported[:6])}{' …' if len(supported) > 6 else ''}, not "
            f"{', '.join(missing)} ({pin.label}.instance_type in {target_env}); the model was "
            "registered (or compiled) for other instance types"
        )
    return None


def _check(arn: str, target: LoadedSpec, target_env: str, pin: PinTarget, offline: bool) -> str | None:
    """The package is in the target's region, not Rejected, Approved where that is required and
    built for every instance type it would serve on; its approval status (None: --offline)."""
    region = arn_region(arn)
    if region != target.spec.region:
        raise PromotionError(
            f"{arn} is not a model package ARN in {target.spec.region}, where '{target_env}' deploys"
        )
    if offline:
        if target.spec.require_approved_models:
            raise PromotionError(
                f"'{target_env}' requires Approved model packages (require_approved_models: true); the approval "
                "status cannot be checked with --offline"
            )
        return None
    description = describe(aws_client("sagemaker", region), arn)
    problem = _status_problem(arn, description, target, target_env, pin)
    if problem is not None:
        raise PromotionError(problem)
    return str(description.get("ModelApprovalStatus", "PendingManualApproval"))


def _shadow_refusal(ep: EndpointSpec, key: str, env: str) -> str | None:
    """Why the endpoint cannot take a shadow variant (None: it can). SageMaker's shadow variants
    run beside ONE real-time production variant on instances of their own."""
    if ep.serverless is not None:
        return "a serverless endpoint cannot have a shadow variant (shadow variants run on instances)"
    if ep.components:
        return (
            "an endpoint with inference components cannot have a shadow variant (its models are "
            "components, not a production variant's model); shadow-test a component on an endpoint of its own"
        )
    if ep.async_ is not None:
        return "an asynchronous endpoint cannot have a shadow variant (shadow tests copy real-time requests)"
    if not (ep.model_package or ep.llm is not None):
        return (
            f"'{env}' serves no production model at '{key}' yet (no model_package pinned): promote one "
            f"first (`sagestack promote {key} --from ENV --to {env}`), then shadow-test the next"
        )
    return None


def _to_shadow(
    root: Path,
    target: LoadedSpec,
    key: str,
    source_env: str | None,
    target_env: str,
    package_arn: str | None,
    offline: bool,
) -> Promotion:
    """Pin a candidate as endpoints.<key>.shadow.model_package."""
    ep = target.spec.endpoints.get(key)
    if ep is None:
        what = "a component" if "/" in key else "a transform"
        raise PromotionError(f"only an endpoint has a shadow variant; '{key}' is {what}")
    refusal = _shadow_refusal(ep, key, target_env)
    if refusal is not None:
        raise PromotionError(f"endpoints.{key} in '{target_env}': {refusal}")
    shadow_type = (ep.shadow.instance_type if ep.shadow else None) or ep.primary_instance_type
    pin = PinTarget(
        ("endpoints", key, "shadow"),
        f"endpoints.{key}.shadow",
        (shadow_type,) if shadow_type else (),
        "SupportedRealtimeInferenceInstanceTypes",
        "llm" if ep.llm is not None else "endpoint",
    )
    if package_arn is None or package_arn != ep.model_package:
        arn, copied = _candidate(root, target, pin, key, source_env, target_env, package_arn, offline)
    else:
        arn, copied = package_arn, None
    if arn == ep.model_package:
        raise PromotionError(
            f"{arn} is already production at '{key}' in '{target_env}'; nothing to shadow-test"
        )
    status = _check(arn, target, target_env, pin, offline)
    previous = ep.shadow.model_package if ep.shadow else None
    path = overlay_path(root, target_env)
    changes = []
    if previous != arn:
        edit_overlay(root, path, target_env, pin.path, lambda node: set_scalar(node, "model_package", arn))
        changes.append(f"{pin.label}.model_package: {previous or '(none)'} → {arn}")
    return Promotion(key, source_env, target_env, arn, status, previous, path, "shadow", changes, copied)


def _shadow_to_production(
    root: Path,
    target: LoadedSpec,
    key: str,
    source_env: str | None,
    target_env: str,
    package_arn: str | None,
    offline: bool,
) -> Promotion:
    """The shadow's package becomes the endpoint's model_package; the shadow is removed (switched
    off with `shadow: null` where the project file sets one)."""
    ep = target.spec.endpoints[key]
    assert ep.shadow is not None
    arn = ep.shadow.model_package
    source_pin = None
    if source_env is not None and package_arn is None:
        source = load_project(root, source_env)
        found = pin_target(source.spec, key)
        source_pin = found.pin(source.spec) if found else None
    asked = package_arn or source_pin
    if asked is not None and asked != arn and not _copy_of(arn, asked, offline):
        raise PromotionError(
            f"endpoints.{key} in '{target_env}' has a shadow under test ({arn}); promote it "
            f"(`sagestack promote {key} --to {target_env}`), or shadow-test {asked} first "
            f"(`sagestack promote {key} --to {target_env} --shadow --package {asked}`)"
        )
    pin = pin_target(target.spec, key)
    assert pin is not None
    status = _check(arn, target, target_env, pin, offline)
    path = overlay_path(root, target_env)
    from_base = _base_has_shadow(root, key)

    def edit(node: Any) -> None:
        set_scalar(node, "model_package", arn)
        if "shadow" in node:
            del node["shadow"]
        if from_base:
            node["shadow"] = None

    edit_overlay(root, path, target_env, ("endpoints", key), edit)
    changes = [
        f"endpoints.{key}.model_package: {ep.model_package or '(none)'} → {arn}",
        f"endpoints.{key}.shadow: removed (it tested {arn})",
    ]
    return Promotion(
        key, source_env, target_env, arn, status, ep.model_package, path, "shadow-promoted", changes
    )


def _copy_of(arn: str, source_arn: str, offline: bool) -> bool:
    """Whether `arn` is the target's copy of `source_arn` (promoted across accounts)."""
    if offline or arn.split(":")[4:5] == source_arn.split(":")[4:5]:
        return False
    meta = describe(aws_client("sagemaker", arn_region(arn)), arn).get("CustomerMetadataProperties") or {}
    return bool(meta.get(PROMOTED_FROM) == source_arn)


def set_scalar(node: Any, key: str, value: str) -> None:
    """node[key] = value, quoted as the value it replaces was (a reviewed diff shows one change);
    a new ARN double-quoted, as the example's pins are."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString

    old = node.get(key)
    if isinstance(old, ScalarString):
        node[key] = type(old)(value)
    else:
        node[key] = value if isinstance(old, str) else DoubleQuotedScalarString(value)


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    # `shadow: null` says what it means in a reviewed diff (ruamel writes None as nothing)
    yaml.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    return yaml


def _base_has_shadow(root: Path, key: str) -> bool:
    """Whether the project file itself gives endpoints.<key> a shadow."""
    data = _yaml().load((root / PROJECT_FILE).read_text()) or {}
    endpoint = (data.get("endpoints") or {}).get(key) or {}
    return endpoint.get("shadow") is not None


def edit_overlay(
    root: Path, path: Path, env: str, where: tuple[str, ...], edit: Callable[[Any], None]
) -> None:
    """Apply `edit` to the mapping at `where` in the overlay (created as needed), keeping its
    comments and layout; restore the file if the result does not load."""
    from ruamel.yaml.comments import CommentedMap

    yaml = _yaml()
    original = path.read_text()
    data = yaml.load(original) or CommentedMap()
    node = data
    for part in where:
        child = node.get(part)
        if child is None:
            child = node[part] = CommentedMap()
        node = child
    edit(node)
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
