"""`sagestack deploy`, `diff` and `destroy`: one environment's stacks through the project's CDK CLI
(ops/cdk_cli.py), after sagestack's checks; `diff` in sagestack's words (ops/diff.py,
ops/diff_meaning.py); `destroy` only of what sagestack created, prod only when its name is typed
(ops/destroy.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from sagestack.cli.common import EnvOption, JsonOption, RootOption, UserError, console, resolve_for

app = typer.Typer()

ContextOption = Annotated[
    list[str] | None,
    typer.Option("--context", "-c", metavar="KEY=VALUE", help="CDK context for the synth (repeatable)"),
]
OutputOption = Annotated[Path, typer.Option("--output", "-o", metavar="DIR", help="cloud assembly folder")]
LockedOption = Annotated[
    bool,
    typer.Option(
        "--locked",
        help="refuse requests that differ from config/envs/<env>.lock.json (as the delivery pipeline)",
    ),
]
CdkArgs = Annotated[
    list[str] | None, typer.Argument(metavar="[-- CDK_OPTION…]", help="passed to the CDK CLI as is")
]


@app.command()
def deploy(
    env: EnvOption = None,
    require_approval: Annotated[
        str,
        typer.Option(
            "--require-approval",
            metavar="never|any-change|broadening",
            help="when the CDK CLI asks before deploying (as cdk deploy)",
        ),
    ] = "broadening",
    skip_checks: Annotated[
        bool, typer.Option("--skip-checks", help="deploy without `sagestack check`'s account checks")
    ] = False,
    locked: LockedOption = False,
    context: ContextOption = None,
    output: OutputOption = Path("cdk.out"),
    cdk_args: CdkArgs = None,
    root: RootOption = Path("."),
) -> None:
    """Deploy one environment: `sagestack check`'s account checks, the synth with its checks (spec,
    rules, quotas, the lock with --locked; exit codes as `sagestack synth`), then `cdk deploy
    '<env>/*'` of that assembly (its exit code passed through)."""
    from sagestack.ops.cdk_cli import APPROVALS, cdk_argv, stack_pattern

    if require_approval not in APPROVALS:
        raise UserError(f"--require-approval {require_approval}: use {', '.join(APPROVALS)}", 2)
    resolved, outdir, cdk = _prepare(root, env, output, context, locked, checks=not skip_checks)
    assert cdk is not None  # found before the synth
    argv = cdk_argv(
        cdk[0],
        "deploy",
        outdir,
        [stack_pattern(resolved.env)],
        ["--require-approval", require_approval, *(cdk_args or [])],
    )
    raise typer.Exit(_run(argv, cdk[1], root))


@app.command()
def diff(
    env: EnvOption = None,
    raw: Annotated[bool, typer.Option("--raw", help="then `cdk diff`'s property-level view")] = False,
    fail: Annotated[bool, typer.Option("--fail", help="exit 1 when a deploy would change anything")] = False,
    as_json: JsonOption = False,
    locked: LockedOption = False,
    context: ContextOption = None,
    output: OutputOption = Path("cdk.out"),
    root: RootOption = Path("."),
) -> None:
    """What deploying an environment would do to what runs, in sagestack's words: jobs that train
    again, endpoints that start new instances, data deleted or left behind. The synthesized
    templates against the deployed ones (CloudFormation GetTemplate; AWS_ENDPOINT_URL is honoured)."""
    from sagestack.cli.aws import aws_errors, clients
    from sagestack.ops.cdk_cli import assembly_stacks, cdk_argv, stack_pattern
    from sagestack.ops.diff import against_deployed

    resolved, outdir, cdk = _prepare(root, env, output, context, locked, checks=False, cli=raw)
    client = clients(resolved.region)
    with aws_errors(resolved.region):
        stacks = against_deployed(client("cloudformation"), assembly_stacks(outdir).get(resolved.env, []))
    if as_json:
        typer.echo(json.dumps(_diff_document(resolved.env, stacks), indent=1))
    else:
        _print_diff(resolved.env, stacks)
    changed = any(s.changes for s in stacks)
    if raw and cdk is not None:
        code = _run(cdk_argv(cdk[0], "diff", outdir, [stack_pattern(resolved.env)]), cdk[1], root)
        if code not in (0, 1):
            raise typer.Exit(code)
    raise typer.Exit(1 if fail and changed else 0)


@app.command()
def destroy(
    env: EnvOption = None,
    confirm: Annotated[
        str | None,
        typer.Option(
            "--confirm", metavar="ENV", help="the environment's name, typed: destroy it without asking"
        ),
    ] = None,
    context: ContextOption = None,
    output: OutputOption = Path("cdk.out"),
    root: RootOption = Path("."),
) -> None:
    """Delete an environment's stacks: only the ones sagestack created (their tags say so), never
    another stack of the same name; what they retain (retain_data: true) is listed first and kept.
    Asks for the environment's name (or --confirm ENV); a production environment is never
    destroyed without it."""
    from sagestack.cli.aws import aws_errors, clients
    from sagestack.ops.cdk_cli import assembly_stacks, cdk_argv
    from sagestack.ops.destroy import plan_destroy, protection

    resolved, outdir, cdk = _prepare(
        root, env, output, [*(context or []), "sagestack:quotas=off"], False, checks=False
    )
    client = clients(resolved.region)
    with aws_errors(resolved.region):
        stacks = assembly_stacks(outdir).get(resolved.env, [])
        plan = plan_destroy(client("cloudformation"), resolved.names, stacks)
    _print_destroy(resolved, plan)
    if plan.foreign:
        raise typer.Exit(1)
    if not plan.ours:
        return
    guard = protection(resolved.env, resolved.spec)
    _confirmed(resolved.env, guard, confirm, root)
    assert cdk is not None
    argv = cdk_argv(cdk[0], "destroy", outdir, [path for _, path in plan.ours], ["--force"])
    raise typer.Exit(_run(argv, cdk[1], root))


def _prepare(
    root: Path,
    env: str | None,
    output: Path,
    context: list[str] | None,
    locked: bool,
    *,
    checks: bool,
    cli: bool = True,
) -> tuple[Any, Path, tuple[str, dict[str, str]] | None]:
    """The environment resolved (spec errors: exit 2), the CDK CLI found (when `cli`), the account
    checks passed (when `checks`; no credentials: one line), the environment synthesized alone with
    the app's checks (its exit code on failure)."""
    from sagestack.cli.aws import clients
    from sagestack.cli.deploy import context_pairs
    from sagestack.ops.cdk_cli import CdkCliMissing, environment_context, find_cdk, synthesize

    resolved = resolve_for(root, env)
    root = root.resolve()
    if not (root / "app.py").exists():
        raise UserError(f"no {root / 'app.py'}: run from the project root or pass --root", 2)
    try:
        cdk = find_cdk(root) if cli else None
    except CdkCliMissing as e:
        raise UserError(str(e)) from None
    clients(resolved.region)  # no credentials: one line, before anything runs
    if checks:
        _account_checks(root, resolved)
    outdir = output if output.is_absolute() else root / output
    pairs = environment_context(resolved.env, locked=locked, extra=context_pairs(context))
    err = console(stderr=True)
    err.print(
        f"synthesizing {resolved.env} (spec, rules, quotas{', lock' if locked else ''}) …", markup=False
    )
    code = synthesize(root, outdir, pairs)
    if code:
        raise typer.Exit(code)
    return resolved, outdir, cdk


def _account_checks(root: Path, resolved: Any) -> None:
    """`sagestack check`'s lines; any failed one stops the deploy (exit 1)."""
    from sagestack.cli.common import terminal_lines
    from sagestack.ops.checks import run_checks

    err = console(stderr=True)
    checks = run_checks(root, resolved)
    for c in checks:
        mark = {True: "✓", False: "✗", None: "-"}[c.ok]
        for line in terminal_lines(f"{mark} {c.name}: {c.detail}"):
            err.print(line, markup=False)
    if any(c.ok is False for c in checks):
        raise UserError(
            f"not deployed: fix the failed check(s) above (`sagestack check --env {resolved.env}`), "
            "or deploy with --skip-checks"
        )


def _run(argv: list[str], env: dict[str, str], root: Path) -> int:
    from sagestack.ops.cdk_cli import run_cdk

    shown = " ".join(f"'{a}'" if "*" in a else a for a in [Path(argv[0]).name, *argv[1:]])
    console(stderr=True).print(f"→ {shown}", markup=False)
    return run_cdk(argv, env, root.resolve())


def _confirmed(env: str, guard: str | None, confirm: str | None, root: Path) -> None:
    """--confirm ENV, or ENV typed at the prompt; with no terminal, the command to run instead."""
    if confirm is not None:
        if confirm != env:
            raise UserError(f"--confirm {confirm}: type the environment's own name ({env}) to destroy it")
        return
    command = f"sagestack destroy --env {env} --confirm {env}"
    if str(root) != ".":
        command += f" --root {root}"
    why = f"{guard}: " if guard else ""
    if not sys.stdin.isatty():
        raise UserError(f"not destroyed: {why}no terminal to confirm on; to destroy it, run `{command}`")
    typed = typer.prompt(f"{why}type '{env}' to destroy it", default="", show_default=False)
    if typed.strip() != env:
        raise UserError("not destroyed: the name did not match")


# ---------------------------------------------------------------- screens

MARKS = {"warning": "✗", "notice": "!", "info": "·"}


def _lines(text: str, indent: str = "", hang: str | None = None) -> list[str]:
    import shutil

    from sagestack.ops.screen import fit

    width = max(shutil.get_terminal_size().columns, 40) if sys.stdout.isatty() else 80
    return fit(text, width, indent, hang)


def _say(text: str, indent: str = "", hang: str | None = None) -> None:
    for line in _lines(text, indent, hang):
        typer.echo(line)


def _print_diff(env: str, stacks: list[Any]) -> None:
    from sagestack.ops.diff_meaning import effects, summary

    counts = summary(stacks)
    for stack in stacks:
        if not stack.deployed:
            _say(
                f"{stack.name} ({stack.path}): not deployed; the deploy creates {len(stack.changes)} resource(s)"
            )
            continue
        if not stack.changes:
            _say(f"{stack.name} ({stack.path}): no change")
            continue
        _say(f"{stack.name} ({stack.path}): {_counted(summary([stack]))}")
        for effect in effects(stack):
            _say(f"{MARKS[effect.severity]} {effect.kind}: {effect.subject}: {effect.text}", "  ", "    ")
    if not any(counts.values()):
        _say(f"{env}: nothing to deploy; what runs is what the spec says")
        return
    _say(f"{env}: {_counted(counts)} (`sagestack diff --env {env} --raw` shows each property)")


def _counted(counts: dict[str, int]) -> str:
    words = {"add": "added", "update": "updated", "replace": "replaced", "remove": "removed"}
    return ", ".join(f"{n} {words[k]}" for k, n in counts.items() if n) or "no change"


def _diff_document(env: str, stacks: list[Any]) -> dict[str, Any]:
    from sagestack.ops.diff_meaning import effects

    return {
        "environment": env,
        "stacks": [
            {
                "name": s.name,
                "path": s.path,
                "status": s.status,
                "changes": [
                    {
                        "logical_id": c.logical_id,
                        "type": c.type,
                        "action": c.action,
                        "properties": list(c.properties),
                        "replaced_because": list(c.causes),
                        "old_logical_id": c.old_id,
                    }
                    for c in s.changes
                ],
                "effects": [e.__dict__ for e in effects(s)],
            }
            for s in stacks
        ],
    }


def _print_destroy(resolved: Any, plan: Any) -> None:
    env = resolved.env
    for name, tags in plan.foreign:
        have = ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or "no tags"
        want = ", ".join(f"{k}={v}" for k, v in resolved.names.tags.items())
        _say(f"✗ {name} is deployed but sagestack did not create it (its tags: {have}; sagestack's: {want})")
    if plan.foreign:
        _say("not destroyed: sagestack deletes only the stacks it created; nothing was deleted")
        return
    if not plan.ours:
        _say(f"{env}: nothing deployed to destroy")
    else:
        _say(f"{env}: destroys {', '.join(name for name, _ in plan.ours)}")
    if plan.kept:
        retain = "retain_data: true" if resolved.spec.retain_data else "DeletionPolicy Retain"
        _say(f"kept after the destroy ({retain}): delete them yourself once nothing needs them", "  ")
        for k in plan.kept:
            _say(f"{k.kind} {k.physical_id or k.logical_id} ({k.stack}/{k.logical_id})", "    ", "      ")
    elif plan.ours:
        _say("nothing is retained: every bucket, key and repository is deleted with its data", "  ")
    for name in plan.stray:
        _say(f"! {name}: sagestack's, but no longer in the app: left alone (delete it with CloudFormation)")
