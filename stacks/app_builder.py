"""Build the whole CDK app from the project's config: one stage per environment, cdk-nag on all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import App, Validations, cx_api

from sagestack.constructs.nag import unacknowledged_findings
from sagestack.plan import resolve_environment
from sagestack.spec import SpecError, list_environments, load_project
from stacks.stage import EnvironmentStage

ENVS_CONTEXT = "sagestack:environments"


def cdk_json_context(root: Path) -> dict[str, object]:
    """The feature flags and context of cdk.json, for apps built outside the CDK CLI (tests,
    benchmarks, `python app.py`); the CLI's own context still takes precedence."""
    import json

    path = root / "cdk.json"
    if not path.exists():
        return {}
    context: dict[str, object] = json.loads(path.read_text()).get("context", {})
    return context


def selected_environments(app: App, root: Path) -> list[str]:
    """`-c sagestack:environments=dev,prod`, else every config/envs/*.yaml."""
    value = app.node.try_get_context(ENVS_CONTEXT)
    if value:
        names = [v.strip() for v in str(value).split(",") if v.strip()]
        return names
    return list_environments(root)


def environment_accounts(root: Path) -> dict[str, str]:
    """env -> account for every environment that names one (promotion targets read its models).
    An environment whose config does not load is left out here; its own synth reports why."""
    out: dict[str, str] = {}
    for env in list_environments(root):
        try:
            account = load_project(root, env).spec.account
        except SpecError:
            continue
        if account:
            out[env] = account
    return out


def build_app(
    app: App, root: Path, envs: Sequence[str] | None = None, *, nag: bool = True
) -> list[EnvironmentStage]:
    """Add one EnvironmentStage per environment. Raises SpecError with every error of every env."""
    names = list(envs) if envs is not None else selected_environments(app, root)
    issues = []
    plans = []
    for env in names:
        try:
            plans.append(resolve_environment(load_project(root, env)))
        except SpecError as e:
            issues += e.issues
    if issues:
        # One report for all environments; an issue shared by several is shown once.
        unique = list(dict.fromkeys(issues))
        raise SpecError(unique)
    accounts = environment_accounts(root)
    stages = [
        EnvironmentStage(
            app,
            plan.env,
            plan=plan,
            project_root=root,
            model_readers=tuple(
                sorted({a for e, a in accounts.items() if e != plan.env and a != plan.account})
            ),
        )
        for plan in plans
    ]
    if nag:
        from cdk_nag import AwsSolutionsChecks

        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stages


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
