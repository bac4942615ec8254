"""Commands that read the AWS account: quota snapshot, check."""

from __future__ import annotations

from pathlib import Path

import typer

from sagestack.cli.common import (
    EnvOption,
    RootOption,
    console,
    plan_for,
)

app = typer.Typer()
quota_app = typer.Typer(help="SageMaker service quotas of an environment's account.", no_args_is_help=True)
app.add_typer(quota_app, name="quota")


@quota_app.command("snapshot")
def quota_snapshot(
    env: EnvOption = None,
    root: RootOption = Path("."),
) -> None:
    """Save the account's SageMaker quotas and current usage to config/envs/<env>.quotas.json."""
    from rich.table import Table

    from sagestack.account import take_snapshot
    from sagestack.catalog.quotas import quota_name, training_usage

    out, err = console(), console(stderr=True)
    resolved = plan_for(root, env)
    try:
        path, document = take_snapshot(root, resolved.env, resolved.region)
    except Exception as e:
        err.print(
            f"cannot read the account's quotas in {resolved.region}: {type(e).__name__}: {e}", markup=False
        )
        err.print("check the credentials (`sagestack check`) and servicequotas:ListServiceQuotas permission")
        raise typer.Exit(1) from None
    if resolved.account and document.get("account") and document["account"] != resolved.account:
        err.print(
            f"[yellow]![/] the credentials are for account {document['account']}, but '{resolved.env}' deploys to "
            f"{resolved.account}"
        )
    values = {q["QuotaName"]: q for q in document["quotas"]}
    wanted = sorted(
        {
            quota_name(t, training_usage(j.use_spot_instances))
            for j in resolved.spec.jobs.values()
            for t in j.instance_type
        }
        | {
            quota_name(e.instance_type, "endpoint")
            for e in resolved.spec.endpoints.values()
            if e.instance_type
        }
    )
    table = Table("quota", "code", "value", "in use", title=f"{resolved.env}: quotas the spec uses")
    for name in wanted:
        q = values.get(name)
        table.add_row(
            name,
            q["QuotaCode"] if q else "-",
            f"{q['Value']:g}" if q else "not listed",
            f"{document['usage'].get(name, 0):g}",
        )
    out.print(table)
    out.print(f"[green]✓[/] {len(document['quotas'])} quotas saved to {path}", highlight=False)


@app.command()
def check(
    env: EnvOption = None,
    root: RootOption = Path("."),
) -> None:
    """Credentials, region, CDK bootstrap, quotas for the plan, ECR access: one line each."""
    from sagestack.checks import run_checks

    out = console()
    resolved = plan_for(root, env)
    failed = False
    for c in run_checks(root, resolved):
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]-[/]"}[c.ok]
        out.print(f"{mark} {c.name}: {c.detail}", highlight=False)
        failed = failed or c.ok is False
    raise typer.Exit(1 if failed else 0)
