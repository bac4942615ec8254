"""Rules about delivery (the CDK Pipelines stack): which environments it deploys, and which wait for an
approval."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.config import list_environments
from sagestack.core.rules import Finding, RuleContext, rule


@rule(
    "delivery-environments",
    "error",
    "the delivery pipeline deploys environments that exist, each once",
    why=(
        "The delivery pipeline deploys one stage per environment, in the order listed; an environment "
        "without config/envs/<env>.yaml has nothing to deploy, one listed twice would be deployed "
        "twice, and an approval for an environment the pipeline does not deploy guards nothing."
    ),
    fix=(
        "List each environment once, in promotion order (e.g. "
        "[dev, staging, prod]); name approvals among them."
    ),
)
def delivery_environments(ctx: RuleContext) -> Iterator[Finding]:
    d = ctx.spec.delivery
    if d is None:
        return
    known = list_environments(ctx.root)
    seen: set[str] = set()
    for i, env in enumerate(d.environments):
        if env not in known:
            yield Finding(
                ("delivery", "environments", i),
                f"no environment '{env}' (config/envs/{env}.yaml){did_you_mean(env, known)}; "
                f"environments: {', '.join(known) or 'none'}",
            )
        if env in seen:
            yield Finding(("delivery", "environments", i), f"'{env}' is deployed twice; list it once")
        seen.add(env)
    for i, env in enumerate(d.approval):
        if env not in d.environments:
            yield Finding(
                ("delivery", "approval", i),
                f"'{env}' is not one of the environments the pipeline deploys "
                f"({', '.join(d.environments)}){did_you_mean(env, d.environments)}",
            )


@rule(
    "delivery-approval",
    "warning",
    "a production environment is deployed only after a manual approval",
    why=(
        "Everything merged to the branch flows through the pipeline; a production stage without a manual "
        "approval deploys a change nobody looked at in its final form (the staging result, the lock diff)."
    ),
    fix="Add the environment to delivery.approval (default: [prod]).",
)
def delivery_approval(ctx: RuleContext) -> Iterator[Finding]:
    d = ctx.spec.delivery
    if d is None:
        return
    for i, env in enumerate(d.environments):
        if env.startswith("prod") and env not in d.approval:
            yield Finding(
                ("delivery", "environments", i),
                f"'{env}' deploys without a manual approval; add it to delivery.approval",
            )
