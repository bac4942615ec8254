"""What an environment costs (`sagestack cost`): its actual spend from Cost Explorer, by the tags
sagestack puts on what it creates, beside what runs now at the catalog's prices and `plan`'s
estimate.

Cost Explorer sees a tag only once it is activated as a cost allocation tag (in the management
account, taking effect for usage from then on), so the tags' state is read first and said, with
the command that activates them. The spend is one GetCostAndUsage filtered by the environment's
tags (`Names.tags`, on every resource of its stacks and every request) grouped by the job and
search tags (training requests carry `sagestack:job`, tuning requests `sagestack:tuning`, which
SageMaker adds to a search's trials); what carries neither is read again grouped by the endpoint
and cluster tags (an endpoint's SageMaker resources carry `sagestack:endpoint`, a HyperPod cluster
`sagestack:cluster`; a GetCostAndUsage groups by two keys at most). What carries none of the four
(storage, keys, logs — and endpoints and clusters deployed before sagestack tagged them) is read
by service and usage type: an older endpoint's hosting (`Host:ml.…`) and cluster's nodes
(`Cluster:ml.…`) fall back to their instance type, given to the one planned entry of that type.
What runs now is ops/cost_running.py's. boto3 is not imported here: the caller passes
`client(service)`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sagestack.capacity.ledger import HOURS_PER_MONTH, Row
from sagestack.core.names import CLUSTER_TAG, ENDPOINT_TAG
from sagestack.ops.cost_running import running_now
from sagestack.ops.status import Client, Scope
from sagestack.ops.status_schedules import error_code, iso, no_credentials, reason

JOB_TAG = "sagestack:job"  # training/request.py: every CreateTrainingJob of a job
SEARCH_TAG = "sagestack:tuning"  # tuning/request.py: a search's tuning job, and so its trials
# (kind, tag) in the order spend is attributed: a search's trials carry their job's tag too, and a
# monitoring job its endpoint's; two GetCostAndUsage queries of two groups each
BY_TAG = (("search", SEARCH_TAG), ("job", JOB_TAG), ("endpoint", ENDPOINT_TAG), ("cluster", CLUSTER_TAG))
METRIC = "UnblendedCost"  # what the bill says, before credits and discounts are spread
MAX_DAYS = 365  # Cost Explorer keeps 13 months of daily data (14 months' start, at most)
_REGION = re.compile(r"^[A-Z]{2,4}\d?$")  # the usage type's region code: USE1, EUW1, APN1, EU
KINDS = {"Host": "endpoint", "Cluster": "cluster", "Train": "training", "ServerlessInf": "endpoint"}


@dataclass(frozen=True)
class Period:
    """Whole UTC days: Cost Explorer's End is exclusive, so `end` is the day after the last."""

    start: date
    end: date

    @classmethod
    def last(cls, days: int, today: date) -> Period:
        """The last `days` days, today (its spend so far, estimated) included."""
        return cls(today - timedelta(days=days - 1), today + timedelta(days=1))

    @property
    def days(self) -> int:
        return (self.end - self.start).days

    def request(self) -> dict[str, str]:
        return {"Start": self.start.isoformat(), "End": self.end.isoformat()}


def tag_keys(scope: Scope, kinds: Iterable[str] = ("endpoint", "cluster")) -> tuple[str, ...]:
    """The environment's tags (the spend's filter), then the job and search tags and, where the
    spec deploys any (`kinds`: plan's rows'), the endpoint and cluster tags (its groups): a tag
    Billing never sees would be asked for forever."""
    kinds = set(kinds)
    own = [tag for kind, tag in (("endpoint", ENDPOINT_TAG), ("cluster", CLUSTER_TAG)) if kind in kinds]
    return (*scope.names.tags, JOB_TAG, SEARCH_TAG, *own)


def read_cost(
    scope: Scope,
    client: Client,
    plan: Iterable[Row],
    days: int,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The environment's cost document: its tags' state, the spend over the last `days` days (None
    when Cost Explorer cannot group by the environment's tags yet, or refused), what runs now and
    its burn rate, and `plan`'s rows (capacity's, for the spec as it is now) beside them. A part
    AWS refuses is named in "errors"; missing credentials raise."""
    now = now or datetime.now(UTC)
    period = Period.last(days, now.date())
    plan = list(plan)
    errors: list[str] = []
    ce = client("ce")
    keys = tag_keys(scope, {r.kind for r in plan})
    tags = _tag_states(ce, keys, errors)
    env_tags = tuple(scope.names.tags)
    # tags not listable (a member account may be refused them): their spend is asked all the same
    ready = not tags or all(tags[k] == "Active" for k in env_tags)
    spend = None
    if ready:
        try:
            spend = read_spend(ce, scope, period, tags or dict.fromkeys(keys, "Active"))
        except Exception as e:
            if no_credentials(e):
                raise
            errors.append(f"spend: {cost_explorer_refusal(e, period)}")
    running = running_now(scope, client("sagemaker"), plan, now, errors)
    planned = plan_rows(plan, period.days)
    return {
        "project": scope.names.project,
        "environment": scope.names.env,
        "region": scope.region,
        "read_at": iso(now),
        "period": {"start": period.start.isoformat(), "end": period.end.isoformat(), "days": period.days},
        "currency": spend["currency"] if spend else "USD",
        "tags": tags,
        "tags_ready": ready,
        "activate": activation(tags, period) if tags else None,
        "spend": spend,
        "running": running,
        "burn_per_hour": round(sum(r["per_hour"] or 0.0 for r in running), 4),
        "plan": planned,
        "entries": beside(spend, planned),
        "errors": errors,
    }


# ---------------------------------------------------------------- cost allocation tags


def _tag_states(ce: Any, keys: tuple[str, ...], errors: list[str]) -> dict[str, str | None]:
    """Each tag key's state as a cost allocation tag: Active, Inactive, or None (Billing has not
    seen it on any usage yet, so it cannot be activated yet). {} when it could not be read."""
    try:
        states = cost_allocation_tags(ce, keys)
    except Exception as e:
        if no_credentials(e):
            raise
        errors.append(f"cost allocation tags: {cost_explorer_refusal(e, None)}")
        return {}
    return {k: states.get(k) for k in keys}


def cost_allocation_tags(ce: Any, keys: Iterable[str]) -> dict[str, str]:
    """ListCostAllocationTags of the user-defined `keys`, page by page: key -> Active | Inactive."""
    found: dict[str, str] = {}
    ask: dict[str, Any] = {"TagKeys": list(keys), "Type": "UserDefined"}
    while True:
        page = ce.list_cost_allocation_tags(**ask)
        found |= {t["TagKey"]: t["Status"] for t in page.get("CostAllocationTags", [])}
        if not page.get("NextToken"):
            return found
        ask["NextToken"] = page["NextToken"]


def activation(tags: dict[str, str | None], period: Period) -> dict[str, Any] | None:
    """What to do about tags that are not active: the command that activates those Billing has
    seen (in the management account), the keys it has not seen yet, and the backfill command for
    the spend before activation. None when every tag is active."""
    inactive = [k for k, s in tags.items() if s == "Inactive"]
    unseen = [k for k, s in tags.items() if s is None]
    if not inactive and not unseen:
        return None
    command = None
    if inactive:
        pairs = " ".join(f"TagKey={k},Status=Active" for k in inactive)
        command = f"aws ce update-cost-allocation-tags-status --cost-allocation-tags-status {pairs}"
    # a backfill starts on the first of a month, at most twelve months back
    last = period.end - timedelta(days=1)
    since = max(period.start.replace(day=1), date(last.year - 1, last.month, 1))
    backfill = f"aws ce start-cost-allocation-tag-backfill --backfill-from {since.isoformat()}T00:00:00Z"
    return {"inactive": inactive, "unseen": unseen, "command": command, "backfill": backfill}


# ---------------------------------------------------------------- the spend


def read_spend(ce: Any, scope: Scope, period: Period, tags: dict[str, str | None]) -> dict[str, Any]:
    """The environment's spend over `period`: the total and each day's (today's so far, estimated),
    per job, search, endpoint and cluster where their tags are active, and what none names by
    service and usage type (an untagged endpoint's or cluster's by its instance type)."""
    env_filter = [
        {"Tags": {"Key": k, "Values": [v], "MatchOptions": ["EQUALS"]}} for k, v in scope.names.tags.items()
    ]
    active = [k for _, k in BY_TAG if tags.get(k) == "Active"]
    first = [k for k in (JOB_TAG, SEARCH_TAG) if k in active]  # the order Cost Explorer's keys come in
    then = [k for k in (ENDPOINT_TAG, CLUSTER_TAG) if k in active]
    daily: dict[str, float] = {}
    estimated: set[str] = set()
    entries: dict[tuple[str, str], float] = {}
    rest = 0.0
    currency = "USD"
    for result in _pages(ce, period, "DAILY", {"And": env_filter}, first):  # every day, by job and search
        day = result["TimePeriod"]["Start"]
        if result.get("Estimated"):
            estimated.add(day)
        for values, amount, unit in _amounts(result, first):
            currency = unit or currency
            daily[day] = daily.get(day, 0.0) + amount
            rest += _attribute(entries, values, amount)
    if then and rest > 0.005:  # what no job or search tag names, by endpoint and cluster tag
        rest = 0.0
        for result in _pages(ce, period, "MONTHLY", {"And": [*env_filter, *_absent(first)]}, then):
            for values, amount, _ in _amounts(result, then):
                rest += _attribute(entries, values, amount)
    others: list[dict[str, Any]] = []
    if rest > 0.005 or not active:  # what none of the tags names, by service and usage
        others = _the_rest(ce, period, {"And": [*env_filter, *_absent(first + then)]})
    order = {"job": 0, "search": 1, "endpoint": 2, "cluster": 3}
    rows = [
        {"kind": kind, "key": key, "amount": round(amount, 2)}
        for (kind, key), amount in sorted(entries.items(), key=lambda item: (order[item[0][0]], -item[1]))
    ]
    return {
        "currency": currency,
        "total": round(sum(daily.values()), 2),
        "daily": [
            {"date": d, "amount": round(daily[d], 2), "estimated": d in estimated} for d in sorted(daily)
        ],
        "entries": rows,
        "grouped_by": first + then,
        "groupable": [k for k in (JOB_TAG, SEARCH_TAG, ENDPOINT_TAG, CLUSTER_TAG) if k in tags],  # asked
        "other": others,
    }


def _absent(keys: list[str]) -> list[dict[str, Any]]:
    return [{"Tags": {"Key": k, "MatchOptions": ["ABSENT"]}} for k in keys]


def _amounts(result: dict[str, Any], keys: list[str]) -> list[tuple[dict[str, str], float, str | None]]:
    """A result's amounts, each with its tags' values ('' where absent) and its currency."""
    groups = (
        [(g["Keys"], g["Metrics"][METRIC]) for g in result.get("Groups", [])]
        if keys
        else [([], result["Total"][METRIC])]
        if METRIC in result.get("Total", {})
        else []
    )
    return [
        (
            dict(zip(keys, (k.partition("$")[2] for k in tagged), strict=True)),
            float(m["Amount"]),
            m.get("Unit"),
        )
        for tagged, m in groups
    ]


def _attribute(entries: dict[tuple[str, str], float], values: dict[str, str], amount: float) -> float:
    """Add `amount` to the entry its first tag names (BY_TAG's order); what none names is returned."""
    for kind, tag in BY_TAG:
        if values.get(tag):
            entries[(kind, values[tag])] = entries.get((kind, values[tag]), 0.0) + amount
            return 0.0
    return amount


def _the_rest(ce: Any, period: Period, where: dict[str, Any]) -> list[dict[str, Any]]:
    """What no tag of sagestack's names, by service and usage type: SageMaker's hosting and
    cluster usage by instance type (kind endpoint / cluster: deployed before sagestack tagged them,
    or their tag not active), every other service as one row."""
    sums: dict[tuple[str, str], float] = {}
    groups = [{"Type": "DIMENSION", "Key": "SERVICE"}, {"Type": "DIMENSION", "Key": "USAGE_TYPE"}]
    for result in _pages(ce, period, "MONTHLY", where, groups):
        for g in result.get("Groups", []):
            service, usage = g["Keys"]
            amount = float(g["Metrics"][METRIC]["Amount"])
            kind, what = usage_kind(usage)
            row = (kind, what) if kind else ("service", service)
            sums[row] = sums.get(row, 0.0) + amount
    order = {"endpoint": 0, "cluster": 1, "training": 2, "service": 3}
    return [
        {"kind": kind, "what": what, "amount": round(amount, 2)}
        for (kind, what), amount in sorted(sums.items(), key=lambda item: (order[item[0][0]], -item[1]))
        if round(amount, 2) != 0
    ]


def usage_kind(usage_type: str) -> tuple[str | None, str]:
    """A SageMaker usage type ('USE1-Host:ml.c5.xlarge', 'Cluster:ml.p5.48xlarge',
    'EUW1-Train-Spot:ml.g5.xlarge') as (kind, instance type); (None, usage) for anything else."""
    operation, _, rest = usage_type.partition(":")
    words = operation.split("-")
    if words and _REGION.match(words[0]) and len(words) > 1:
        words = words[1:]
    kind = KINDS.get(words[0]) if words else None
    if kind is None or not rest.startswith("ml."):
        return None, usage_type
    return kind, rest


def _pages(
    ce: Any, period: Period, granularity: str, where: dict[str, Any], groups: list[str] | list[dict[str, str]]
) -> list[Any]:
    """Every ResultsByTime of a GetCostAndUsage grouped by `groups` (tag keys, or GroupBy's own
    entries), page by page (NextPageToken)."""
    ask: dict[str, Any] = {
        "TimePeriod": period.request(),
        "Granularity": granularity,
        "Filter": where if len(where["And"]) > 1 else where["And"][0],
        "Metrics": [METRIC],
    }
    if groups:
        ask["GroupBy"] = [{"Type": "TAG", "Key": g} if isinstance(g, str) else g for g in groups]
    results: list[Any] = []
    while True:
        page = ce.get_cost_and_usage(**ask)
        results += page.get("ResultsByTime", [])
        if not page.get("NextPageToken"):
            return results
        ask["NextPageToken"] = page["NextPageToken"]


def cost_explorer_refusal(e: Exception, period: Period | None) -> str:
    """Cost Explorer's refusal in one line, with what to do about it."""
    code, text = error_code(e), reason(e)
    if code == "DataUnavailableException":
        span = f" for {period.start}..{period.end - timedelta(days=1)}" if period else ""
        return (
            f"Cost Explorer has no data{span} ({text}): an account's data is ready about 24 hours "
            "after Cost Explorer is first opened (Billing and Cost Management console → Cost "
            "Explorer); it keeps 13 months"
        )
    if code in ("AccessDeniedException", "AccessDenied", "UnauthorizedOperation"):
        if "not enabled" in text.lower():
            return (
                f"Cost Explorer is not enabled for this account ({text}): open Billing and Cost "
                "Management → Cost Explorer once; its data is ready about 24 hours later"
            )
        return (
            f"{text}: the caller needs ce:GetCostAndUsage and ce:ListCostAllocationTags (cost "
            "allocation tags are listed in the management account or a standalone one)"
        )
    if code == "LimitExceededException":
        return f"{text}: Cost Explorer's request rate; try again in a minute"
    return text


# ---------------------------------------------------------------- plan's estimate


def plan_rows(plan: list[Row], days: int) -> list[dict[str, Any]]:
    """`plan`'s estimate of each job, search, endpoint and cluster (the row it chose): a job's and
    a search's bound per run, an endpoint's and a cluster's over the period's days."""
    rows = []
    for r in plan:
        if not r.chosen or r.kind not in ("job", "tuning", "endpoint", "cluster"):
            continue
        amount, basis = r.cost_on_demand, r.cost_basis
        if amount is not None and r.kind == "endpoint":
            amount, basis = (
                amount / HOURS_PER_MONTH * 24 * days,
                f"over {days} days {basis.removeprefix('per month ')}",
            )
        elif amount is not None and r.kind == "cluster":
            amount, basis = amount * 24 * days, f"over {days} days at {r.count} instance(s)"
        rows.append(
            {
                "kind": {"job": "job", "tuning": "search"}.get(r.kind, r.kind),
                "key": r.key,
                "instance_type": r.instance_type,
                "amount": None if amount is None else round(amount, 2),
                "basis": basis,
            }
        )
    return rows


def beside(spend: dict[str, Any] | None, plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each job, search, endpoint and cluster with its actual spend (None: not known) and `plan`'s
    estimate. An endpoint's or a cluster's spend is what its own tag names; what carries no such
    tag (deployed before sagestack tagged them, or the tag not active) is its instance type's
    hosting or cluster usage, given to the one planned endpoint or cluster of that type, or shown
    under the type with every entry that plans it (`by_instance_type`)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def row(kind: str, key: str, itype: str | None = None) -> dict[str, Any]:
        if (kind, key) not in rows:
            rows[(kind, key)] = {
                "kind": kind,
                "key": key,
                "instance_type": itype,
                "actual": 0.0 if spend else None,
                "by_instance_type": False,
                "plan": None,
                "plan_basis": None,
            }
        return rows[(kind, key)]

    def owner(kind: str, key: str) -> str:
        return key.partition("/")[0] if kind == "cluster" else key  # a cluster's row is per group

    for p in plan:
        r = row(p["kind"], owner(p["kind"], p["key"]), p["instance_type"])
        if p["amount"] is not None and not (p["kind"] == "endpoint" and r["plan"] is not None):
            r["plan"] = round((r["plan"] or 0.0) + p["amount"], 2)
            r["plan_basis"] = p["basis"] if r["plan_basis"] is None else "its groups together"
    for e in (spend or {}).get("entries", []):
        row(e["kind"], e["key"])["actual"] = e["amount"]
    for o in (spend or {}).get("other", []):
        if o["kind"] == "service":
            continue
        planned = sorted(
            {
                owner(p["kind"], p["key"])
                for p in plan
                if p["kind"] == o["kind"] and p["instance_type"] == o["what"]
            }
        )
        r = row(o["kind"], planned[0] if len(planned) == 1 else ", ".join(planned) or o["what"], o["what"])
        r["actual"] = round(r["actual"] + o["amount"], 2)
        r["by_instance_type"] = True
    order = {"job": 0, "search": 1, "training": 2, "endpoint": 3, "cluster": 4}
    return sorted(rows.values(), key=lambda r: (order.get(r["kind"], 5), r["key"]))
