"""Commands about the spec itself: validate, schema, rules, plan, render, lock."""

from __future__ import annotations

import json
import shlex
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from sagestack.cli.common import (
    EXIT_INVALID_SPEC,
    EnvOption,
    JsonOption,
    RootOption,
    UserError,
    checked_env,
    console,
    print_lines,
    report_issues,
    resolve_for,
    terminal_width,
)

app = typer.Typer()


class Framework(StrEnum):
    """`init --framework`: ops/init.FRAMEWORKS' keys (a test keeps them in step)."""

    pytorch = "pytorch"
    tensorflow = "tensorflow"


@app.command()
def init(
    name: Annotated[str, typer.Argument(help="the project's name (lowercase; part of every resource name)")],
    directory: Annotated[
        Path | None, typer.Option("--dir", help="where to write it (default: ./NAME)", show_default=False)
    ] = None,
    region: Annotated[str, typer.Option("--region", help="the AWS region it deploys to")] = "us-east-1",
    framework: Annotated[
        Framework,
        typer.Option(
            "--framework", help="the training script and image: PyTorch, or TensorFlow with a Keras script"
        ),
    ] = Framework.pytorch,
) -> None:
    """Start a new project: spec, dev overlay, schemas, training_src/ skeleton, app.py, cdk.json, package.json."""
    from sagestack.ops.init import InitError, init_project

    target = directory or Path(name)
    try:
        files = init_project(target, name, region, framework.value)
    except InitError as e:
        raise UserError(str(e), EXIT_INVALID_SPEC) from None
    from sagestack.local.pasteable import shown_path
    from sagestack.ops.init import next_steps

    shown = shlex.quote(str(shown_path(target)))  # as the user here would type it (cd works as printed)
    out = console()
    print_lines(out, f"wrote {len(files)} files into {shown}/; next:")
    # a path too long for the terminal: broken after a "/" with a \ and no indent, which a shell
    # joins back into the one path (never at the space after cd)
    from sagestack.ops.screen import broken

    width = terminal_width(out.file)
    for line in broken(f"  cd {shown}", width, "") if width else [f"  cd {shown}"]:
        out.print(line, markup=False, highlight=False)
    steps = next_steps(framework.value)
    width = max(len(command) for command, _ in steps) + 2
    for command, what in steps:
        out.print(f"  {command:<{width}}[dim]{what}[/]")


@app.command()
def validate(
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env", "-e", metavar="ENV", help="environment to check (repeatable; default: every one)"
        ),
    ] = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Check the spec and its environment overlays: each problem once, with its file:line:column,
    the environments it affects and the line it is on."""
    from sagestack.core.errors import SpecError
    from sagestack.project.loader import ProjectFiles

    files = ProjectFiles(root)  # each file read and parsed once, however many environments
    names: list[str | None] = [checked_env(root, n) for n in env] if env else list(files.environments())
    results: list[tuple[str | None, Any, list[Any]]] = []  # (environment, loaded or None, issues)
    for name in names or [None]:
        try:
            loaded = files.load(name)
            results.append((name, loaded, loaded.warnings))
        except SpecError as e:
            results.append((name, None, list(e.issues)))
    failed = any(loaded is None for _, loaded, _ in results)
    if as_json:
        typer.echo(json.dumps(_validation_document(results), indent=1))
        raise typer.Exit(EXIT_INVALID_SPEC if failed else 0)
    report_issues([(name, issues) for name, _, issues in results], root)
    out, err = console(), console(stderr=True)
    failures: dict[int, list[str]] = {}  # environments that failed, by their number of errors
    for name, loaded, issues in results:
        if loaded is None:
            failures.setdefault(sum(i.severity == "error" for i in issues), []).append(name or "project")
    for errors, labels in failures.items():
        err.print(f"[bold red]✗ {', '.join(labels)}[/]: {_count(errors, 'error')}", highlight=False)
    for name, loaded, _ in results:
        if loaded is None:
            continue
        label = name or "project"
        s = loaded.spec
        out.print(
            f"[green]✓ {label}[/]: {s.project} in {s.region}, {s.account or 'any account'}", highlight=False
        )
        shown = [
            f"{n} tuning" if what == "tuning" else _count(n, what[:-1]) for what, n in _counts(s).items()
        ]
        out.print("    " + ", ".join(shown), highlight=False)
    if failed:
        raise typer.Exit(EXIT_INVALID_SPEC)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _counts(spec: Any) -> dict[str, int]:
    counts = {
        "images": len(spec.images),
        "jobs": len(spec.jobs),
        "tuning": len(spec.tuning),
        "endpoints": len(spec.endpoints),
        "transforms": len(spec.transforms),
    }
    return {k: v for k, v in counts.items() if v or k in ("images", "jobs")}


def _validation_document(results: list[tuple[str | None, Any, list[Any]]]) -> dict[str, Any]:
    """`validate --json`: each environment's verdict and counts, and each issue once."""
    from sagestack.core.errors import as_json, merge_issues

    environments = []
    for name, loaded, issues in results:
        s = loaded.spec if loaded is not None else None
        environments.append(
            {
                "environment": name,
                "ok": loaded is not None,
                "project": s.project if s else None,
                "region": s.region if s else None,
                "account": s.account if s else None,
                "counts": _counts(s) if s else None,
                "errors": [as_json(i) for i in issues if i.severity == "error"],
                "warnings": [as_json(i) for i in issues if i.severity == "warning"],
                "infos": [as_json(i) for i in issues if i.severity == "info"],
            }
        )
    merged = merge_issues((name, issues) for name, _, issues in results)
    return {
        "ok": all(e["ok"] for e in environments),
        "environments": environments,
        "issues": [as_json(i, envs) for i, envs in merged],
    }


@app.command()
def schema(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="folder to write the JSON Schemas into")
    ] = Path("schema"),
    check: Annotated[bool, typer.Option("--check", help="exit 1 if the files are out of date")] = False,
) -> None:
    """Write the spec's JSON Schemas (project file and environment overlays) for editors."""
    from sagestack.local.pasteable import shown_path
    from sagestack.project.schema import schema_texts

    stale = []
    for name, text in schema_texts().items():
        path = output / name
        if check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        typer.echo(f"wrote {shown_path(path)}")
    if stale:
        typer.echo(f"out of date: {', '.join(stale)}; run `sagestack schema`", err=True)
        raise typer.Exit(1)


@app.command()
def rules(
    explain: Annotated[
        str | None, typer.Option("--explain", metavar="ID", help="why a rule exists and what to do about it")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the spec rules sagestack checks (--explain ID: why one exists and what to do)."""
    from sagestack.project.rules import RULES

    chosen = list(RULES.values())
    if explain is not None:
        from sagestack.core.catalog.suggest import did_you_mean

        if explain not in RULES:
            raise UserError(
                f"no rule '{explain}'{did_you_mean(explain, list(RULES))} (`sagestack rules` lists them)",
                EXIT_INVALID_SPEC,
            )
        chosen = [RULES[explain]]
    if as_json:
        rows = [{k: getattr(r, k) for k in ("id", "severity", "summary", "why", "fix")} for r in chosen]
        typer.echo(json.dumps(rows[0] if explain else rows, indent=1))
        return
    out = console()
    if explain is not None:
        from sagestack.ops.screen import fit

        # prose to read, as the list below: wrapped at spaces to the terminal's width, and in a pipe
        # (a pager, a CI log) to COLUMNS or 80 columns, never one line of hundreds
        width = max(min(out.width, 100), 40)
        r = chosen[0]
        for i, paragraph in enumerate(
            (f"{r.id} ({r.severity}): {r.summary}", f"Why: {r.why}", f"What to do: {r.fix}")
        ):
            for line in ([""] if i else []) + fit(paragraph, width, "", "  "):
                typer.echo(line)
        return
    _print_rules(out, chosen)


def _print_rules(out: Any, chosen: list[Any]) -> None:
    """One rule per entry: its id and severity, then what it checks wrapped at word boundaries
    beneath (an 80-column terminal gives the summary 76 columns, not what a 37-wide id leaves)."""
    from sagestack.ops.screen import fit

    width = max(min(out.width, 100), 40)
    style = {"error": "red", "warning": "yellow", "info": "cyan"}
    out.print("[bold]rule[/] (severity)", highlight=False)
    out.print("    what it checks", style="dim", highlight=False)
    for r in chosen:
        out.print(f"[bold]{r.id}[/] ([{style.get(r.severity, '')}]{r.severity}[/])", highlight=False)
        for line in fit(r.summary, width, "    ", "    "):
            out.print(line, markup=False, highlight=False)


@app.command()
def plan(
    env: EnvOption = None,
    quotas: Annotated[
        str,
        typer.Option("--quotas", help="auto (live with credentials, else snapshot) | live | snapshot | off"),
    ] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    root: RootOption = Path("."),
) -> None:
    """Candidates, quotas, cost, sizing and lock state of an environment (exit 3 if a quota is short)."""
    import json

    from sagestack.ops.account import QuotaSourceError, quota_book
    from sagestack.ops.report import as_json as plan_json
    from sagestack.ops.report import plan_report, render

    err = console(stderr=True)
    if quotas not in ("auto", "live", "snapshot", "off"):
        err.print(f"--quotas {quotas}: use auto, live, snapshot or off", markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC)
    resolved = resolve_for(root, env)
    try:
        book = quota_book(root, resolved, quotas)  # type: ignore[arg-type]
    except QuotaSourceError as e:
        err.print(str(e), markup=False)
        raise typer.Exit(1) from None
    result = plan_report(root, resolved, book)
    if as_json:
        typer.echo(json.dumps(plan_json(result), indent=1))
    else:
        render(result, console())
        if book.source == "live":
            _training_plans(resolved)
    raise typer.Exit(result.exit_code)


def _training_plans(resolved: Any) -> None:
    """With credentials: what each named training plan reserves and costs, and whether it fits."""
    from botocore.exceptions import BotoCoreError, ClientError

    from sagestack.ops.account import training_plan_fit

    out = console()
    for key, job in resolved.spec.jobs.items():
        for itype, arn in job.training_plans.items():
            try:
                line, problem = training_plan_fit(arn, itype, job.instance_count, resolved.region)
            except (ClientError, BotoCoreError) as e:
                out.print(f"  [yellow]![/] {key}: training plan {arn}: {e}", highlight=False)
                continue
            out.print(f"  {key}: {line}", markup=False, highlight=False)
            if problem:
                out.print(f"  [red]✗[/] {key}: {problem}", highlight=False)


def _not_deployed(root: Path, env: str, key: str) -> str:
    """Why an endpoint renders nothing in `env`, and the environments that deploy it."""
    from sagestack.core.errors import SpecError
    from sagestack.project.loader import list_environments, load_project

    deploying = []
    for other in list_environments(root):
        try:
            ep = load_project(root, other, run_rules=False).spec.endpoints.get(key)
        except SpecError:
            continue
        if ep is not None and ep.deploy:
            deploying.append(f"`sagestack render {key} --env {other}`")
    where = f"; try {' or '.join(deploying)}" if deploying else ""
    return f" (endpoints.{key} has deploy: false in {env}{where})"


@app.command("render")
def render_requests(
    name: Annotated[
        str,
        typer.Argument(
            help="a key of jobs:, tuning:, endpoints: or transforms:; ENDPOINT/COMPONENT for one component"
        ),
    ],
    env: EnvOption = None,
    candidate: Annotated[
        int | None, typer.Option("--candidate", "-c", help="only this instance candidate (0 = first)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document")] = False,
    locked: Annotated[
        bool,
        typer.Option("--locked", help="as a locked synth renders it: images by the lock's digests"),
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Print the exact request(s) the pipeline sends, validated against botocore's SageMaker model
    (an endpoint's autoscaling against Application Auto Scaling's); values only a deployment knows
    are stand-ins, named as such."""
    import json

    from sagestack.core.catalog.suggest import did_you_mean
    from sagestack.ops.screen import broken, fit, fit_json
    from sagestack.project.requests import render_environment, renderable_names, requests_named

    resolved = resolve_for(root, env)
    out = render_environment(resolved, root)
    try:
        shown = requests_named(resolved, out, name, candidate)
    except KeyError:
        known = renderable_names(out)
        endpoint = resolved.spec.endpoints.get(name.partition("/")[0])
        why = (
            _not_deployed(root, resolved.env, name.partition("/")[0])
            if endpoint is not None and not endpoint.deploy
            else ""
        )
        print_lines(
            console(stderr=True),
            f"no job, search, endpoint, transform or cluster '{name}' in {resolved.env}{why}"
            f"{did_you_mean(name, known) if not why else ''} (defined: {', '.join(known) or 'none'})",
        )
        raise typer.Exit(EXIT_INVALID_SPEC) from None
    except IndexError as e:
        console(stderr=True).print(str(e).strip("'\""), markup=False)
        raise typer.Exit(EXIT_INVALID_SPEC) from None
    if locked:
        import dataclasses

        from sagestack.core.catalog.service_model import validate_request
        from sagestack.core.digests import pin_images
        from sagestack.endpoints.scaling_request import OPERATIONS, validate_scaling
        from sagestack.ops.lock import locked_digests, read_lock

        pins = locked_digests(read_lock(root, resolved.env))
        if not pins:
            console(stderr=True).print(
                f"[yellow]![/] config/envs/{resolved.env}.lock.json pins no digests "
                f"(`sagestack lock --env {resolved.env} --digests`); images are shown by tag",
                highlight=False,
            )
        shown = [dataclasses.replace(s, request=pin_images(s.request, pins)) for s in shown]
        for s in shown:
            if s.operation in OPERATIONS:  # an endpoint's autoscaling: Application Auto Scaling's model
                validate_scaling({s.operation: s.request})
            else:
                validate_request(s.operation, s.request)
    if as_json:
        document = {
            "environment": resolved.env,
            "requests": [
                {"operation": s.operation, "label": s.label, "request": s.request, "stand_ins": s.stand_ins}
                for s in shown
            ],
        }
        typer.echo(json.dumps(document, indent=1, sort_keys=True))
        return
    width = terminal_width(sys.stdout)
    for s in shown:
        typer.echo(f"# {s.operation} ({s.label}), environment {resolved.env}")
        for marker, what in s.stand_ins.items():
            text = f"stand-in {marker!r}: {what}"
            fitted = [f"#   {text}"] if width is None else fit(text, width, "#   ", "#       ")
            for line in fitted:
                for part in [line] if width is None else broken(line, width, "#         "):
                    typer.echo(part)
        for line in json.dumps(s.request, indent=1, sort_keys=True).splitlines():
            for shown_line in [line] if width is None else fit_json(line, width):
                typer.echo(shown_line)


@app.command()
def lock(
    env: EnvOption = None,
    digests: Annotated[
        bool,
        typer.Option(
            "--digests",
            help="ask ECR for the digest of every image a request names (needs credentials); a locked "
            "synth then renders repository@sha256:… and refuses a tag that moved",
        ),
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Write config/envs/<env>.lock.json: job hashes, images, request hashes and fields, catalog versions."""
    from sagestack.ops.lock import (
        lock_document,
        locked_digests,
        read_lock,
        request_images,
        update_changes,
        write_lock,
    )
    from sagestack.project.requests import render_environment

    out = console()
    resolved = resolve_for(root, env)
    requests = render_environment(resolved, root)
    previous = read_lock(root, resolved.env)
    named = request_images(resolved, requests)
    found: dict[str, str] = {}
    if digests:
        from sagestack.core.digests import resolve_digests
        from sagestack.ops.account import image_digest

        found, missing = resolve_digests(named, image_digest)
        if missing:
            out.print(
                f"[yellow]![/] ECR did not tell the digest of {len(missing)} image(s); a locked synth names "
                "them by tag:",
                highlight=False,
            )
            for uri in missing:
                out.print(f"    {uri}", markup=False, highlight=False)
    else:
        # Re-locking after a spec change keeps the digests already pinned (`--digests` asks again).
        found = {u: d for u, d in locked_digests(previous).items() if u in named}
        if found:
            out.print(
                f"kept the digests of {len(found)} image(s) from the previous lock (--digests asks ECR again)",
                highlight=False,
            )
    document = lock_document(resolved, requests, found)
    from sagestack.ops.lock import autoscaled_type_changes

    refused = autoscaled_type_changes(previous, resolved) if previous else []
    if refused:
        raise UserError("\n".join(f"✗ {p}" for p in refused), code=4)
    path = write_lock(root, resolved.env, document)
    changes = update_changes(previous, document) if previous else []
    if previous is None:
        out.print(f"[green]✓[/] wrote {path}", highlight=False)
    elif changes:
        out.print(f"[green]✓[/] updated {path}:", highlight=False)
        from sagestack.ops.screen import fit_nested

        for line in (fitted for c in changes for fitted in fit_nested(c, out.width, "  ")):
            out.print(line, markup=False, highlight=False)
    elif "requests" in previous:
        out.print(f"{path} is up to date", highlight=False)
    else:
        out.print(f"[green]✓[/] updated {path}:", highlight=False)
    if previous is not None and "requests" not in previous:  # a lock from before fields were recorded
        out.print("  now with each request's fields: a later change shows the fields that changed")
