"""`sagestack cost`: an environment's actual spend (Cost Explorer, by sagestack's tags), what runs
now and its burn rate at the catalog's prices, and `plan`'s estimate beside them (ops/cost.py reads
it), as one screen fitted to the terminal's width (ops/screen.py: words whole) or as --json."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from sagestack.cli.aws import NO_CREDENTIALS, clients
from sagestack.cli.common import EnvOption, JsonOption, RootOption, UserError, resolve_for

app = typer.Typer()

# what the spend is told apart by (ops/cost.py's tags), as the screen names them
GROUPS = (
    ("job", "sagestack:job"),
    ("search", "sagestack:tuning"),
    ("endpoint", "sagestack:endpoint"),
    ("cluster", "sagestack:cluster"),
)

DaysOption = Annotated[
    int,
    typer.Option(
        "--days",
        min=1,
        max=365,
        metavar="N",
        help="the last N days, today's spend so far included (Cost Explorer keeps 13 months)",
    ),
]


@app.command()
def cost(
    env: EnvOption = None,
    days: DaysOption = 30,
    as_json: JsonOption = False,
    root: RootOption = Path("."),
) -> None:
    """An environment's spend over the last N days from Cost Explorer, per job, search, endpoint
    and cluster (by sagestack's tags, once activated as cost allocation tags: it says when they
    are not, and how), what runs now and its cost per hour, and `plan`'s estimate beside them
    (boto3; AWS_ENDPOINT_URL is honoured)."""
    from botocore.exceptions import EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    from sagestack.ops.cost import read_cost
    from sagestack.ops.status import scope_of

    resolved = resolve_for(root, env)
    scope = scope_of(resolved)
    client = clients(scope.region)
    try:
        document = read_cost(scope, client, _plan(root, resolved), days)
    except (NoCredentialsError, PartialCredentialsError):
        raise UserError(NO_CREDENTIALS) from None
    except EndpointConnectionError as e:
        raise UserError(f"cannot reach AWS: {e}") from None
    if as_json:
        typer.echo(json.dumps(document, indent=1))
    else:
        typer.echo("\n".join(render(document, shutil.get_terminal_size().columns)))
    if document["errors"]:
        raise typer.Exit(1)


def _plan(root: Path, resolved: Any) -> list[Any]:
    """`plan`'s rows of the environment (capacity's one pass; no quotas read: only the prices)."""
    from sagestack.capacity.assess import assess
    from sagestack.capacity.ledger import QuotaBook
    from sagestack.project.requests import render_training

    requests = render_training(resolved, root, validate=False)
    return assess(resolved, requests, QuotaBook.none("cost reads only the prices")).rows


# ---------------------------------------------------------------- the screen


def render(doc: dict[str, Any], width: int) -> list[str]:
    """The cost document as lines of at most `width` columns (a word longer than a line is kept
    whole): the tags' state, the spend per entry beside the plan, what runs now."""
    from sagestack.ops.screen import fit

    width = max(width, 40)
    read_at = datetime.fromisoformat(doc["read_at"]).astimezone(UTC)
    logical: list[tuple[str, str]] = [
        ("", f"{doc['project']} · {doc['environment']} · {doc['region']} · read {read_at:%Y-%m-%d %H:%M} UTC")
    ]
    logical += _tags(doc)
    logical += _spend(doc)
    logical += _running(doc)
    logical += [("", f"could not read {e}") for e in doc["errors"]]
    lines: list[str] = []
    for indent, text in logical:  # a line that fits keeps its columns; a longer one is fitted
        columns, tab, rest = text.partition("\t")  # a table row: its last cell fitted under itself
        if tab:
            fits = len(columns + rest) <= width
            lines += [columns + rest] if fits else fit(rest, width, columns, " " * len(columns))
            continue
        fits = len(indent + text) <= width
        lines += [indent + text] if fits else fit(text, width, indent, indent + "    ")
    return lines


def _tags(doc: dict[str, Any]) -> list[tuple[str, str]]:
    tags: dict[str, str | None] = doc["tags"]
    if not tags:
        return []
    todo = doc["activate"]
    if todo is None:
        short = [k.removeprefix("sagestack:") for k in tags]
        named = f"sagestack:{{{','.join(short)}}}" if all(":" not in k for k in short) else ", ".join(tags)
        return [("", f"cost allocation tags active: {named}")]
    states = ", ".join(f"{k} {'not seen yet' if s is None else s.lower()}" for k, s in tags.items())
    out = [("", f"cost allocation tags: {states}")]
    if todo["command"]:
        out.append(
            (
                "  ",
                "Cost Explorer groups spend only by active tags: activate them in the management "
                "account (Billing and Cost Management → Cost allocation tags), or run there: "
                f"`{todo['command']}`",
            )
        )
    if todo["unseen"]:
        out.append(
            (
                "  ",
                f"not seen yet: {', '.join(todo['unseen'])}; Billing lists a tag within 24 hours "
                "of the first billed usage that carries it (a deployed resource, a job run): "
                "activate it then",
            )
        )
    out.append(
        (
            "  ",
            "an activated tag counts spend from then on; for the spend before, after activating: "
            f"`{todo['backfill']}`",
        )
    )
    return out


def _spend(doc: dict[str, Any]) -> list[tuple[str, str]]:
    period = doc["period"]
    span = f"{_day(period['start'])}..{_day(period['end'], -1)} ({period['days']} days)"
    spend = doc["spend"]
    if spend is None:
        env_tags = " and ".join(list(doc["tags"])[:2])
        why = (
            f"not known until {env_tags} are active"
            if env_tags and not doc["tags_ready"]
            else "not read (below)"
        )
        out = [("", f"spend {span}: {why}")]
    else:
        money = _money(spend["currency"])
        out = [("", f"spend {span}: {money(spend['total'])}")]
        out += _days(spend["daily"], money)
    entries = doc["entries"]
    if entries:
        money = _money(doc["currency"])
        pad = min(max(len(f"{e['kind']} {e['key']}") for e in entries), 34)
        out.append(("  ", f"{'':<{pad}} {'actual':>10}  plan"))
        for e in entries:
            actual = "?" if e["actual"] is None else money(e["actual"])
            plan = "" if e["plan"] is None else f"{money(e['plan'])} {_basis(e)}"
            out.append(("", f"  {e['kind'] + ' ' + e['key']:<{pad}} {actual:>10}  \t{plan}".rstrip()))
        out += _by_instance_type(doc)
    if spend is not None and spend["other"]:
        money = _money(spend["currency"])
        rest = [o for o in spend["other"] if o["kind"] == "service"]
        if rest:
            out.append(("  ", "other: " + ", ".join(f"{o['what']} {money(o['amount'])}" for o in rest)))
    if spend is not None:
        missing = [(w, k) for w, k in GROUPS if k in spend["groupable"] and k not in spend["grouped_by"]]
        if missing:
            what, keys = (_and(list(part)) for part in zip(*missing, strict=True))
            out.append(("  ", f"per {what} needs {keys} active too"))
    return out


def _by_instance_type(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Whose spend is told by instance type, and why: spend without their own tag (an endpoint or
    cluster deployed before sagestack tagged them), or the tag not active."""
    grouped = (doc["spend"] or {}).get("grouped_by", [])
    out = []
    for e in doc["entries"]:
        if not e["by_instance_type"]:
            continue
        tag = dict(GROUPS)["job" if e["kind"] == "training" else e["kind"]]
        why = (
            f" ({tag} not active)"
            if tag not in grouped
            else f" (deployed before sagestack tagged {e['kind']}s)"
            if e["kind"] != "training"
            else ""
        )
        text = f"{e['kind']} {e['key']}: spend without {tag}{why} is its instance type's usage"
        out.append(("  ", f"{text}, {e['instance_type']}" if e["instance_type"] != e["key"] else text))
    return out


def _and(words: list[str]) -> str:
    return " and ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} and {words[-1]}"


def _days(daily: list[dict[str, Any]], money: Any) -> list[tuple[str, str]]:
    if not daily:
        return []
    full = [d for d in daily if not d["estimated"]] or daily
    top = max(full, key=lambda d: d["amount"])
    mean = sum(d["amount"] for d in full) / len(full)
    text = f"per day: {money(mean)} average, {money(top['amount'])} at most ({_day(top['date'])})"
    today = daily[-1]
    if today["estimated"]:
        text += f", {_day(today['date'])} {money(today['amount'])} so far"
    return [("  ", text)]


def _running(doc: dict[str, Any]) -> list[tuple[str, str]]:
    rows = doc["running"]
    if not rows:
        return [("", "running now: nothing billed by the hour")]
    money = _money(doc["currency"])
    out = [("", f"running now: {money(doc['burn_per_hour'])} an hour at the catalog's prices")]
    for r in rows:
        rate = "price not in the catalog" if r["per_hour"] is None else f"{money(r['per_hour'])}/h"
        spot = " spot (est.)" if r["spot"] else ""
        what = r["key"] or r["name"]
        out.append(("  ", f"{r['kind']} {what} {r['count']} x {r['instance_type']}{spot} {rate}"))
    return out


def _basis(entry: dict[str, Any]) -> str:
    basis = entry["plan_basis"] or ""
    if entry["kind"] in ("job", "search"):
        return f"a run, {basis}" if basis else "a run"
    return basis


def _money(currency: str) -> Any:
    sign = "$" if currency == "USD" else f"{currency} "
    return lambda v: f"{sign}{v:,.2f}"


def _day(text: str, shift: int = 0) -> str:
    return date.fromordinal(date.fromisoformat(text).toordinal() + shift).strftime("%m-%d")
