"""Commands that read the AWS account: quota snapshot, check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sagestack.cli.common import (
    EnvOption,
    JsonOption,
    RootOption,
    UserError,
    console,
    load_entry,
    print_lines,
    resolve_for,
)

app = typer.Typer()
quota_app = typer.Typer(help="SageMaker service quotas of an environment's account.", no_args_is_help=True)
app.add_typer(quota_app, name="quota")
capacity_app = typer.Typer(help="Reserved capacity (SageMaker training plans).", no_args_is_help=True)
app.add_typer(capacity_app, name="capacity")


@quota_app.command("snapshot")
def quota_snapshot(
    env: EnvOption = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Save the account's SageMaker quotas and current usage to config/envs/<env>.quotas.json."""
    from rich.table import Table

    from sagestack.capacity.endpoints import endpoint_quotas
    from sagestack.core.catalog.quotas import quota_name, training_usage
    from sagestack.ops.account import take_snapshot

    out, err = console(), console(stderr=True)
    resolved = resolve_for(root, env)
    try:
        path, document = take_snapshot(root, resolved.env, resolved.region)
    except Exception as e:
        print_lines(err, f"cannot read the account's quotas in {resolved.region}: {type(e).__name__}: {e}")
        print_lines(
            err,
            "check the credentials (`sagestack check`) and the permission servicequotas:ListServiceQuotas",
        )
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
        | {q for e in resolved.spec.endpoints.values() for q in endpoint_quotas(e)}
    )
    rows = [
        {
            "quota": name,
            "code": values[name]["QuotaCode"] if name in values else None,
            "value": values[name]["Value"] if name in values else None,
            "in_use": document["usage"].get(name, 0),
        }
        for name in wanted
    ]
    if as_json:
        typer.echo(json.dumps({"environment": resolved.env, "file": str(path), "quotas": rows}, indent=1))
        return
    table = Table("quota", "code", "value", "in use", title=f"{resolved.env}: quotas the spec uses")
    for row in rows:
        value = f"{row['value']:g}" if row["value"] is not None else "not listed"
        table.add_row(row["quota"], row["code"] or "-", value, f"{row['in_use']:g}")
    out.print(table)
    out.print(f"[green]✓[/] {len(document['quotas'])} quotas saved to {path}", highlight=False)


@app.command()
def check(
    env: EnvOption = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Credentials, region, CDK bootstrap, quotas for the plan, ECR access: one line each."""
    from sagestack.ops.checks import run_checks

    out = console()
    resolved = resolve_for(root, env)
    checks = run_checks(root, resolved)
    failed = any(c.ok is False for c in checks)
    if as_json:
        rows = [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks]
        typer.echo(json.dumps({"environment": resolved.env, "ok": not failed, "checks": rows}, indent=1))
        raise typer.Exit(1 if failed else 0)
    for c in checks:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]-[/]"}[c.ok]
        print_lines(out, f"{c.name}: {c.detail}", mark)
    raise typer.Exit(1 if failed else 0)


@capacity_app.command("offerings")
def capacity_offerings(
    job: Annotated[str, typer.Argument(help="a key of jobs:")],
    env: EnvOption = None,
    duration: Annotated[str, typer.Option("--duration", help="how long to reserve, e.g. 24h, 3d")] = "24h",
    start_after: Annotated[
        str | None, typer.Option("--start-after", help="earliest start, ISO 8601 (default: now)")
    ] = None,
    end_before: Annotated[str | None, typer.Option("--end-before", help="latest end, ISO 8601")] = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Training plan offerings for a job's candidates and count (SearchTrainingPlanOfferings): name
    one in the job's training_plans after buying it (aws sagemaker create-training-plan)."""
    from datetime import datetime

    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    from rich.table import Table

    from sagestack.core.types import parse_duration
    from sagestack.ops.account import training_plan_offerings

    resolved = resolve_for(root, env)
    if job not in resolved.spec.jobs:
        load_entry(root, resolved.env, job, lambda spec: spec.jobs, "job")
    spec = resolved.spec.jobs[job]
    try:
        hours = -(-parse_duration(duration) // 3600)
        after = datetime.fromisoformat(start_after) if start_after else None
        before = datetime.fromisoformat(end_before) if end_before else None
    except ValueError as e:
        raise UserError(f"{e} (durations look like 24h or 3d; times like 2027-01-15T08:00)", 2) from None
    try:
        rows, unoffered = training_plan_offerings(
            resolved.region,
            instance_types=list(spec.instance_type),
            instance_count=spec.instance_count,
            duration_hours=hours,
            start_after=after,
            end_before=before,
        )
    except NoCredentialsError:
        raise UserError(
            "no AWS credentials: configure a profile (aws configure) or set AWS_PROFILE"
        ) from None
    except (ClientError, BotoCoreError) as e:
        raise UserError(f"SearchTrainingPlanOfferings failed in {resolved.region}: {e}") from None
    if as_json:
        document = {"job": job, "environment": resolved.env, "unoffered": unoffered, "offerings": rows}
        typer.echo(json.dumps(document, indent=1, default=_iso))
        return
    out = console()
    if unoffered:
        out.print(f"training plans do not offer: {', '.join(unoffered)}", markup=False)
    if not rows:
        out.print(
            f"no offering for {spec.instance_count} instance(s) for {hours} h in {resolved.region}",
            markup=False,
        )
        return
    table = Table("type", "n", "start", "hours", "fee", "offering")
    for r in rows:
        start = r["StartTime"].strftime("%Y-%m-%d %H:%M") if r["StartTime"] else "?"
        table.add_row(
            r["InstanceType"],
            str(r["InstanceCount"]),
            start,
            str(r["DurationHours"]),
            f"{r['UpfrontFee']} {r['CurrencyCode']}".strip(),
            r["OfferingId"],
        )
    out.print(table)


def _iso(value: object) -> str:
    """A datetime of a response in ISO 8601 (as `--start-after` takes it); anything else as text."""
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)
