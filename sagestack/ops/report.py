"""`sagestack plan`: one environment's candidates, quotas, cost, sizing and lock state, as rich
tables (or JSON). Reads the rendered requests (project.requests) and their capacity (capacity.assess:
quotas, cost, pools; the LLM fit per pool): no aws_cdk, no torch, no boto3 unless quotas are live."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagestack.capacity.assess import CapacityReport, assess
from sagestack.capacity.endpoints import LlmFit, llm_fits, packing_on
from sagestack.capacity.ledger import QuotaBook, Row
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL
from sagestack.endpoints.components import Packing, describe
from sagestack.ops.lock import autoscaled_type_changes, lock_changes, lock_document
from sagestack.ops.report_slo import SloPlan, slo_json, slo_notes, slo_plans
from sagestack.ops.screen import fit, fit_nested, quote_commands
from sagestack.project.environment import ResolvedEnvironment
from sagestack.project.requests import EnvironmentRequests, render_environment
from sagestack.training.sizing import GIB, MIB, Sizing, size_job


@dataclass
class PlanResult:
    plan: ResolvedEnvironment
    requests: EnvironmentRequests
    capacity: CapacityReport
    sizing: dict[str, list[Sizing]] = field(default_factory=dict)
    llm: list[LlmFit] = field(default_factory=list)  # each LLM on each pool type of its endpoint
    lock_state: str = "none"  # none | matches | differs
    lock_changes: list[str] = field(default_factory=list)
    refused_updates: list[str] = field(default_factory=list)  # updates SageMaker would refuse
    slo: list[SloPlan] = field(default_factory=list)  # each endpoint's performance target

    @property
    def exit_code(self) -> int:
        return 3 if self.capacity.short else 4 if self.refused_updates else 0


def plan_report(root: Path, plan: ResolvedEnvironment, book: QuotaBook) -> PlanResult:
    """What `sagestack plan` shows for one environment: requests, capacity, sizing, lock state."""
    requests = render_environment(plan, root)
    capacity = assess(plan, requests, book)
    sizing = {}
    for key, job in plan.spec.jobs.items():
        rows = [s for c in job.instance_type if (s := size_job(job, c)) is not None]
        if rows:
            sizing[key] = rows
    llm = [fit for key, ep in plan.spec.endpoints.items() for fit in llm_fits(key, ep, root, plan.env)]
    result = PlanResult(plan, requests, capacity, sizing, llm, slo=slo_plans(plan))
    locked = plan.files.lock
    if locked is not None:
        changes = lock_changes(locked, lock_document(plan, requests))
        result.lock_state = "differs" if changes else "matches"
        result.lock_changes = changes
        result.refused_updates = autoscaled_type_changes(locked, plan)
    return result


# "?" is unchecked: no quota source said (the quotas line above the tables says why).
MARKS = {"ok": "[green]ok[/]", "short": "[red]short[/]", "unchecked": "[yellow]?[/]"}


def _basis(r: Row) -> str:
    return "; ".join(x for x in (r.cost_basis, r.note) if x)


def _short_usage(quota: str) -> str:
    if quota == TRAINING_INSTANCES_TOTAL:
        return "all training"
    return _usage(quota).replace("spot training", "spot")


def _usage(quota: str) -> str:
    """'ml.g5.2xlarge for spot training job usage' -> 'spot training' (the type is in its own column)."""
    for suffix, short in (
        ("for spot training job usage", "spot training"),
        ("for training job usage", "training"),
        ("for endpoint usage", "endpoint"),
        ("for transform job usage", "transform"),
        ("for cluster usage", "cluster"),
    ):
        if quota.endswith(suffix):
            return short
    return quota


def _money(v: float | None) -> str:
    """Every amount in dollars and cents, so a column of them lines up on the point."""
    return "n/a" if v is None else f"${v:,.2f}"


def _num(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


def _bytes(v: float) -> str:
    return f"{v / GIB:.2f} GiB" if v >= GIB else f"{v / MIB:.1f} MiB"


def _seconds(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"


SPOT_AT = 100  # the spot estimate gets a column from this width up (below: --json has it)
WIDE = 120  # the $/h and all-reduce columns from this width up


def _say(console: Any, text: str, indent: str = "", style: str | None = None) -> None:
    """A line beside the tables, wrapped to the console's width (words and `commands` whole)."""
    for line in fit(quote_commands(text), console.width, indent):
        console.print(line, markup=False, highlight=False, style=style)


def _table(console: Any, title: str) -> Any:
    """A table without vertical rules (the columns keep their room); its title is printed here,
    wrapped to the console (a table's own title would be wrapped to the table's width)."""
    from rich import box
    from rich.table import Table

    _say(console, title, style="italic")
    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))


def _show(console: Any, table: Any) -> None:
    console.print(table)
    console.print()  # the table's end: its notes follow


def _columns(table: Any, names: tuple[str, ...], right: tuple[str, ...] = ()) -> None:
    """Columns that never wrap (names, types, numbers), but `quota`, whose words may."""
    for col in names:
        table.add_column(col, justify="right" if col in right else "left", no_wrap=col != "quota")


def render(result: PlanResult, console: Any) -> None:
    """`sagestack plan` as tables: training, then serving and the account, sizing, lock, refusals."""
    plan, cap = result.plan, result.capacity
    account = plan.account or "account-agnostic"
    console.print(f"[bold]{plan.project}[/] · {plan.env} · {plan.region} · {account}")
    _say(console, f"quotas: {cap.book.detail}")
    _render_training(result, console)
    _render_capacity_kinds(result, console)
    _render_serving(result, console)
    _render_components(result, console)
    _render_llm(result, console)
    _render_optimizations(result, console)
    _render_slo(result, console)
    _render_sizing(result, console)
    _render_lock(result, console)
    for warning in cap.warnings:
        _say(console, f"! {warning}", style="yellow")
    for shortfall in cap.shortfalls:
        _say(console, f"✗ {shortfall.message()}", style="red")
    for refused in result.refused_updates:
        _say(console, f"✗ {refused}", style="red")


_RIGHT = ("need/free", "$/h", "cost", "spot")


def _render_training(result: PlanResult, console: Any) -> None:
    """Jobs and searches, one row per candidate, the one the quotas allow marked (→); what a cost
    covers (max_run, trials) below the table."""
    if not any(r.kind in ("job", "tuning") for r in result.capacity.rows):
        return  # a serving-only project: no empty table
    table = _table(console, "Training jobs and searches (→ the candidate the quotas allow)")
    spot, rate = console.width >= SPOT_AT, console.width >= WIDE
    columns = ("entry", "candidate", "quota", "need/free", "status")
    columns += ("$/h",) * rate + ("cost",) + ("spot",) * spot
    _columns(table, columns, _RIGHT)
    shown: set[str] = set()
    bounds: list[str] = []
    for r in result.capacity.rows:
        if r.kind not in ("job", "tuning"):
            continue
        entry = r.key if r.kind == "job" else f"{r.key} (search)"
        label = entry if entry not in shown else ""
        shown.add(entry)
        pick = "→ " if r.chosen and r.kind == "job" else "  "
        cells = [label, f"{pick}{r.instance_type} x{r.count}", _short_usage(r.quota)]
        cells += [f"{_num(r.needed)}/{_num(r.available)}", MARKS[r.status]]
        cells += [_money(r.price_per_hour)] * rate + [_money(r.cost_on_demand)]
        table.add_row(*cells, *[_money(r.cost_spot)] * spot)
        if label:
            what = "cost on demand (spot: estimate)" if spot else "cost on demand"
            bounds.append(f"{entry}: {what} for {_basis(r)}")
    _show(console, table)
    for line in bounds:
        _say(console, line, "  ")
    if not spot:
        env = result.plan.env
        _say(
            console,
            f"spot estimates: {SPOT_AT} columns or more, or `sagestack plan --env {env} --json`",
            "  ",
        )


def _render_capacity_kinds(result: PlanResult, console: Any) -> None:
    """How each job gets its capacity (instance preferences or the candidate loop), and why."""
    for key, job_plan in result.requests.jobs.items():
        _say(console, f"{key}: {job_plan.launch_kind}", "  ")
        _say(console, job_plan.launch_detail, "    ")
        for itype, arn in job_plan.job.training_plans.items():
            plan_name = arn.rsplit("/", 1)[-1]
            _say(
                console,
                f"reserved: {itype} on training plan {plan_name} (paid up front, not per hour)",
                "    ",
            )


def _render_serving(result: PlanResult, console: Any) -> None:
    """Endpoints (each instance pool, → the first the quotas allow; a shadow variant), transforms
    (their candidates, → the one allowed), clusters and the account-wide rows; what a cost covers
    (a month, an hour of a run) below the table."""
    kinds = ("endpoint", "shadow", "optimization", "transform", "cluster", "aggregate")
    rows = [r for r in result.capacity.rows if r.kind in kinds]
    if not rows:
        return
    t = _table(console, "Endpoints, transforms, clusters, account quotas (→ the pool or type allowed)")
    rate = console.width >= WIDE
    _columns(t, ("entry", "instance", "quota", "need/free", "status", *("$/h",) * rate, "cost"), _RIGHT)
    pools = {k: len(ep.instance_type or ()) for k, ep in result.plan.spec.endpoints.items()}
    notes = []
    shown: set[str] = set()
    for r in rows:
        several = r.kind == "transform" or (r.kind == "endpoint" and pools.get(r.key, 1) > 1)
        pick = ("→ " if r.chosen else "  ") if several else ""
        entry = f"{r.key} ({r.kind})" if r.kind in ("transform", "shadow") else r.key
        if r.kind == "optimization":  # as `render` labels its requests
            entry = f"optimize {r.key}"
        # the quota column names a transform's kind; a shadow shares its endpoint's quota
        label = (entry if r.kind in ("shadow", "optimization") else r.key) if entry not in shown else ""
        shown.add(entry)
        cells = [label, f"{pick}{r.instance_type} x{r.count}", _short_usage(r.quota)]
        cells += [f"{_num(r.needed)}/{_num(r.available)}", MARKS[r.status]]
        t.add_row(*cells, *[_money(r.price_per_hour)] * rate, _money(r.cost_on_demand))
        if r.chosen:
            notes.append(f"{entry}: {_basis(r)}")
    _show(console, t)
    for line in notes:
        _say(console, line, "  ")
    for key, n in pools.items():
        cost = result.capacity.monthly_cost(key)
        if n > 1 and cost is not None:
            low, high = (_money(c) for c in cost)
            _say(console, f"{key}: {low}..{high} a month on its cheapest..dearest priced pool", "  ")


def _render_components(result: PlanResult, console: Any) -> None:
    """How each endpoint's inference components pack onto instances of each pool type (initial
    copies; an LLM copy spans its tensor-parallel degree in accelerators)."""
    for key, ep in result.plan.spec.endpoints.items():
        if not ep.components:
            continue
        for itype in ep.instance_type or ():
            _say(console, f"{key}: inference components on {itype} (initial copies, first fit):", "  ")
            for line in describe(packing_on(ep, itype)):
                _say(console, line, "    ")


def _render_llm(result: PlanResult, console: Any) -> None:
    """Each LLM on each pool type: the accelerators one copy spans, its KV cache, and weights + KV
    cache + activations against the memory its server uses there."""
    if not result.llm:
        return
    t = _table(
        console,
        "LLMs per pool (GiB: weights + KV cache + activations / accelerator memory the server uses)",
    )
    _columns(t, ("endpoint", "instance", "accelerators", "tp", "KV", "GiB", "fits"), ("tp", "KV", "GiB"))
    shown: set[str] = set()
    notes: list[str] = []
    for f in result.llm:
        t.add_row(
            f.endpoint if f.endpoint not in shown else "",
            f.instance_type,
            f"{f.accelerators}x {f.accelerator}" if f.accelerators else "none",
            str(f.tensor_parallel_degree),
            f"{f.kv_cache_gib:.1f}",
            f"{f.needed_gib:.1f} / {f.available_gib:.1f}",
            "[green]yes[/]" if f.fits else "[red]no[/]",
        )
        if f.endpoint not in shown:
            estimate = (
                "; the shape is estimated from the parameter count: state num_layers, num_kv_heads and "
                "head_dim in llm:"
                if f.shape_estimated
                else ""
            )
            notes.append(f"{f.endpoint}: KV cache = {f.kv_cache}{estimate}")
        shown.add(f.endpoint)
    _show(console, t)
    for note in notes:
        _say(console, note, "  ")


def optimization_rows(result: PlanResult) -> list[dict[str, Any]]:
    """Each LLM optimization job `sagestack run <endpoint>` would start, from its rendered request."""
    rows = []
    for label, requests in result.requests.optimizations.items():
        r = requests["CreateOptimizationJob"]
        rows.append(
            {
                "llm": label,
                "job": r["OptimizationJobName"],
                "instance_type": r["DeploymentInstanceType"],
                "techniques": [
                    next(iter(c)).removeprefix("Model").removesuffix("Config")
                    for c in r["OptimizationConfigs"]
                ],
                "max_runtime_seconds": r["StoppingCondition"]["MaxRuntimeInSeconds"],
            }
        )
    return rows


def _render_optimizations(result: PlanResult, console: Any) -> None:
    rows = optimization_rows(result)
    if not rows:
        return
    t = _table(console, "LLM optimization jobs (started by `sagestack run <endpoint>`)")
    _columns(t, ("llm", "for", "techniques", "max runtime"), ("max runtime",))
    for row in rows:
        t.add_row(
            row["llm"],
            row["instance_type"],
            ", ".join(row["techniques"]),
            f"{row['max_runtime_seconds'] // 60} min",
        )
    _show(console, t)
    _say(console, "each registers its output for review", "  ")
    # the job names are copied into commands: each on a line of its own, never folded
    for row in rows:
        _say(console, f"{row['llm']}: job {row['job']}", "  ")


def _render_slo(result: PlanResult, console: Any) -> None:
    """Each endpoint's slo: its candidates at the catalog's $/h (an LLM's: what bandwidth allows one
    user, at most), measured in the cloud by a job that deploys them, never the endpoint."""
    if not result.slo:
        return
    t = _table(console, "Performance targets (slo:): candidates at on-demand $/h, measured in the cloud")
    llm = any(c.max_tokens_per_second is not None for p in result.slo for c in p.candidates)
    bound = ("bandwidth bound per user",) * llm
    _columns(t, ("endpoint", "candidate", "$/h", "measured", *bound), ("$/h",))
    for p in (p for p in result.slo if p.candidates):
        for i, c in enumerate(p.candidates):
            cells = [p.endpoint if i == 0 else "", c.instance_type + " (now)" * c.serves_now]
            cells += [_money(c.price_per_hour), "yes" if c.measured else "no"]
            tok, ttft = c.max_tokens_per_second, c.min_ttft_ms
            t.add_row(*cells, *[f"≤ {tok:,.0f} tok/s, ≥ {ttft:g} ms" if tok and ttft else ""] * llm)
    if any(p.candidates for p in result.slo):
        _show(console, t)
    for line in (n for p in result.slo for n in slo_notes(p, result.plan.env)):
        _say(console, line, "  ")


def _render_sizing(result: PlanResult, console: Any) -> None:
    """Memory per device of each job's candidates, and (from 120 columns) what its all-reduce costs."""
    if not result.sizing:
        return
    t = _table(console, "Sizing (weights + gradients + optimizer state; activations come on top)")
    sizing_columns: tuple[str, ...] = ("job", "candidate", "devices", "per device", "fits", "sharded")
    if console.width >= WIDE:
        sizing_columns += ("all-reduce/step", "in host", "across hosts")
    _columns(t, sizing_columns)
    notes = []
    for key, rows in result.sizing.items():
        for s in rows:
            fits = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[s.fits]
            cells = [
                key,
                s.instance_type,
                f"{s.hosts}x{s.devices_per_host}"
                + (f" ({s.model_parallel} mp, {s.data_parallel} dp)" if s.model_parallel > 1 else ""),
                _bytes(s.per_device),
                fits,
                _bytes(s.sharded_per_device),
                _bytes(s.allreduce_bytes),
                _seconds(s.intra_seconds),
                _seconds(s.network_seconds),
            ]
            t.add_row(*cells[: len(sizing_columns)])
            notes += [f"{key} on {s.instance_type}: {n}" for n in s.notes]
    _show(console, t)
    for n in notes:
        _say(console, f"! {n}", "  ", style="yellow")


def _render_lock(result: PlanResult, console: Any) -> None:
    env = result.plan.env
    path = f"config/envs/{env}.lock.json"
    if result.lock_state == "none":
        _say(console, f"lock: none (write {path} with `sagestack lock --env {env}`)")
    elif result.lock_state == "matches":
        console.print(f"lock: [green]matches[/] {path}", highlight=False)
    else:
        entries = sum(1 for c in result.lock_changes if c[:1] in "~+-")
        console.print(f"lock: [yellow]{entries} change(s)[/] against {path}", highlight=False)
        for line in (fitted for c in result.lock_changes for fitted in fit_nested(c, console.width, "  ")):
            console.print(line, markup=False, highlight=False)


def as_json(result: PlanResult) -> dict[str, Any]:
    cap = result.capacity
    return {
        "project": result.plan.project,
        "environment": result.plan.env,
        "region": result.plan.region,
        "quotas": {"source": cap.book.source, "detail": cap.book.detail},
        "rows": [asdict(r) for r in cap.rows],
        "shortfalls": [{**asdict(s), "message": s.message()} for s in cap.shortfalls],
        "warnings": cap.warnings,
        "endpoints": _endpoints_json(result),
        "sizing": {
            k: [
                {
                    "instance_type": s.instance_type,
                    "per_device_bytes": s.per_device,
                    "model_parallel": s.model_parallel,
                    "data_parallel": s.data_parallel,
                    "fits": s.fits,
                    "sharded_per_device_bytes": s.sharded_per_device,
                    "allreduce_bytes": s.allreduce_bytes,
                    "intra_seconds": s.intra_seconds,
                    "network_seconds": s.network_seconds,
                    "notes": s.notes,
                }
                for s in rows
            ]
            for k, rows in result.sizing.items()
        },
        "jobs": {
            k: {"hash": p.digest, "names": [c.name for c in p.candidates]}
            for k, p in result.requests.jobs.items()
        },
        "optimizations": optimization_rows(result),
        "slo": slo_json(result.slo),
        "lock": {"state": result.lock_state, "changes": result.lock_changes},
        "refused_updates": result.refused_updates,
    }


def _endpoints_json(result: PlanResult) -> dict[str, Any]:
    """Each instance endpoint's pools (priority order), its monthly cost range, the packing of its
    components per pool and its LLMs per pool: what the tables show, as data."""
    out: dict[str, Any] = {}
    for key, ep in result.plan.spec.endpoints.items():
        if not ep.instance_type:
            continue
        cost = result.capacity.monthly_cost(key)
        out[key] = {
            "pools": list(ep.instance_type),
            "monthly_cost": list(cost) if cost else None,
            "shadow": ep.shadow.model_dump(exclude_none=True) if ep.shadow else None,
            "packing": {t: _packing_json(packing_on(ep, t)) for t in ep.instance_type}
            if ep.components
            else None,
            "llm": [
                {k: v for k, v in asdict(f).items() if k != "endpoint"} | {"model": f.endpoint}
                for f in result.llm
                if f.endpoint == key or f.endpoint.startswith(key + "/")
            ],
        }
    return out


def _packing_json(p: Packing) -> dict[str, Any]:
    return {"instances": p.instances_needed, "unplaceable": list(p.unplaceable), "detail": describe(p)}
