"""`sagestack status`: what an environment runs now (ops/status.py reads it), as one screen fitted
to the terminal's width (ops/screen.py: words whole), as --json, or refreshed with --watch."""

from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from sagestack.cli.aws import NO_CREDENTIALS, clients
from sagestack.cli.common import EnvOption, JsonOption, RootOption, UserError, resolve_for

app = typer.Typer()


@app.command()
def status(
    env: EnvOption = None,
    as_json: JsonOption = False,
    watch: Annotated[
        bool, typer.Option("--watch", help="read again every --every seconds until Ctrl-C")
    ] = False,
    every: Annotated[
        int, typer.Option("--every", min=1, metavar="N", help="seconds between reads with --watch")
    ] = 10,
    root: RootOption = Path("."),
) -> None:
    """Stacks, pipeline runs, training and tuning jobs, endpoints (with the last hour's traffic),
    clusters and schedules of an environment, found by sagestack's names and tags (boto3;
    AWS_ENDPOINT_URL is honoured)."""
    from sagestack.ops.status import scope_of

    resolved = resolve_for(root, env)
    scope = scope_of(resolved)
    client = clients(scope.region)
    try:
        while True:
            document = _read(scope, client)
            if as_json:
                typer.echo(json.dumps(document, indent=None if watch else 1))
            else:
                size, in_place = shutil.get_terminal_size(), watch and sys.stdout.isatty()
                lines = render(document, size.columns)
                if in_place:
                    typer.echo("\x1b[H\x1b[2J", nl=False)  # home, clear: the screen in place
                    lines = one_screen(lines, size.lines - 1)
                typer.echo("\n".join(lines))
                if watch:  # in place, no newline: the cursor stays on the last row, nothing scrolls
                    typer.echo(f"every {every} s · Ctrl-C to stop", nl=not in_place)
            if not watch:
                break
            time.sleep(every)
    except KeyboardInterrupt:
        if watch and not as_json and sys.stdout.isatty():
            typer.echo("")  # the prompt on a line of its own, after the footer
        raise typer.Exit(0) from None
    if document["errors"]:
        raise typer.Exit(1)


def _read(scope: Any, client: Any) -> dict[str, Any]:
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    from sagestack.ops.status import read_status

    try:
        return read_status(scope, client)
    except (NoCredentialsError, PartialCredentialsError):
        raise UserError(NO_CREDENTIALS) from None
    except EndpointConnectionError as e:
        raise UserError(f"cannot reach AWS in {scope.region}: {e}") from None


# ---------------------------------------------------------------- the screen


def render(doc: dict[str, Any], width: int) -> list[str]:
    """The status document as lines of at most `width` columns (a word longer than a line is kept
    whole): a section per kind of resource, a line per resource, details on hanging lines."""
    from sagestack.ops.screen import fit

    width = max(width, 40)
    read_at = _parse(doc["read_at"])
    logical: list[tuple[str, str]] = [
        ("", f"{doc['project']} · {doc['environment']} · {doc['region']} · read {read_at:%Y-%m-%d %H:%M} UTC")
    ]
    logical += _stacks(doc["stacks"], read_at)
    for title, rows in (
        ("pipelines (latest runs)", _pipelines(doc["pipelines"], read_at)),
        ("training jobs", _training(doc["training_jobs"])),
        ("tuning jobs", _tuning(doc["tuning_jobs"])),
        ("endpoints (last hour)", _endpoints(doc["endpoints"])),
        ("recommendations (slo:)", _recommendations(doc, read_at)),
        ("clusters", _clusters(doc["clusters"])),
        ("training queues", _queues(doc.get("queues", []))),
        ("schedules", _schedules(doc["schedules"], read_at)),
    ):
        if rows:
            logical += [("", title), *rows]
    if not any(doc[k] for k in ("training_jobs", "tuning_jobs")) and not doc["errors"]:
        logical.append(("", "no training or tuning job of this environment yet"))
    logical += [("", f"could not read {e}") for e in doc["errors"]]
    lines: list[str] = []
    for indent, text in logical:  # a line that fits keeps its columns; a longer one is fitted
        fits = len(indent + text) <= width
        lines += [indent + text] if fits else fit(text, width, indent, indent + "    ")
    return lines


def one_screen(lines: list[str], rows: int) -> list[str]:
    """At most `rows` lines (what --watch redraws in place): the rest counted on the last one."""
    if len(lines) <= rows:
        return lines
    kept = max(rows - 1, 1)
    return [*lines[:kept], f"({len(lines) - kept} more lines: `sagestack status` shows them all)"]


def _stacks(rows: list[dict[str, Any]], now: datetime) -> list[tuple[str, str]]:
    """One line (fitted): each deployed stack's status, then those not deployed; a stack's reason
    (a failed update, a rollback) on a line of its own."""
    deployed = [f"{r['kind']} {r['status']} {_when(r['updated'], now)}" for r in rows if r["status"]]
    missing = [r["kind"] for r in rows if not r["status"]]
    parts = [", ".join(deployed)] if deployed else []
    if missing:
        parts.append(f"not deployed: {', '.join(missing)}")
    out = [("", f"stacks: {'; '.join(parts)}")] if parts else []
    for r in rows:
        if r["status"] and r["reason"] and ("FAILED" in r["status"] or "ROLLBACK" in r["status"]):
            out.append(("  ", f"{r['kind']}: {r['reason']}"))
    return out


def _pipelines(rows: list[dict[str, Any]], now: datetime) -> list[tuple[str, str]]:
    pad = _pad(r["entry"] for r in rows if r["executions"])
    out = []
    for r in rows:
        if r["executions"]:
            runs = ", ".join(f"{e['status']} {_when(e['started'], now)}" for e in r["executions"])
            out.append(("  ", f"{r['entry']:<{pad}} {runs}"))
    for what, which in (
        ("never run", [r for r in rows if r["deployed"] and not r["executions"]]),
        ("not deployed", [r for r in rows if not r["deployed"]]),
    ):
        if which:
            out.append(("  ", f"{what}: {', '.join(r['entry'] for r in which)}"))
    return out


def _training(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        phase = (
            r["status"]
            if r["secondary_status"] in (None, r["status"])
            else f"{r['status']}/{r['secondary_status']}"
        )
        facts = [phase, _duration(r["elapsed_s"])]
        if r["billable_s"] is not None:
            facts.append(f"billed {_duration(r['billable_s'])}")
        if r["spot_savings_percent"] is not None:
            facts.append(f"spot saved {r['spot_savings_percent']}%")
        elif r["spot"]:
            facts.append("spot")
        facts += [f"{k}={_number(v)}" for k, v in r["metrics"].items()]
        out.append(("  ", f"{r['name']} {' '.join(f for f in facts if f)}"))
        if r["failure_reason"]:
            out.append(("    ", f"failed: {r['failure_reason']}"))
    return out


def _tuning(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        counts = f"{r['completed']} done, {r['in_progress']} running, {r['failed']} failed"
        out.append(("  ", f"{r['name']} {r['status']} {_duration(r['elapsed_s'])} ({counts})"))
        if r["best_job"]:
            metric = " ".join(f"{k}={_number(v)}" for k, v in r["best_metric"].items())
            out.append(("    ", f"best {r['best_job']} {metric}".rstrip()))
        if r["failure_reason"]:
            out.append(("    ", f"failed: {r['failure_reason']}"))
    return out


def _endpoints(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    pad = _pad(r["key"] for r in rows)
    out = []
    for r in rows:
        if not r["status"]:
            out.append(("  ", f"{r['key']:<{pad}} not deployed"))
            continue
        variants = [_variant(v) for v in r["variants"]]
        head = f"{r['key']:<{pad}} {r['status']}"
        out.append(("  ", f"{head} · {variants.pop(0)}" if len(variants) == 1 else head))
        if r.get("failure_reason"):
            out.append(("    ", f"failed: {r['failure_reason']}"))
        out += [("    ", v) for v in variants]
        if r["components"]:
            parts = ", ".join(f"{c['name']} {c['status']}" for c in r["components"])
            out.append(("    ", f"components: {parts}"))
    return out


def _recommendations(doc: dict[str, Any], now: datetime) -> list[tuple[str, str]]:
    """Per endpoint with slo: its newest verdict in a line (the candidate recommended, or none meets;
    the model version measured, when), then what makes it stale or what to run; commands on lines of
    their own, as they run pasted."""
    rows = doc.get("recommendations") or []
    pad = _pad(r["endpoint"] for r in rows)
    out = []
    for r in rows:
        head, state = f"{r['endpoint']:<{pad}}", r["state"]
        if state == "not_deployed":
            out.append(("  ", f"{head} pipeline not deployed: sagestack deploy --env {doc['environment']}"))
            continue
        if state == "error":
            out.append(("  ", f"{head} could not read: {r['error']}"))
            continue
        newer = r["newer_run"]
        if state == "never_measured":
            out.append(("  ", f"{head} never measured" + (f" ({_run(newer, now)})" if newer else "")))
            out.append(("    ", f"measure: {r['measure']}"))
            continue
        out.append(("  ", f"{head} {_verdict(r)}"))
        version = (
            f" version {r['model_package_version']}" if r["model_package_version"] else ""
        )  # an LLM: none
        measured = f"measured{version} {_when(r['measured_at'], now)}"
        if r["stale"]:
            out.append(("    ", f"stale: {r['stale']}"))
            out.append(("    ", f"measure: {r['measure']}"))
        elif newer:  # what became of the runs since (the table waits: two lines)
            out.append(("    ", f"{measured}; {_run(newer, now)} since"))
        else:
            out.append(("    ", f"{measured}; table: `{r['show']}`"))
    return out


def _verdict(r: dict[str, Any]) -> str:
    llm = r["kind"] == "llm"
    if r["recommended"] is None:
        return f"no candidate meets the target ({len(r['rows'])} of {len(r['candidates'])} measured)"
    best = next(row for row in r["rows"] if row["instance_type"] == r["recommended"] and row["meets"])
    figures = [
        f"{'TTFT ' * llm}{_number(best['latency_ms'])} ms" if best["latency_ms"] is not None else "",
        f"{_number(best['throughput'])} {'tok/s' if llm else 'req/s'}"
        if best["throughput"] is not None
        else "",
        f"${best['cost']:,.4f}/{'1M tok' if llm else '1k req'}" if best["cost"] is not None else "",
    ]
    return f"{r['recommended']} meets the target: {', '.join(f for f in figures if f)}"


def _run(run: dict[str, Any], now: datetime) -> str:
    """A run after the one measured (or the only one): under way, failed, stopped."""
    status = {"RUNNING": "a run under way since"}.get(run["status"], f"a run {run['status']}")
    return f"{status} {_when(run['started'], now)}".rstrip()


def _variant(v: dict[str, Any]) -> str:
    if v["serverless"]:
        size = "serverless"
    else:
        size = f"{_count(v['current'])}/{_count(v['desired'])} instances"
        if v["pools"]:
            size += " (" + ", ".join(f"{p['instance_type']} {_count(p['current'])}" for p in v["pools"]) + ")"
    h = v["last_hour"]
    traffic = ""
    if h:
        latency = f", {h['latency_ms']:g} ms" if h.get("latency_ms") is not None else ""
        traffic = f": {h['invocations']} calls, 4XX {h['errors_4xx']}, 5XX {h['errors_5xx']}{latency}"
    return f"{v['name']} {size}{traffic}"


def _clusters(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        if not r["status"]:
            out.append(("  ", f"{r['key']} not deployed"))
            continue
        groups = ", ".join(
            f"{g['name']} {_count(g['current'])}/{_count(g['target'])} {g['instance_type']}"
            for g in r["groups"]
        )
        out.append(("  ", f"{r['key']} {r['status']}" + (f": {groups}" if groups else "")))
        if r.get("failure_reason"):
            out.append(("    ", f"failed: {r['failure_reason']}"))
    return out


def _queues(rows: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        if not r["deployed"]:
            out.append(("  ", f"{r['key']} not deployed"))
            continue
        running = sum(j["status"] == "RUNNING" for j in r["jobs"])
        held = len(r["jobs"]) - running
        out.append(
            ("  ", f"{r['key']}: {held} waiting, {running} running" if r["jobs"] else f"{r['key']}: empty")
        )
        for j in r["jobs"]:
            share = f" {j['share']}" if j["share"] else ""
            since = f" {_duration(j['waiting_seconds'])}" if j["waiting_seconds"] is not None else ""
            why = f": {j['reason']}" if j["reason"] and j["status"] != "RUNNING" else ""
            out.append(("    ", f"{j['name']} {j['status']}{share}{since}{why}"))
    return out


def _schedules(rows: list[dict[str, Any]], now: datetime) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        what = f"{r['entry']} {'retrain' if r['kind'] == 'retrain' else 'data quality'}"
        if not r["state"]:
            out.append(("  ", f"{what} not deployed"))
            continue
        upcoming = f"next {_when(r['next_run'], now)}" if r["next_run"] else "no next run"
        last = f", last {r['last_run']}" if r.get("last_run") else ""
        out.append(("  ", f"{what} {r['state']} {upcoming}{last} · {r['expression']}"))
        if r.get("failure_reason"):
            out.append(("    ", f"failed: {r['failure_reason']}"))
    return out


def _pad(keys: Any) -> int:
    return min(max((len(k) for k in keys), default=0), 20)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _when(text: str | None, now: datetime) -> str:
    """A time of the document as the screen shows it: HH:MM today, else MM-DD HH:MM (UTC)."""
    if not text:
        return ""
    at = _parse(text)
    return f"{at:%H:%M}" if at.date() == now.date() else f"{at:%m-%d %H:%M}"


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if hours < 1:
        return f"{minutes}m"
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24}h"


def _number(value: float) -> str:
    return f"{value:.4g}"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)
