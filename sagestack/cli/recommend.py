"""`sagestack recommend ENDPOINT --env E`: the verdict of the endpoint's newest recommendation run
(candidate, measured latency and throughput, cost, meets the target or not), and `--pin`, which writes
the recommended instance type into the environment's overlay for review — never a deployment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from sagestack.cli.common import RootOption, UserError, console, print_lines

app = typer.Typer()


@app.command()
def recommend(
    endpoint: Annotated[str, typer.Argument(help="an endpoint whose slo: names candidates")],
    env: Annotated[str, typer.Option("--env", "-e", help="the environment it ran in")],
    root: RootOption = Path("."),
    pin: Annotated[
        bool,
        typer.Option("--pin", help="write the recommended instance type into the environment's overlay"),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="the verdict as JSON")] = False,
) -> None:
    """Show what the endpoint's recommendation pipeline measured against its slo:, and pin the
    cheapest candidate that meets it (boto3; AWS_ENDPOINT_URL is honoured)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from sagestack.cli.common import load_entry
    from sagestack.cli.deploy import recommended_endpoints
    from sagestack.core.names import Names
    from sagestack.endpoints.verdict import table_lines
    from sagestack.ops.account import aws_client
    from sagestack.ops.promote_registry import PromotionError
    from sagestack.ops.recommend import (
        NoRecommendation,
        measure_command,
        measures_package,
        newest_result,
        package_version,
        pin_recommended,
        rows_json,
        served_package,
        stale_reason,
        verdict_of,
    )

    spec = load_entry(
        root, env, endpoint, recommended_endpoints, "deployed endpoint with slo: candidates"
    ).spec
    ep = spec.endpoints[endpoint]
    names = Names(spec.project, env)
    stale = None
    try:
        result = newest_result(aws_client("stepfunctions", spec.region), spec.project, env, endpoint)
        v = verdict_of(endpoint, ep, result.output)
        if measures_package(v):  # still the one served? (an LLM's verdict: the spec's weights)
            served = served_package(aws_client("sagemaker", spec.region), names, ep)
            stale = stale_reason(result.output, served, names.model_package_group)
    except NoRecommendation as e:
        raise UserError(str(e)) from None
    except NoCredentialsError:
        raise UserError(
            "no AWS credentials: configure a profile (aws configure) or set AWS_PROFILE"
        ) from None
    except (ClientError, BotoCoreError) as e:
        raise UserError(f"could not read the recommendation of '{endpoint}': {e}") from None
    out = console()
    measure = measure_command(endpoint, env)
    measured = result.output.get("ModelPackage")
    if as_json:
        chosen = v.best.instance_type if v.best else None
        answer = {"endpoint": endpoint, "kind": v.kind, "job": result.output.get("JobName"),
                  "model_package": measured, "stale": stale, "rows": rows_json(v), "recommended": chosen}  # fmt: skip
        print(json.dumps(answer, indent=2))
    else:
        out.print(f"{endpoint} in {env}: {result.output.get('JobName', '?')}", markup=False, highlight=False)
        if measured is not None:
            out.print(f"Measured model package version {package_version(measured)}.", markup=False)
        for line in table_lines(v):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
        if stale is not None:
            print_lines(out, f"Stale: {stale}.")
            out.print(f"Measure it: {measure}", markup=False, highlight=False)
    best = v.best
    if not pin:
        if best is not None and stale is None and not as_json:
            out.print(
                f"Pin it for review: sagestack recommend {endpoint} --env {env} --pin",
                markup=False,
                highlight=False,
            )
        return
    if stale is not None:  # a verdict about another model is no reason to buy hardware for this one
        raise UserError(f"not pinned: the recommendation of '{endpoint}' is stale ({stale}); `{measure}`")
    if best is None:
        raise UserError(f"no candidate of '{endpoint}' meets its slo: nothing to pin")
    try:
        change = pin_recommended(root, env, endpoint, ep, best.instance_type)
    except PromotionError as e:
        raise UserError(str(e)) from None
    if change is None:
        out.print(f"{endpoint} in {env} has instance_type {best.instance_type} already", markup=False)
        return
    out.print(f"✓ {change}", markup=False, highlight=False)
    out.print("Review the overlay (git diff), then deploy it as any change.", markup=False, highlight=False)
