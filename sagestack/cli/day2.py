"""`sagestack logs` and `sagestack stop` (ops/logs.py, ops/stop.py read and act), and what Ctrl-C in
`sagestack run` does: in a terminal it asks whether to stop the run and its job; with none it
leaves them running and prints the `stop` command that stops them."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from sagestack.cli.aws import aws_errors, clients
from sagestack.cli.common import EnvOption, JsonOption, RootOption, UserError, resolve_for

app = typer.Typer()

LogsOption = Annotated[
    bool, typer.Option("--logs/--no-logs", help="print the training job's log lines as the run goes")
]
SPOT_NOTE = "spot: its checkpoints stay in S3; the next run of the job resumes from them"


@app.command()
def logs(
    target: Annotated[
        str,
        typer.Argument(
            metavar="JOB|ENDPOINT",
            help="a job key (its newest training job), a training job's name, or an endpoint key",
        ),
    ],
    env: EnvOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="print lines as they come until the job ends")
    ] = False,
    poll: Annotated[
        float, typer.Option("--poll", metavar="S", help="seconds between reads with --follow")
    ] = 5.0,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Every host's CloudWatch log lines of a training job or an endpoint, in time order, each with
    its host; --follow ends with the job, printing its final status and metrics (exit 1 when it
    failed). --json: one JSON object a line (time, host, message; then the job's status)."""
    from sagestack.ops import logs as ops
    from sagestack.ops.status import scope_of, training_row

    scope = scope_of(resolve_for(root, env))
    try:
        ops.check_name(scope, target)  # a name the spec does not know: said before any credentials
    except ops.NotFound as e:
        raise UserError(str(e)) from None
    client = clients(scope.region)
    width = shutil.get_terminal_size().columns
    with aws_errors(scope.region):
        try:
            found = ops.resolve(scope, client("sagemaker"), target)
        except ops.NotFound as e:
            raise UserError(str(e)) from None
        reader = ops.Reader(client("logs"), found)
        pad = 0

        def show(lines: list[Any]) -> None:
            nonlocal pad
            for line in lines:
                if as_json:
                    typer.echo(json.dumps(line.as_json()))
                    continue
                pad = max(pad, min(len(line.host), 24))
                typer.echo(_logline(line, pad, width))

        if not as_json:
            typer.echo(f"{found.name} · {found.group}")
        try:
            if found.kind == "endpoint":
                show(reader.read()) if not follow else ops.follow_endpoint(reader, show, poll_seconds=poll)
                return
            if follow:
                described = ops.follow(reader, client("sagemaker"), show, poll_seconds=poll)
            else:
                show(reader.read())
                described = client("sagemaker").describe_training_job(TrainingJobName=found.name)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None
    from datetime import UTC, datetime

    row = training_row(described, found.entry, datetime.now(UTC))
    if as_json:
        typer.echo(json.dumps({"job": row}))
    else:
        for text in final_lines(row, follow, env or "dev", width):
            typer.echo(text)
    if follow and row["status"] == "Failed":
        raise typer.Exit(1)


def _logline(line: Any, pad: int, width: int) -> str:
    """'HH:MM:SS host message'. In a terminal a long message wraps at spaces under its own column
    (a word longer than the line runs on whole); in a pipe it stays one line, as the host wrote it."""
    from datetime import UTC, datetime

    from sagestack.ops.screen import fit

    at = datetime.fromtimestamp(line.timestamp / 1000, UTC)
    head = f"{at:%H:%M:%S} {line.host:<{pad}} "
    text = head + str(line.message)
    if len(text) <= width or not sys.stdout.isatty():
        return text
    return "\n".join(fit(text, width, "", " " * len(head)))


def final_lines(row: dict[str, Any], followed: bool, env: str, width: int) -> list[str]:
    """The job's status after its lines, as ModelTrainer's wait(logs=True) ends: status, training
    and billable time, spot savings, the last metrics, the failure reason."""
    from sagestack.ops.screen import fit

    facts = [
        row["status"]
        if row["secondary_status"] in (None, row["status"])
        else f"{row['status']}/{row['secondary_status']}"
    ]
    if row["elapsed_s"] is not None:
        facts.append(f"trained {_duration(row['elapsed_s'])}")
    if row["billable_s"] is not None:
        facts.append(f"billed {_duration(row['billable_s'])}")
    if row["spot_savings_percent"] is not None:
        facts.append(f"spot saved {row['spot_savings_percent']}%")
    facts += [f"{k}={v:.4g}" for k, v in row["metrics"].items()]
    out = fit(f"{row['name']}: {', '.join(facts)}", width)
    if row["failure_reason"]:
        out += fit(f"failed: {row['failure_reason']}", width, "  ")
    if row["status"] == "InProgress" and not followed:
        out += fit(
            f"still running: `sagestack logs {row['job'] or row['name']} --env {env} --follow` follows it",
            width,
        )
    return out


def _duration(seconds: int) -> str:
    minutes, rest = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


@app.command()
def stop(
    target: Annotated[
        str,
        typer.Argument(
            metavar="JOB|SEARCH|RUN",
            help="a job or tuning entry (all it runs), a pipeline run's name, or a training or tuning job's name",
        ),
    ],
    env: EnvOption = None,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """Stop a pipeline's running executions and the SageMaker jobs they started (StopTrainingJob,
    StopHyperParameterTuningJob), and say what was stopped; nothing running: said, exit 0. Only
    this environment's pipelines and jobs (by sagestack's names and tags) are stopped."""
    from sagestack.ops.status import scope_of
    from sagestack.ops.stop import NotOurs, check_target, plan, stop

    scope = scope_of(resolve_for(root, env))
    try:
        check_target(scope, target)  # a name the spec does not know: said before any credentials
    except NotOurs as e:
        raise UserError(str(e)) from None
    client = clients(scope.region)
    with aws_errors(scope.region):
        try:
            planned = plan(scope, client("stepfunctions"), client("sagemaker"), target, client("batch"))
        except NotOurs as e:
            raise UserError(str(e)) from None
        done = stop(planned, client("stepfunctions"), client("sagemaker"), scope, client("batch"))
    if as_json:
        typer.echo(json.dumps({"stopped": [s.as_json() for s in done]}, indent=1))
        return
    width = shutil.get_terminal_size().columns
    for line in stopped_lines(done, target, scope.names.env, width):
        typer.echo(line)


def stopped_lines(done: list[Any], target: str, env: str, width: int) -> list[str]:
    from sagestack.ops.screen import fit

    if not done:
        return fit(f"nothing of '{target}' is running in {env}: nothing stopped", width)
    out: list[str] = []
    for s in done:
        what = "run" if s.kind == "execution" else s.kind
        out += fit(f"stopped {what} {s.name}" + (f" ({s.entry})" if s.entry else ""), width)
        if s.spot:
            out += fit(SPOT_NOTE, width, "  ")
    return out


# ---------------------------------------------------------------- Ctrl-C in `sagestack run`


def stop_command(target: str, env: str, root: Path) -> str:
    where = "" if root == Path(".") else f" --root {root}"
    return f"sagestack stop {target} --env {env}{where}"


def follow_started(
    out: Any,
    execution: str,
    entry: str,
    env: str,
    root: Path,
    spec: Any,
    sfn: Any,
    *,
    wait: bool,
    poll: float,
    timeout: float | None,
    logs: bool = True,
) -> Any:
    """`run` after it started `execution`: say so and follow it (ops/remote.py); its result, or
    None with --no-wait. A job's run prints its training job's log lines as they come (--no-logs:
    not). From the first line on, Ctrl-C leaves an execution behind: interrupted_run."""
    from sagestack.ops import remote

    name = execution.split(":")[-2]
    try:
        out.print(f"started {execution}", markup=False)
        if not wait:
            return None
        with out.status(f"[bold]{name}[/]: starting") as status:

            def on_state(state: str) -> None:
                out.print(f"  → {state}", markup=False)
                status.update(f"[bold]{name}[/]: {state}")

            lines = RunLogs(out, sfn, execution, entry) if logs and entry in spec.jobs else lambda: None
            return remote.follow(
                sfn, execution, poll_seconds=poll, timeout_seconds=timeout, on_state=on_state, on_poll=lines
            )
    except KeyboardInterrupt:
        interrupted_run(execution, entry, env, root, spec, sfn)


class RunLogs:
    """`run`'s view of its training job's logs: at each poll, the job its execution created last
    (its history names it), its hosts' new lines. A refusal (no logs:GetLogEvents in the role,
    say) is said once and the run followed without them."""

    def __init__(self, out: Any, sfn: Any, execution: str, entry: str) -> None:
        self.out, self.sfn, self.execution, self.entry = out, sfn, execution, entry
        self.reader: Any = None
        self.pad = 0
        self.off = False

    def __call__(self) -> None:
        if self.off:
            return
        try:
            self._print_new()
        except Exception as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            self.off = True
            self.out.print(f"  (the job's logs cannot be read: {e}; `sagestack logs` may)", markup=False)

    def _print_new(self) -> None:
        from sagestack.ops import logs as ops
        from sagestack.ops.stop import scheduled_jobs

        jobs = [name for kind, name in scheduled_jobs(self.sfn, self.execution) if kind == "training job"]
        if jobs and (self.reader is None or self.reader.target.name != jobs[-1]):
            import boto3

            region = self.execution.split(":")[3]
            target = ops.Target("training", jobs[-1], self.entry, ops.TRAINING_GROUP, jobs[-1] + "/")
            self.reader = ops.Reader(boto3.client("logs", region_name=region), target)
        if self.reader is None:
            return
        width = shutil.get_terminal_size().columns
        for line in self.reader.read():
            self.pad = max(self.pad, min(len(line.host), 24))
            self.out.print(_logline(line, self.pad, width), markup=False, highlight=False)


def interrupted_run(execution: str, entry: str, env: str, root: Path, spec: Any, sfn: Any) -> None:
    """Ctrl-C while `run` follows `execution`: in a terminal, ask whether to stop it and its job
    (yes by default: nothing keeps running unless the user says so); else, or when the question
    itself is interrupted, leave it running and print the command that stops it. Exit 130."""
    from sagestack.ops.screen import fit
    from sagestack.ops.status import scope_of
    from sagestack.ops.stop import plan, stop

    run = execution.rsplit(":", 1)[-1]
    command = stop_command(run, env, root)
    width = shutil.get_terminal_size().columns
    answer = False
    if sys.stdin.isatty() and sys.stdout.isatty():
        try:
            typer.echo("")
            answer = typer.confirm(f"Stop run {run} and its job?", default=True)
        except (KeyboardInterrupt, typer.Abort, EOFError):
            typer.echo("")
            answer = False
    if answer:
        scope = scope_of(SimpleNamespace(spec=spec, env=env))
        sm, batch = clients(scope.region)("sagemaker"), clients(scope.region)("batch")
        with aws_errors(scope.region):
            done = stop(plan(scope, sfn, sm, run, batch), sfn, sm, scope, batch)
        for line in stopped_lines(done, run, env, width):
            typer.echo(line)
        raise typer.Exit(130)
    said = f"run {run} of {entry} is still running; to stop it and its job: `{command}`"
    for line in fit(said, width) if sys.stderr.isatty() else [said]:  # a pipe: one line, to copy
        typer.echo(line, err=True)
    raise typer.Exit(130)
