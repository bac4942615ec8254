"""Commands that deploy or run: synth, run, promote."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sagestack.cli.common import (
    EXIT_INVALID_SPEC,
    RootOption,
    UserError,
    checked_env,
    console,
    load_entry,
    print_lines,
    spec_errors,
)
from sagestack.cli.day2 import LogsOption

app = typer.Typer()


@app.command()
def synth(
    context: Annotated[
        list[str] | None,
        typer.Option(
            "--context", "-c", metavar="KEY=VALUE", help="CDK context (as cdk synth -c; repeatable)"
        ),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="cloud assembly folder")] = Path("cdk.out"),
    root: RootOption = Path("."),
) -> None:
    """Synthesize every environment as `cdk synth` does, keeping the app's exit code: 2 invalid spec,
    3 quota short, 4 lock mismatch, 1 unacknowledged cdk-nag finding (`cdk synth` exits 1 for all)."""
    from sagestack.ops.cdk_cli import synthesize

    pairs = context_pairs(context)
    app_file = root.resolve() / "app.py"
    if not app_file.exists():
        raise UserError(f"no {app_file}: run from the project root or pass --root", EXIT_INVALID_SPEC)
    outdir = output if output.is_absolute() else root.resolve() / output
    code = synthesize(root.resolve(), outdir, pairs)
    if code == 0:
        synthesized(outdir)
    raise typer.Exit(code)


def context_pairs(context: list[str] | None) -> dict[str, str]:
    """`-c KEY=VALUE` options as the context mapping (a malformed one: exit 2)."""
    pairs: dict[str, str] = {}
    for item in context or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--context {item!r}: use KEY=VALUE", EXIT_INVALID_SPEC)
        pairs[key] = value
    return pairs


def synthesized(outdir: Path) -> None:
    """The stacks a synth wrote, per environment (wrapped between names, never inside one), and
    the context lookups it left unresolved."""
    import json

    from sagestack.ops.cdk_cli import assembly_stacks
    from sagestack.ops.screen import fit

    stages = {env: [s.name for s in stacks] for env, stacks in assembly_stacks(outdir).items()}
    count = sum(len(names) for names in stages.values())
    shown = outdir.relative_to(Path.cwd()) if outdir.is_relative_to(Path.cwd()) else outdir
    out = console()
    out.print(f"[green]✓[/] synthesized {count} stack(s) into {shown}/")
    for stage, names in stages.items():
        lines = fit(f"{stage}: {', '.join(names)}", max(out.width, 40), "  ", "    ")
        out.print("\n".join(lines), markup=False)
    missing = len(json.loads((outdir / "manifest.json").read_text()).get("missing", []))
    if missing:  # the app's warning above says what and how to resolve it
        out.print(f"[yellow]![/] {missing} context lookup(s) unresolved (above): not deployable yet")


@app.command()
def run(
    job: Annotated[
        str,
        typer.Argument(
            help="a key of jobs:, tuning: or transforms: (a pinned one), or an endpoint (ENDPOINT/COMPONENT) "
            "whose llm: has optimize:"
        ),
    ],
    env: Annotated[str, typer.Option("--env", "-e", help="environment to run in")],
    root: RootOption = Path("."),
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow the execution to its end")] = True,
    poll: Annotated[float, typer.Option("--poll", help="seconds between status checks")] = 5.0,
    timeout: Annotated[float | None, typer.Option("--timeout", help="stop following after N seconds")] = None,
    logs: LogsOption = True,
    recommend: Annotated[
        bool,
        typer.Option(
            "--recommend", help="measure an endpoint's slo: candidates (`sagestack recommend` reads it)"
        ),
    ] = False,
    retrain: Annotated[
        bool,
        typer.Option(
            "--retrain",
            help="train again under fresh names (new data), as the job's schedule does; the job needs "
            "schedule: (its pipeline is built retrainable)",
        ),
    ] = False,
) -> None:
    """Start a job's, tuning entry's, pinned transform's or LLM optimization's deployed pipeline and
    follow it (boto3; AWS_ENDPOINT_URL is honoured)."""
    err = console(stderr=True)
    loaded = _entry_to_run(root, env, job, recommend=recommend)
    spec = loaded.spec
    if job in spec.transforms and spec.transforms[job].model_package is None:
        source = spec.transforms[job].model
        assert source is not None
        raise UserError(
            f"transform '{job}' runs in the '{source.from_}' pipeline, right after it registers the model: "
            f"`sagestack run {source.from_} --env {env}`; pin model_package (`sagestack promote {job} "
            f"--from … --to {env}`) to run it on its own"
        )

    if retrain and (job not in spec.jobs or spec.jobs[job].schedule is None):
        raise UserError(
            f"--retrain needs a job with schedule: ('{job}' has none); its pipeline follows the job its "
            'content hash names. Add e.g. `schedule: {expression: "rate(7 days)", enabled: false}` '
            f"to jobs.{job}, deploy, and run it with --retrain"
        )

    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from sagestack.core.names import Names
    from sagestack.ops import remote
    from sagestack.ops.account import aws_client

    names = Names(spec.project, env)
    name, stack = pipeline_of(spec, env, job, recommend=recommend)
    sfn = aws_client("stepfunctions", spec.region)
    try:
        arn = remote.state_machine_arn(sfn, name)
        if retrain:
            from sagestack.training.retrain import retrain_input

            execution = remote.start_execution(
                sfn, arn, prefix="retrain", input=retrain_input(scheduled=False)
            )
        else:
            execution = remote.start_execution(sfn, arn)
    except remote.PipelineNotFound:
        raise UserError(
            f"state machine '{name}' is not deployed in {spec.region}; run `cdk deploy "
            f"{names.stack(stack)}` first"
        ) from None
    except NoCredentialsError:
        raise UserError(
            "no AWS credentials: configure a profile (aws configure) or set AWS_PROFILE"
        ) from None
    except (ClientError, BotoCoreError) as e:
        raise UserError(f"could not start '{name}': {e}") from None
    from sagestack.cli.day2 import follow_started

    out = console()
    result = follow_started(
        out, execution, job, env, root, spec, sfn, wait=wait, poll=poll, timeout=timeout, logs=logs
    )
    if result is None:
        return
    if result.status == "SUCCEEDED":
        out.print(f"[green]✓ succeeded[/]: {result.output}")
        return
    if result.status == "RUNNING":
        out.print(f"still running after {timeout} s: {execution}", markup=False)
        return
    print_lines(err, f"{result.status.lower()}: {result.error or ''}", "[red]✗[/]")
    if result.cause:
        print_lines(err, f"  {result.cause}")
    raise typer.Exit(1)


def optimized_pipelines(spec: Any, env: str) -> dict[str, str]:
    """Each optimized LLM ('endpoint' or 'endpoint/component'; an endpoint's key alone when it has
    one) -> its optimization pipeline's state machine."""
    from sagestack.core.names import Names
    from sagestack.llm.optimization_job import resolve_optimizations

    found = list(resolve_optimizations(Names(spec.project, env), spec.endpoints))
    out = {o.label: o.state_machine for o in found}
    for o in found:
        if sum(p.endpoint == o.endpoint for p in found) == 1:
            out.setdefault(o.endpoint, o.state_machine)
    return out


def _entry_to_run(root: Path, env: str, job: str, *, recommend: bool) -> Any:
    """The spec with `job` among what `run` (or `run --recommend`) starts."""
    if recommend:
        return load_entry(root, env, job, recommended_endpoints, "deployed endpoint with slo: candidates")
    return load_entry(
        root,
        env,
        job,
        lambda spec: [*spec.jobs, *spec.tuning, *spec.transforms, *optimized_pipelines(spec, env)],
        "job, tuning entry, transform or optimized LLM",
    )


def recommended_endpoints(spec: Any) -> list[str]:
    """The endpoints `run --recommend` measures: deployed here, with slo: and candidates."""
    return [k for k, ep in spec.endpoints.items() if ep.deploy and ep.slo is not None and ep.slo_candidates]


def pipeline_of(spec: Any, env: str, entry: str, *, recommend: bool = False) -> tuple[str, str]:
    """The state machine `sagestack run ENTRY [--recommend]` starts, and the stack that deploys it."""
    from sagestack.core.names import Names

    names = Names(spec.project, env)
    if recommend:
        return names.recommendation_state_machine(entry), "recommendation"
    if entry in spec.jobs or entry in spec.tuning:
        return names.state_machine(entry, tuning=entry not in spec.jobs), "training"
    if entry in spec.transforms:
        return names.transform_state_machine(entry), "serving"
    return optimized_pipelines(spec, env)[entry], "optimization"


@app.command()
def promote(
    endpoint: Annotated[
        str, typer.Argument(help="an endpoint, an endpoint's component (ENDPOINT/COMPONENT) or a transform")
    ],
    to_env: Annotated[str, typer.Option("--to", help="the environment whose config gets the pin")],
    from_env: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="the environment whose model is promoted (its pin, else its newest Approved package "
            "registered for ENDPOINT)",
        ),
    ] = None,
    package: Annotated[
        str | None,
        typer.Option(
            "--package", help="a model package ARN (default: --from's pin, else its newest Approved)"
        ),
    ] = None,
    shadow: Annotated[
        bool,
        typer.Option(
            "--shadow",
            help="pin the package as the endpoint's shadow variant (a copy of production's requests); a "
            "later plain promote makes it production",
        ),
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="do not read the registry (refused where approval is required)")
    ] = False,
    root: RootOption = Path("."),
) -> None:
    """Pin a model package in another environment's config (reviewed in git, deployed by cdk deploy).
    The package is the one registered for ENDPOINT, of its kind. Across accounts it runs with --to's
    credentials and copies the package into --to's bucket and registry (its own package is pinned).
    With --shadow, as the endpoint's shadow variant; an endpoint with a shadow is promoted by making
    its shadow production."""
    from sagestack.core.errors import SpecError
    from sagestack.ops.promote import PromotionError
    from sagestack.ops.promote import promote as do_promote

    out, err = console(), console(stderr=True)
    checked_env(root, to_env, "--to")
    checked_env(root, from_env, "--from")
    try:
        result = do_promote(
            root, endpoint, from_env, to_env, package_arn=package, offline=offline, shadow=shadow
        )
    except SpecError as e:
        raise spec_errors(e, root) from None
    except PromotionError as e:
        print_lines(err, f"not promoted: {e}", "[red]✗[/]")
        raise typer.Exit(e.exit_code) from None
    status = f" ({result.status})" if result.status else " (status not checked: --offline)"
    copied = result.copied
    if copied is not None and copied.reused:
        out.print(f"{to_env} holds a copy of it already:", markup=False, highlight=False)
        out.print(f"  {copied.arn}", markup=False, highlight=False, soft_wrap=True)
    elif copied is not None:
        for line in (
            f"copied into {to_env}'s account: {copied.objects} object(s), {copied.bytes:,} bytes,",
            f"verified by digest {copied.digest}, under",
            f"  {copied.prefix}",
            f"registered in {to_env}'s group as",
            f"  {copied.arn}",
        ):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
    if not result.changed:
        where = " as its shadow" if result.kind == "shadow" else ""
        out.print(
            f"{to_env} already serves {result.package_arn}{status} at '{endpoint}'{where}; nothing to change",
            highlight=False,
        )
        return
    if result.kind == "shadow":
        loaded = load_entry(root, to_env, endpoint, lambda spec: spec.endpoints, "endpoint")
        shadow_spec = loaded.spec.endpoints[endpoint].shadow
        percent = shadow_spec.sampling_percent if shadow_spec else 100
        out.print(
            f"[green]✓ shadow test[/]: {endpoint} in {to_env} copies {percent}% of its requests to "
            f"{result.package_arn}{status}",
            highlight=False,
        )
    elif result.kind == "shadow-promoted":
        out.print(
            f"[green]✓ promoted the shadow of {endpoint} to production in {to_env}[/]{status}",
            highlight=False,
        )
    else:
        out.print(
            f"[green]✓ promoted[/] {endpoint}: {from_env or '--package'} → {to_env}{status}", highlight=False
        )
    for change in result.changes:
        out.print(f"  {result.config_file}: {change}", markup=False, highlight=False)
    out.print(f"  review and commit it, then: cdk deploy '{to_env}/*'", markup=False)


cluster_app = typer.Typer(help="SageMaker HyperPod clusters (clusters: in the spec).", no_args_is_help=True)
app.add_typer(cluster_app, name="cluster")


@cluster_app.command("submit")
def cluster_submit(
    job: Annotated[str, typer.Argument(help="a key of jobs:")],
    cluster: Annotated[str, typer.Option("--cluster", "-c", help="a key of clusters:")],
    env: Annotated[str | None, typer.Option("--env", "-e", help="environment (default: dev)")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write the script here")] = None,
    team: Annotated[
        str | None, typer.Option("--team", "-t", help="EKS clusters: a key of the cluster's teams:")
    ] = None,
    priority: Annotated[
        str | None, typer.Option("--priority", help="EKS clusters: a key of the cluster's priority_classes:")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="EKS clusters: print the object only")] = False,
    root: RootOption = Path("."),
) -> None:
    """Render the sbatch script that runs a job's training_src on a Slurm cluster (torchrun on every
    node, the job's hyperparameters as the container's arguments) and say how to submit it; on an
    EKS cluster, the job as a HyperPodPyTorchJob in a team's queue."""
    from sagestack.cli.common import resolve_for
    from sagestack.clusters.request import sbatch_script

    resolved = resolve_for(root, env)
    spec = resolved.spec
    for what, name, known in (("job", job, spec.jobs), ("cluster", cluster, spec.clusters)):
        if name not in known:
            from sagestack.core.catalog.suggest import did_you_mean

            raise UserError(
                f"no {what} '{name}'{did_you_mean(name, list(known))} (defined: {', '.join(known) or 'none'})",
                EXIT_INVALID_SPEC,
            )
    names = resolved.names
    c = spec.clusters[cluster]
    if c.orchestrator == "eks":
        from sagestack.cli.cluster_jobs import submit_to_eks

        submit_to_eks(resolved, root, job, cluster, team, priority, output, dry_run)
        return
    shared = c.fsx.mount_path if c.fsx is not None else "$HOME"
    code_dir = f"{shared}/sagestack/code/{job}"
    try:
        script = sbatch_script(names, cluster, c, job, spec.jobs[job], code_dir=code_dir)
    except ValueError as e:
        raise UserError(f"cluster '{cluster}': {e}", EXIT_INVALID_SPEC) from None
    if output is not None:
        output.write_text(script)
        output.chmod(0o755)
    else:
        typer.echo(script)
    err = console(stderr=True)
    target = output.name if output else "job.sbatch"
    err.print(
        f"# submit: copy {spec.jobs[job].source_dir}/ to {code_dir} on the cluster (its FSx is linked to "
        f"the bucket's data/ prefix), then on the login or controller node of {names.cluster(cluster)} "
        f"(aws ssm start-session --target sagemaker-cluster:<cluster-id>_<group>-<instance-id>): sbatch {target}",
        markup=False,
    )


@app.command()
def lineage(
    name: Annotated[
        str,
        typer.Argument(
            help="an endpoint, an endpoint's component (ENDPOINT/COMPONENT) or a pinned transform"
        ),
    ],
    env: Annotated[str, typer.Option("--env", "-e", help="the environment it is deployed in")],
    root: RootOption = Path("."),
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document")] = False,
    check: Annotated[
        bool, typer.Option("--check", help="exit 1 when the lock that trained it would not train it again")
    ] = False,
) -> None:
    """Walk a deployed model back to what made it: endpoint → model package → training job → code,
    data and images; and say whether the training environment's lock would reproduce it (boto3;
    AWS_ENDPOINT_URL is honoured)."""
    import json

    from sagestack.core.names import Names
    from sagestack.ops.account import aws_client
    from sagestack.ops.lineage import LineageError, walk, walk_package

    endpoint_key, _, component = name.partition("/")
    loaded = load_entry(
        root,
        env,
        endpoint_key,
        lambda spec: [*spec.endpoints, *spec.transforms],
        "endpoint or transform",
    )
    spec = loaded.spec
    sm = aws_client("sagemaker", spec.region)
    pinned: str | None = None
    try:
        if endpoint_key in spec.transforms or component:
            if component:
                components = spec.endpoints[endpoint_key].components
                if component not in components:
                    raise UserError(
                        f"endpoint '{endpoint_key}' has no component '{component}' (defined: "
                        f"{', '.join(components) or 'none'})",
                        code=2,
                    )
                pinned = components[component].model_package
            else:
                pinned = spec.transforms[endpoint_key].model_package
            if pinned is None:
                raise UserError(
                    f"'{name}' pins no model package in {env}: nothing deployed to walk "
                    f"(`sagestack promote {name} --from … --to {env}` pins one)"
                )
            result = walk_package(sm, pinned, root)
        else:
            pinned = spec.endpoints[endpoint_key].model_package
            result = walk(sm, Names(spec.project, env).endpoint(endpoint_key), root)
    except LineageError as e:
        raise UserError(f"{e}; is it deployed in {env}? (`cdk deploy`)") from None
    if as_json:
        typer.echo(json.dumps(result.document(), indent=1, sort_keys=True, default=str))
    else:
        _print_lineage(result, pinned)
    if check and result.verdict.reproducible is False:
        raise typer.Exit(1)


def _print_lineage(result: Any, pinned: str | None) -> None:
    from rich.markup import escape

    out = console()
    for depth, step in enumerate(result.steps):
        indent = "  " * depth
        out.print(f"{indent}[bold]{step.kind}[/] {step.name}", highlight=False)
        for key, value in step.facts:
            out.print(f"{indent}    {key}: {value}", markup=False, highlight=False)
        if step.kind == "model package" and pinned and step.name != pinned:
            out.print(
                f"{indent}    [yellow]![/] the config pins {pinned}: deploy to serve it", highlight=False
            )
        if step.problem:
            out.print(f"{indent}    [yellow]![/] {step.problem}", highlight=False)
    v = result.verdict
    lock = f"config/envs/{v.environment}.lock.json" if v.environment else "the lock"
    answer = {True: "[green]yes[/]", False: "[red]no[/]", None: "[yellow]cannot tell[/]"}[v.reproducible]
    out.print(f"\nWould {lock} train it again? {answer}", highlight=False)
    for holds, reason in v.reasons:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]?[/]"}[holds]
        out.print(f"  {mark} {escape(reason)}", highlight=False)
    for note in v.notes:
        out.print(f"  · {note}", markup=False, highlight=False)
