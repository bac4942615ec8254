"""Build the whole CDK app from the project's config: one stage per environment, cdk-nag on all."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import App, Validations, cx_api
from constructs import Construct

from sagestack.app.foundation import PromotionPeers
from sagestack.app.lookups import unresolved_lookups
from sagestack.app.stage import EnvironmentStage
from sagestack.capacity.assess import QuotaShortfallError, assess
from sagestack.capacity.ledger import snapshot_book
from sagestack.constructs.compliance import PACKS, PROJECT_WIDE, acknowledge_compliance, compliance_packs
from sagestack.constructs.nag import unacknowledged_findings
from sagestack.core.digests import MovedTagError, moved_tags
from sagestack.core.errors import SpecError, SpecIssue
from sagestack.delivery.models import DeliverySpec
from sagestack.ops.account import QuotaSourceError, image_digest, quota_book
from sagestack.ops.lock import (
    LockMismatchError,
    ServingUpdateError,
    autoscaled_type_changes,
    lock_changes,
    lock_document,
    locked_digests,
)
from sagestack.project import ResolvedEnvironment, resolve_environment
from sagestack.project.loader import ProjectFiles
from sagestack.project.requests import render_environment, render_training

ENVS_CONTEXT = "sagestack:environments"
QUOTAS_CONTEXT = "sagestack:quotas"  # live | snapshot | off (default: snapshot where one exists)
LOCKED_CONTEXT = "sagestack:locked"  # true: refuse requests that differ from config/envs/<env>.lock.json
# With a locked synth: "registry" (default) asks ECR whether a locked tag moved; "offline" does not.
DIGESTS_CONTEXT = "sagestack:digests"


def cdk_json_context(root: Path) -> dict[str, object]:
    """The feature flags and context of cdk.json, and the lookups cdk.context.json holds (under
    cdk.json's, as the CDK CLI merges them), for apps built outside the CDK CLI (tests, benchmarks,
    `python app.py`, `sagestack synth`); the CLI's own context still takes precedence."""
    import json

    context: dict[str, object] = {}
    for name, inner in (("cdk.context.json", False), ("cdk.json", True)):
        path = root / name
        if path.exists():
            data = json.loads(path.read_text())
            context.update(data.get("context", {}) if inner else data)
    return context


def selected_environments(app: App, files: ProjectFiles) -> list[str]:
    """`-c sagestack:environments=dev,prod`, else every config/envs/*.yaml."""
    value = app.node.try_get_context(ENVS_CONTEXT)
    if value:
        names = [v.strip() for v in str(value).split(",") if v.strip()]
        return names
    return files.environments()


def promotion_peers(files: ProjectFiles, plan: ResolvedEnvironment) -> PromotionPeers:
    """`plan`'s neighbours in `promotion:` across accounts. A pair (source, target) crosses accounts
    when the target names an account and the source names another or none: the source then trusts
    the target's account, the target may assume the source's reader role. A neighbour whose config
    does not load is left out here; its own synth reports why."""
    order = list(plan.spec.promotion)
    if plan.env not in order:
        return PromotionPeers()
    at = order.index(plan.env)

    def account(env: str) -> tuple[bool, str | None]:
        try:
            return True, files.account(env)
        except SpecError:
            return False, None

    readers: tuple[str, ...] = ()
    if at + 1 < len(order):
        loaded, target = account(order[at + 1])
        if loaded and target and target != plan.account:
            readers = (target,)
    if at > 0 and plan.account:
        loaded, source = account(order[at - 1])
        if loaded and source != plan.account:
            return PromotionPeers(readers, order[at - 1], source)
    return PromotionPeers(readers)


def build_app(
    app: App, root: Path, envs: Sequence[str] | None = None, *, nag: bool = True
) -> list[EnvironmentStage]:
    """Add one EnvironmentStage per environment. Raises SpecError with every error of every env.
    Each config file is read once (ProjectFiles): the plans carry their lock and quota snapshot."""
    files = ProjectFiles(root)
    names = list(envs) if envs is not None else selected_environments(app, files)
    issues = []
    plans = []
    for env in names:
        try:
            plans.append(resolve_environment(files.load(env)))
        except SpecError as e:
            issues += e.issues
    if issues:
        # One report for all environments; an issue shared by several is shown once.
        unique = list(dict.fromkeys(issues))
        raise SpecError(unique)
    check_quotas(app, root, plans)
    digests = check_lock(app, root, plans)
    check_serving_updates(plans)
    stages = [
        EnvironmentStage(
            app,
            plan.env,
            plan=plan,
            project_root=files.root,
            promotion=promotion_peers(files, plan),
            image_digests=digests.get(plan.env),
        )
        for plan in plans
    ]
    delivery = delivery_stack(app, files.delivery(), stages)
    if nag:
        from cdk_nag import AwsSolutionsChecks

        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        add_compliance_packs(app, stages, delivery)
    return stages


def add_compliance_packs(app: App, stages: Sequence[EnvironmentStage], delivery: object | None) -> None:
    """`compliance:` — each environment's packs check that environment's stage alone; the delivery
    pipeline, which deploys them all, is checked by every pack any of them chose. The project-wide
    acknowledgements (constructs/compliance.py, each with its reason) cover what the packs find in
    every stack sagestack builds and is right as it is."""
    for stage in stages:
        acknowledge_compliance(stage, PROJECT_WIDE)
        if stage.plan.spec.compliance:
            Validations.of(stage).add_plugins(*compliance_packs(stage.plan.spec.compliance, stage))
    chosen = [name for name in PACKS if any(name in s.plan.spec.compliance for s in stages)]
    if isinstance(delivery, Construct):
        acknowledge_compliance(delivery, PROJECT_WIDE)
        if chosen:
            Validations.of(app).add_plugins(*compliance_packs(chosen, delivery))


def delivery_stack(
    app: App, delivery: DeliverySpec | None, stages: Sequence[EnvironmentStage]
) -> object | None:
    """The project's `delivery:` pipeline (app/delivery.py), when the synth holds every
    environment it deploys (a synth of some environments leaves the pipeline out: deploying it so
    would drop the others' stages)."""
    if delivery is None:
        return None
    by_env = {s.plan.env: s for s in stages}
    if not all(env in by_env for env in delivery.environments):
        return None

    from sagestack.app.delivery import DeliveryStack, pipeline_name  # start-up: CDK Pipelines, ~0.8 s

    project = stages[0].plan.project
    return DeliveryStack(
        app,
        "Delivery",
        project=project,
        delivery=delivery,
        stages=[by_env[env] for env in delivery.environments],
        region=stages[0].plan.region,
        stack_name=pipeline_name(project, delivery),
        description=f"sagestack {project}: the delivery pipeline (CDK Pipelines) that deploys "
        + ", ".join(delivery.environments),
    )


def check_quotas(app: App, root: Path, plans: Sequence[ResolvedEnvironment]) -> None:
    """`-c sagestack:quotas=live|snapshot|off`: the check `sagestack plan` makes, failing the synth
    with the same message when a quota is short (default: the snapshot, where one exists)."""

    mode = str(app.node.try_get_context(QUOTAS_CONTEXT) or "default")
    if mode not in ("live", "snapshot", "off", "default"):
        raise SpecError([SpecIssue(f"-c {QUOTAS_CONTEXT}={mode}: use live, snapshot or off")])
    if mode == "off":
        return
    short = []
    for plan in plans:
        if mode == "default":
            book = snapshot_book(plan.env, plan.files.quotas)
            if book is None:
                continue
        else:
            book = quota_book(root, plan, mode)  # type: ignore[arg-type]
        # the environment's one rendering: the TrainingStack's pipelines take these very jobs
        report = assess(plan, render_training(plan, root), book)
        for warning in report.warnings:  # what plan prints with '!': the synth says it too
            print(f"warning: {plan.env}: {warning}", file=sys.stderr)
        if report.short:
            short.append(report)
    if short:
        raise QuotaShortfallError(short)


def check_lock(app: App, root: Path, plans: Sequence[ResolvedEnvironment]) -> dict[str, dict[str, str]]:
    """`-c sagestack:locked=true`: every request must be the one config/envs/<env>.lock.json hashed,
    and every image the lock pinned must still be what its tag names (unless `-c
    sagestack:digests=offline`). Returns env -> the lock's image digests, which the stage renders
    requests with (nothing when the synth is not locked)."""

    if str(app.node.try_get_context(LOCKED_CONTEXT) or "false").lower() not in ("true", "1", "yes"):
        return {}
    mode = str(app.node.try_get_context(DIGESTS_CONTEXT) or "registry")
    if mode not in ("registry", "offline"):
        raise SpecError([SpecIssue(f"-c {DIGESTS_CONTEXT}={mode}: use registry or offline")])
    pins: dict[str, dict[str, str]] = {}
    for plan in plans:
        locked = plan.files.lock
        if locked is None:
            raise LockMismatchError(plan.env, [], missing=True)
        # validated here, so the TrainingStack's rendering of the same environment is this one
        current = lock_document(plan, render_environment(plan, root))
        changes = lock_changes(locked, current)
        if changes:
            raise LockMismatchError(plan.env, changes)
        pins[plan.env] = locked_digests(locked)
        if pins[plan.env] and mode == "registry":
            moved = moved_tags(pins[plan.env], image_digest)
            if moved:
                raise MovedTagError(plan.env, moved)
    return pins


def check_serving_updates(plans: Sequence[ResolvedEnvironment]) -> None:
    """Refuse a change the deploy would fail on halfway: an autoscaled endpoint's instance type
    changing in one update (compared with the environment's lock, when there is one)."""

    for plan in plans:
        locked = plan.files.lock
        problems = autoscaled_type_changes(locked, plan) if locked else []
        if problems:
            raise ServingUpdateError(plan.env, problems)


class UnacknowledgedFindings(Exception):
    """cdk-nag found something that is neither fixed nor acknowledged with a reason."""

    def __init__(self, findings: list[str]) -> None:
        self.findings = findings
        super().__init__(
            "cdk-nag findings without an acknowledgement (fix them, or acknowledge each with a reason):\n"
            + "\n".join(f"  {f}" for f in findings)
        )


def synth_checked(app: App) -> cx_api.CloudAssembly:
    """app.synth(), failing on any unacknowledged cdk-nag finding. In-process, CDK raises
    'ValidationFailed'; under the CDK CLI it only writes the report: both end here."""
    try:
        assembly = app.synth()
    except RuntimeError as e:
        if "ValidationFailed" not in str(e):
            raise
        raise UnacknowledgedFindings(unacknowledged_findings(app.outdir) or [str(e)]) from None
    findings = unacknowledged_findings(assembly.directory)
    if findings:
        raise UnacknowledgedFindings(findings)
    return assembly


def main(root: Path) -> None:
    """A project's app.py: build every selected environment of the project at `root`, synthesize,
    and exit 2 on an invalid spec (every error with file:line), 1 on an unacknowledged cdk-nag
    finding, 3 when a quota is short (`-c sagestack:quotas=live|snapshot|off`), 4 when a request
    differs from the environment's lock (`-c sagestack:locked=true`), a locked image tag moved, or an endpoint update would be
    refused halfway (an autoscaled variant changing instance type)."""

    exit_codes: tuple[tuple[type[Exception], int], ...] = (
        (SpecError, 2),
        (UnacknowledgedFindings, 1),
        (QuotaShortfallError, 3),
        (QuotaSourceError, 1),
        (LockMismatchError, 4),
        (MovedTagError, 4),
        (ServingUpdateError, 4),
    )
    # What is alive now (sagestack's, pydantic's and the CDK's modules, classes and schemas) lives
    # until the process ends: frozen, the collector does not walk it again at each full collection
    # nor at exit (with ~120,000 objects, those walks cost a synth of the foundation more than its
    # Python building did); what is built below is collected as before.
    gc.freeze()
    app = App(context=cdk_json_context(root))
    try:
        stages = build_app(app, root)
        assembly = synth_checked(app)
    except tuple(cls for cls, _ in exit_codes) as e:
        print(e.report() if isinstance(e, SpecError) else e, file=sys.stderr)
        sys.exit(next(code for cls, code in exit_codes if isinstance(e, cls)))
    for line in unresolved_lookups(app, Path(assembly.directory), stages):
        print(line, file=sys.stderr)
    gc.freeze()  # the app, its stages and constructs: nothing is dropped before the process exits
