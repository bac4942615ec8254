"""An endpoint's quotas and cost: one row per instance pool, and the shadow variant's.

SageMaker provisions a variant's instances from its instance pools (InstancePools) in priority
order, each from the first pool with capacity; DescribeEndpoint then counts the variant's instances
per pool type, so one variant may run on several types. An endpoint is placeable when one pool
type's quota ("<type> for endpoint usage") holds the variant's instances — its autoscaling maximum,
or for inference components the fleet's managed-scaling maximum — or, failing that, when the pools'
free quotas hold them together (mixed types: a warning). A shadow variant
(ShadowProductionVariants) runs beside production on instances of its own: where it shares a
pool's type, the two needs add up in one quota. An LLM's optimization job runs on one instance of
its DeploymentInstanceType, beside its endpoint's. Pure: the quota values come in a QuotaBook.

What an LLM needs of each pool type (its accelerators, tensor-parallel degree, weights + KV cache +
activations against the accelerator memory its server uses: llm/sizing.py's arithmetic) is shown
beside the rows by `plan` (llm_fits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.capacity.ledger import (
    HOURS_PER_MONTH,
    QuotaBook,
    Row,
    Shortfall,
    Tally,
    choose_first_with_room,
    price_of,
    shortfall_of,
    status_of,
    types_with_quota,
)
from sagestack.core.catalog.instances import instance_type
from sagestack.core.catalog.quotas import OPTIMIZATION_USAGE, quota_name
from sagestack.endpoints.components import Packing, pack
from sagestack.endpoints.models import ComponentSpec, EndpointSpec
from sagestack.endpoints.scaling_request import scaling_bounds
from sagestack.llm.models import LlmSpec
from sagestack.llm.optimization_job import ResolvedOptimization
from sagestack.llm.shape import local_weights_dir, shape_of
from sagestack.llm.sizing import accelerator_devices, memory_fit


@dataclass
class EndpointCapacity:
    """One endpoint's rows (its pools, in priority order, then its shadow), what is short, and the
    warnings worth a look (a first-priority pool without room, mixed instance types)."""

    rows: list[Row] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def deployed(ep: EndpointSpec) -> bool:
    """Whether the environment deploys the endpoint: a pinned package, components, or an LLM's
    weights (which the container loads from S3) — unless its `deploy: false` says otherwise."""
    return ep.deploy and bool(ep.model_package or ep.components or ep.llm is not None)


def endpoint_quotas(ep: EndpointSpec) -> set[str]:
    """The endpoint-usage quotas an endpoint draws on: each pool's, and its shadow's."""
    shadow_type, _ = _shadow(ep)
    types = [*(ep.instance_type or ()), *([shadow_type] if shadow_type else [])]
    return {quota_name(t, "endpoint") for t in types}


def with_accelerators(c: ComponentSpec, itype: str) -> ComponentSpec:
    """An LLM component's copy spans the accelerator devices of its tensor-parallel degree (GPUs,
    or Neuron devices; unless it asks for a number itself): what SageMaker must find free on an
    instance for each copy."""
    if c.llm is None or c.accelerators is not None:
        return c
    return c.model_copy(update={"accelerators": accelerator_devices(c.llm, itype)})


def packing_on(ep: EndpointSpec, itype: str) -> Packing:
    """How the endpoint's components' initial copies pack onto instances of `itype`."""
    components = {name: with_accelerators(c, itype) for name, c in ep.components.items()}
    return pack(ep.model_copy(update={"instance_type": [itype], "components": components}))


@dataclass(frozen=True)
class Fleet:
    """What an endpoint's rendered requests hold of the account (fleet_of): its pools in priority
    order, the instances its variant runs at most and at least, its shadow variant's."""

    pools: list[str]
    high: int  # the autoscaling target's MaxCapacity, the managed scaling's maximum, or the count
    low: int
    shadow_type: str | None
    shadow_count: int
    shadow_percent: int
    asynchronous: bool
    reservation: str | None  # the training plan's ARN the variant is reserved on
    serverless: dict[str, int] | None  # ServerlessConfig


def fleet_of(requests: Mapping[str, Mapping[str, Any]]) -> Fleet:
    """An endpoint's fleet read from its CreateEndpointConfig and, when it autoscales, its
    RegisterScalableTarget (endpoints/hosting_requests.fleet_requests)."""
    config = requests["CreateEndpointConfig"]
    variant = config["ProductionVariants"][0]
    pools = [p["InstanceType"] for p in sorted(variant.get("InstancePools", ()), key=lambda p: p["Priority"])]
    if not pools and "InstanceType" in variant:
        pools = [variant["InstanceType"]]
    low = high = int(variant.get("InitialInstanceCount", 0))
    managed = variant.get("ManagedInstanceScaling")
    if managed is not None:  # the fleet inference components share
        low, high = int(managed["MinInstanceCount"]), int(managed["MaxInstanceCount"])
    bounds = scaling_bounds(requests)
    if bounds is not None:
        low, high = bounds
    shadows = config.get("ShadowProductionVariants") or [None]
    shadow = shadows[0]
    reserved = variant.get("CapacityReservationConfig") or {}
    return Fleet(
        pools=pools,
        high=high,
        low=low,
        shadow_type=shadow["InstanceType"] if shadow else None,
        shadow_count=int(shadow["InitialInstanceCount"]) if shadow else 0,
        shadow_percent=round(shadow["InitialVariantWeight"] * 100) if shadow else 0,
        asynchronous="AsyncInferenceConfig" in config,
        reservation=reserved.get("MlReservationArn"),
        serverless=variant.get("ServerlessConfig"),
    )


def endpoint_capacity(book: QuotaBook, key: str, ep: EndpointSpec, fleet: Fleet) -> EndpointCapacity:
    """The pools' rows, the shadow's row, shortfalls and warnings. The first pool that holds every
    instance is chosen; else the pools that hold them together, in priority order (SageMaker
    provisions each instance from the first pool with capacity, so a variant can run on mixed
    types); else the first pool, with a shortfall. The counts are the rendered fleet's; `ep` says
    only what the notes and the components' packing need."""
    out = EndpointCapacity()
    pools, high = fleet.pools, fleet.high
    shadow_type, shadow_n = fleet.shadow_type, fleet.shadow_count
    for itype in pools:
        together = shadow_n if itype == shadow_type else 0
        out.rows.append(_pool_row(book, key, ep, fleet, itype, together))
    pool_rows = list(out.rows)
    chosen = choose_first_with_room(pool_rows)
    if shadow_type is not None:
        shadow = _shadow_row(book, key, fleet)
        out.rows.append(shadow)
        if shadow.status == "short":
            out.shortfalls.append(shortfall_of(book, "shadow", key, shadow.quota, shadow.needed))
    first = pool_rows[0]
    if chosen is not None:
        if chosen > 0 and first.status == "short":
            out.warnings.append(_first_pool_warning(book, key, first, f"on {pools[chosen]}"))
        return out
    spread = _spread(pool_rows, high, shadow_type, shadow_n)
    if spread:
        for i in spread:
            pool_rows[i].chosen = True
        held = ", ".join(f"{pool_rows[i].instance_type}: {n}" for i, n in spread.items())
        out.warnings.append(_first_pool_warning(book, key, first, f"across its pools ({held})"))
        return out
    first.chosen = True  # what SageMaker tries first; the shortfall names it
    others = tuple((r.instance_type, r.available or 0.0) for r in pool_rows[1:])
    alternatives = types_with_quota(book, "endpoint", float(high), like=pools[0], exclude=pools)
    out.shortfalls.insert(
        0, shortfall_of(book, "endpoint", key, first.quota, first.needed, alternatives, others)
    )
    return out


def _spread(rows: list[Row], need: int, shadow_type: str | None, shadow_n: int) -> dict[int, int]:
    """How many instances each pool takes, in priority order, when no pool holds all `need` but
    the pools' free quota together does (a shadow's instances first on its own type); {} if not."""
    taken: dict[int, int] = {}
    left = need
    for i, row in enumerate(rows):
        free = int(row.available or 0) - (shadow_n if row.instance_type == shadow_type else 0)
        if free > 0 and left > 0:
            taken[i] = min(free, left)
            left -= taken[i]
    return taken if left <= 0 else {}


def _shadow(ep: EndpointSpec) -> tuple[str | None, int]:
    """The shadow variant's instance type (default: production's first) and count."""
    if ep.shadow is None:
        return None, 0
    return ep.shadow.instance_type or ep.primary_instance_type, ep.shadow.initial_instance_count


def _pool_row(book: QuotaBook, key: str, ep: EndpointSpec, fleet: Fleet, itype: str, together: int) -> Row:
    """One pool type: the variant's instances (+ a shadow's of the same type) against its quota;
    it costs its minimum (or what the initial copies take) per month."""
    high, low = fleet.high, fleet.low
    note = "deployed" if deployed(ep) else "no package pinned yet"
    if ep.components:
        taken = packing_on(ep, itype).instances_needed
        low = max(low, taken)
        note = f"{len(ep.components)} components: initial copies on {taken} instance(s)"
    elif fleet.asynchronous:
        note += ", async" + (" (scales to zero)" if low == 0 else "")
    if together:
        note += f", + the shadow's {together}"
    if fleet.reservation:
        note += f", reserved on training plan {fleet.reservation.rsplit('/', 1)[-1]} (paid up front)"
    qn = quota_name(itype, "endpoint")
    avail = book.available(qn)
    price = price_of(itype)
    return Row(
        kind="endpoint",
        key=key,
        instance_type=itype,
        count=high,
        quota=qn,
        needed=float(high + together),
        available=avail,
        status=status_of(avail, float(high + together)),
        chosen=False,
        price_per_hour=price,
        cost_on_demand=price * low * HOURS_PER_MONTH if price is not None else None,
        cost_basis=f"per month at {low} instance(s) ({high} at most)",
        note=note,
    )


def _shadow_row(book: QuotaBook, key: str, fleet: Fleet) -> Row:
    assert fleet.shadow_type is not None
    itype, count = fleet.shadow_type, fleet.shadow_count
    qn = quota_name(itype, "endpoint")
    avail = book.available(qn)
    price = price_of(itype)
    return Row(
        kind="shadow",
        key=key,
        instance_type=itype,
        count=count,
        quota=qn,
        needed=float(count),
        available=avail,
        status=status_of(avail, float(count)),
        chosen=True,
        price_per_hour=price,
        cost_on_demand=price * count * HOURS_PER_MONTH if price is not None else None,
        cost_basis=f"per month at {count} instance(s)",
        note=f"shadow: {fleet.shadow_percent}% of requests copied",
    )


def _first_pool_warning(book: QuotaBook, key: str, first: Row, placed: str) -> str:
    q = book.values[first.quota]
    free = max(0.0, first.available or 0.0)
    desired = q.value - (first.available or 0.0) + first.needed
    return (
        f"endpoint '{key}': its first-priority pool {first.instance_type} has too little quota in "
        f"'{first.quota}' ({q.code}; needs {first.needed:g}, {free:g} free), so SageMaker will place "
        f"it {placed}. To serve on {first.instance_type}: aws service-quotas "
        f"request-service-quota-increase --service-code sagemaker --quota-code {q.code} "
        f"--desired-value {desired:g}"
    )


def add_endpoint(tally: Tally, key: str, ep: EndpointSpec, requests: Mapping[str, Mapping[str, Any]]) -> None:
    """Serverless concurrency has no instance quota to check; an instance endpoint is placeable
    when one of its pools has room (endpoint_capacity). `requests`: the endpoint's rendered fleet."""
    fleet = fleet_of(requests)
    if fleet.serverless is not None:
        concurrency, memory = fleet.serverless["MaxConcurrency"], fleet.serverless["MemorySizeInMB"]
        tally.rows.append(
            Row(
                kind="endpoint",
                key=key,
                instance_type="serverless",
                count=0,
                quota="(serverless concurrency)",
                needed=float(concurrency),
                available=None,
                status="unchecked",
                chosen=True,
                cost_basis="per request",
                note=f"{memory} MB, {concurrency} concurrent",
            )
        )
        return
    found = endpoint_capacity(tally.book, key, ep, fleet)
    tally.rows += found.rows
    tally.shortfalls += found.shortfalls
    tally.warnings += found.warnings


def add_optimization(tally: Tally, o: ResolvedOptimization) -> None:
    """An LLM's optimization job runs on one instance (MaxInstanceCount unset) of its
    DeploymentInstanceType, counted in that type's endpoint quota — beside its own endpoint's
    instances there, since `sagestack run` starts it while the endpoint serves. It costs at most
    max_runtime of that type (SageMaker may pick the instance for quantization and compilation, and
    charges for the one it uses; the target type's price is the estimate)."""
    qn = quota_name(o.instance_type, OPTIMIZATION_USAGE)
    beside = sum(
        r.needed
        for r in tally.rows
        if r.kind in ("endpoint", "shadow") and r.key == o.endpoint and r.chosen and r.quota == qn
    )
    avail = tally.book.available(qn)
    hours = o.optimize.max_runtime / 3600
    price = price_of(o.instance_type)
    tally.rows.append(
        Row(
            kind="optimization",
            key=o.label,
            instance_type=o.instance_type,
            count=1,
            quota=qn,
            needed=1 + beside,
            available=avail,
            status=status_of(avail, 1 + beside),
            chosen=True,
            price_per_hour=price,
            cost_on_demand=price * hours if price is not None else None,
            cost_basis=f"≤ {hours:g} h (max_runtime) per run",
            note=f"beside the endpoint's {beside:g}" if beside else "",
        )
    )
    if status_of(avail, 1 + beside) == "short":
        alternatives = types_with_quota(
            tally.book, OPTIMIZATION_USAGE, 1.0, like=o.instance_type, exclude=[o.instance_type]
        )
        tally.short("optimization", o.label, qn, 1 + beside, alternatives)


@dataclass(frozen=True)
class LlmFit:
    """An LLM on one pool type: what one copy spans and whether its weights, KV cache and
    activations fit the memory its server uses there."""

    endpoint: str  # the endpoint, or endpoint/component
    instance_type: str
    accelerator: str  # e.g. "A10G", "NeuronCore" (Inferentia2 / Trainium), "none"
    accelerators: int  # GPUs, or NeuronCores, of one instance
    accelerator_gib: float | None  # memory of each
    tensor_parallel_degree: int
    weights_gib: float
    kv_cache_gib: float  # bytes per token x token limit x batch
    activations_gib: float
    needed_gib: float  # weights + KV cache + activations
    available_gib: float  # the memory of the devices one copy spans that its server uses
    kv_cache: str  # the KV cache's formula, with its inputs
    shape_estimated: bool  # the model's shape is the nearest known architecture's, not its own
    fits: bool


def llm_fits(key: str, ep: EndpointSpec, root: Path | None = None, env: str | None = None) -> list[LlmFit]:
    """Each pool type's view of the endpoint's LLM, and of each LLM component's (the model's shape
    from the config.json of its local weights under `root`, when there)."""
    models: list[tuple[str, LlmSpec, int | None]] = []
    if ep.llm is not None:
        models.append((key, ep.llm, None))
    models += [(f"{key}/{n}", c.llm, c.accelerators) for n, c in ep.components.items() if c.llm is not None]
    out = []
    for label, spec, asked in models:
        shape = shape_of(spec, local_weights_dir(root, env, spec) if root is not None else None)
        for itype in ep.instance_type or ():
            devices, per, name = _devices(itype)
            fit = memory_fit(spec, itype, asked, shape)
            out.append(
                LlmFit(
                    endpoint=label,
                    instance_type=itype,
                    accelerator=name,
                    accelerators=devices,
                    accelerator_gib=per,
                    tensor_parallel_degree=fit.tensor_parallel_degree,
                    weights_gib=fit.weights_gib,
                    kv_cache_gib=fit.kv_cache_gib,
                    activations_gib=fit.activations_gib,
                    needed_gib=fit.needed_gib,
                    available_gib=fit.available_gib,
                    kv_cache=fit.kv.formula(),
                    shape_estimated=shape.estimate,
                    fits=fit.ok,
                )
            )
    return out


def _devices(itype: str) -> tuple[int, float | None, str]:
    """(devices a tensor-parallel group spans — GPUs or NeuronCores —, GiB each, their name)."""
    acc = instance_type(itype).accelerator
    if acc is None:
        return 0, None, "none"
    if acc.neuron_cores_per_chip:
        per = acc.memory_gib / acc.neuron_cores_per_chip if acc.memory_gib else None
        return acc.neuron_cores, per, "NeuronCore"
    return acc.count, acc.memory_gib, acc.model
