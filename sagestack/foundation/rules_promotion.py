"""Rules about promotion: the `promotion:` order names environments that exist, each once; and an
environment in an account serves only packages of its own account (a pin of another account's
package would make it depend on that account's registry, bucket and key for as long as it serves)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.config import PROJECT_FILE, list_environments
from sagestack.core.errors import Path_
from sagestack.core.names import Names
from sagestack.core.rules import Finding, RuleContext, rule
from sagestack.foundation.rules import declared_account


@rule(
    "promotion-environments",
    "error",
    "promotion: lists environments that exist, each once",
    why=(
        "Each environment of promotion: promotes from the one before it; across accounts the source "
        "gets a reader role trusting the next environment's account, and the next one a promoter "
        "policy. A name without config/envs/<env>.yaml has no account and nothing to deploy, and one "
        "listed twice would promote from two environments."
    ),
    fix="List each environment once, in promotion order, e.g. promotion: [dev, staging, prod].",
)
def promotion_environments(ctx: RuleContext) -> Iterator[Finding]:
    known = list_environments(ctx.root)
    seen: set[str] = set()
    for i, env in enumerate(ctx.spec.promotion):
        if env not in known:
            yield Finding(
                ("promotion", i),
                f"no environment '{env}' (config/envs/{env}.yaml){did_you_mean(env, known)}; "
                f"environments: {', '.join(known) or 'none'}",
            )
        elif env in seen:
            yield Finding(("promotion", i), f"'{env}' is listed twice; list each environment once")
        seen.add(env)


@rule(
    "pin-own-account",
    "error",
    "an environment with an account pins only model packages of that account",
    why=(
        "A package of another account keeps its model in that account's bucket, under its key: every "
        "new instance (autoscaling, a replaced host, a transform job) downloads it from there, so a "
        "lifecycle rule, a `cdk destroy` or a key change in that account takes this environment down "
        "later, silently, and that account's bucket, key and registry would have to trust this one. "
        "`sagestack promote` across accounts copies the package (its artifacts, verified by digest) "
        "into this environment's bucket and group, and pins the copy."
    ),
    fix=(
        "Run the promote command the finding prints (with the target's credentials): it copies the "
        "package and writes this environment's own package ARN into its config."
    ),
)
def pin_own_account(ctx: RuleContext) -> Iterator[Finding]:
    own = ctx.spec.account
    if not own or ctx.env is None:
        return
    for path, entry, arn, shadow in _pins(ctx):
        parts = arn.split(":")
        account = parts[4] if len(parts) > 5 else ""
        if account in ("", own):
            continue
        source = _source_of(ctx, arn, account)
        if source is None:
            yield Finding(
                path,
                f"the package is in account {account}, not this environment's ({own}), and no other "
                f"environment of the project names that account or holds its group: pin a package of "
                f"account {own} (`sagestack promote {entry} --from <env> --to {ctx.env}` copies one "
                "from the environment that registered it)",
            )
            continue
        command = (
            f"sagestack promote {entry} --from {source} --to {ctx.env}"
            + (" --shadow" if shadow else "")
            + f" --package {arn}"
        )
        order = ctx.spec.promotion
        if not _promotes_from(order, source, ctx.env):
            steps = (
                f"add promotion: [{source}, {ctx.env}] to {PROJECT_FILE} (the order it promotes in), then run"
            )
        else:
            steps = "run"
        yield Finding(
            path,
            f"the package is in account {account}, not this environment's ({own}): it would be read "
            f"from that account for as long as it serves; {steps} `{command}` (it copies the package "
            f"into {ctx.env}'s account and pins the copy)",
        )


def _pins(ctx: RuleContext) -> Iterator[tuple[Path_, str, str, bool]]:
    """(where, the promote ENTRY, the pinned ARN, whether a shadow) of every pin of the spec."""
    for key, ep in ctx.spec.endpoints.items():
        if ep.model_package:
            yield ("endpoints", key, "model_package"), key, ep.model_package, False
        if ep.shadow is not None and ep.shadow.model_package:
            yield ("endpoints", key, "shadow", "model_package"), key, ep.shadow.model_package, True
        for name, c in ep.components.items():
            if c.model_package:
                yield (
                    ("endpoints", key, "components", name, "model_package"),
                    f"{key}/{name}",
                    c.model_package,
                    False,
                )
    for key, t in ctx.spec.transforms.items():
        if t.model_package:
            yield ("transforms", key, "model_package"), key, t.model_package, False


def _source_of(ctx: RuleContext, arn: str, account: str) -> str | None:
    """The environment the package comes from: the one whose group holds it (Names.model_package_group),
    else the one before this one in promotion:, else the one that names its account."""
    known = [e for e in list_environments(ctx.root) if e != ctx.env]
    group = arn.split(":", 5)[-1].split("/")[1] if "/" in arn else ""
    by_group = [e for e in known if Names(ctx.spec.project, e).model_package_group == group]
    if by_group:
        return by_group[0]
    order = ctx.spec.promotion
    if ctx.env in order and order.index(ctx.env) > 0:
        return order[order.index(ctx.env) - 1]
    by_account = [e for e in known if declared_account(ctx.root, e) == account]
    return by_account[0] if len(by_account) == 1 else None


def _promotes_from(order: Sequence[str], source: str, target: str) -> bool:
    return source in order and target in order and order.index(target) == order.index(source) + 1
