"""Instance types: what exists (botocore's enums) joined with what each one has (data/instances.json)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from sagestack.core.catalog.service_model import enum_values
from sagestack.core.catalog.suggest import did_you_mean

AcceleratorKind = Literal["nvidia", "trainium", "inferentia", "unknown"]
Usage = Literal["training", "hosting", "transform", "processing"]

_INSTANCE_STORAGE_FAMILIES = frozenset(
    {
        "g4dn",
        "g5",
        "g6",
        "g6e",
        "g7",
        "g7e",
        "p3dn",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "p6-b300",
        "p6e-gb200",
        "trn1",
        "trn1n",
        "trn2",
    }
)

_ENUM_FOR_USAGE: dict[str, str] = {
    "training": "TrainingInstanceType",
    "hosting": "ProductionVariantInstanceType",
    "transform": "TransformInstanceType",
    "processing": "ProcessingInstanceType",
}
_WHAT = {
    "training": "training job",
    "hosting": "endpoint",
    "transform": "transform job",
    "processing": "processing job",
}


@dataclass(frozen=True)
class Accelerator:
    kind: AcceleratorKind
    model: str
    count: int  # GPUs, or Trainium/Inferentia chips
    memory_gib: float | None  # per accelerator
    neuron_cores_per_chip: int = 0

    @property
    def neuron_cores(self) -> int:
        return self.count * self.neuron_cores_per_chip


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    size: str
    vcpu: int | None
    memory_gib: float | None
    accelerator: Accelerator | None
    nvlink: bool = False
    efa: bool = False
    gpudirect_rdma: bool = False
    network_gbps: float | None = None
    price_per_hour: float | None = None  # on-demand, us-east-1, USD

    @property
    def gpus(self) -> int:
        a = self.accelerator
        return a.count if a is not None and a.kind == "nvidia" else 0

    @property
    def neuron_cores(self) -> int:
        a = self.accelerator
        return a.neuron_cores if a is not None else 0

    @property
    def accelerators_per_host(self) -> int:
        """Processes per host the SageMaker PyTorch container starts: GPUs, else Neuron cores, else 1."""
        return self.gpus or self.neuron_cores or 1

    @property
    def has_instance_storage(self) -> bool:
        """Local NVMe instance storage (g4dn, g5, p3dn, p4d, p5, trn1, …d): SageMaker encrypts it
        itself and refuses a VolumeKmsKeyId for such types."""
        return self.family in _INSTANCE_STORAGE_FAMILIES or self.family.endswith(("d", "dn"))

    @property
    def is_accelerated(self) -> bool:
        return self.accelerator is not None


@cache
def catalog_data() -> dict[str, Any]:
    text = resources.files("sagestack.core.catalog").joinpath("data/instances.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def catalog_version() -> str:
    return str(catalog_data()["as_of"])


def _split(name: str) -> tuple[str, str]:
    _, family, size = name.split(".", 2)
    return family, size


@cache
def instance_type(name: str) -> InstanceType:
    """Facts about one instance type (KeyError when SageMaker does not know it at all)."""
    if name not in all_instance_types():
        raise KeyError(name)
    data = catalog_data()
    family, size = _split(name)
    acc = data["accelerated"].get(name)
    if acc is not None:
        a = acc["accelerator"]
        return InstanceType(
            name=name,
            family=family,
            size=size,
            vcpu=acc["vcpu"],
            memory_gib=acc["memory_gib"],
            accelerator=Accelerator(
                kind=a["kind"],
                model=a["model"],
                count=a["count"],
                memory_gib=a["memory_gib"],
                neuron_cores_per_chip=a.get("neuron_cores_per_chip", 0),
            ),
            nvlink=acc["nvlink"],
            efa=acc["efa"],
            gpudirect_rdma=acc["gpudirect_rdma"],
            network_gbps=acc["network_gbps"],
            price_per_hour=acc["price_per_hour"],
        )
    vcpu = data["size_vcpus"].get(size)
    ratio = data["cpu_families"].get(family)
    accelerator = None
    if (ratio is None and family[:1] in ("p", "g")) or family.startswith(("trn", "inf")):
        # An accelerated family newer than this table: say so rather than pretend it has no GPU.
        accelerator = Accelerator(kind="unknown", model="unknown", count=0, memory_gib=None)
    return InstanceType(
        name=name,
        family=family,
        size=size,
        vcpu=vcpu,
        memory_gib=data.get("cpu_memory_gib", {}).get(name)
        or (vcpu * ratio if vcpu is not None and ratio is not None else None),
        accelerator=accelerator,
        price_per_hour=data["cpu_prices"].get(name),
    )


@cache
def instance_types_for(usage: Usage) -> tuple[str, ...]:
    return enum_values(_ENUM_FOR_USAGE[usage])


@cache
def all_instance_types() -> frozenset[str]:
    return frozenset(n for usage in _ENUM_FOR_USAGE for n in instance_types_for(usage))


def check_instance_type(name: str, usage: Usage) -> str | None:
    """None when `name` is a valid `usage` instance type, else an error message with a suggestion:
    the nearest types offered for that use when `name` exists for another."""
    allowed = instance_types_for(usage)
    if name in allowed:
        return None
    what = _WHAT[usage]
    if name in all_instance_types():
        near = ", ".join(f"{t.name} ({describe(t)})" for t in nearest_offered(name, usage))
        return f"'{name}' exists but SageMaker does not offer it for {what}s; the nearest offered: {near}"
    return f"'{name}' is not a SageMaker {what} instance type{did_you_mean(name, allowed)}"


def memory_bandwidth_gbps(t: InstanceType) -> float | None:
    """Peak memory bandwidth of one of `t`'s accelerators (a GPU, or a Neuron chip), GB/s; None
    without an accelerator or where the catalog has no figure (data/instances.json, with sources)."""
    a = t.accelerator
    if a is None:
        return None
    figure = catalog_data().get("memory_bandwidth_gbps", {}).get(a.model)
    if isinstance(figure, dict):  # one model, several memory sizes (A100 40 / 80 GB)
        figure = figure.get(f"{a.memory_gib:g}")
    return float(figure) if isinstance(figure, int | float) else None


def describe(t: InstanceType) -> str:
    """What a type has, in a few words: '8x A100 40 GiB', '2 vCPU, 8 GiB'."""
    a = t.accelerator
    if a is not None and a.kind != "unknown":
        memory = f" {a.memory_gib:g} GiB" if a.memory_gib else ""
        return f"{a.count}x {a.model}{memory}"
    if a is not None:
        return "accelerated"
    parts = [f"{t.vcpu} vCPU" if t.vcpu else "", f"{t.memory_gib:g} GiB" if t.memory_gib else ""]
    return ", ".join(p for p in parts if p) or "CPU"


# CPU families by what they are for: a burstable t is a general-purpose m that bursts.
_CPU_CLASS = {"t": "general", "m": "general", "c": "compute", "r": "memory", "x": "memory", "z": "memory"}
_NEURON = frozenset({"trainium", "inferentia"})


def _family_parts(family: str) -> tuple[str, int]:
    """'p3dn' -> ('p', 3), 'c7i-flex' -> ('c', 7), 'p6-b200' -> ('p', 6), 'inf2' -> ('inf', 2)."""
    found = re.match(r"([a-z]+)(\d*)", family)
    letters, digits = (found.group(1), found.group(2)) if found else (family, "")
    return letters, int(digits) if digits else 0


def _kind(t: InstanceType) -> str:
    return t.accelerator.kind if t.accelerator is not None else "cpu"


def _gap(want: float | None, have: float | None, shortfall: float = 1.0, surplus: float = 1.0) -> float:
    """How far `have` is from `want`, in doublings, each way weighted."""
    if not want or not have:
        return 1.0  # unknown: neither near nor far
    doublings = math.log2(have / want)
    return -doublings * shortfall if doublings < 0 else doublings * surplus


def _distance(want: InstanceType, t: InstanceType) -> tuple[int, float]:
    """(tier, distance): the same kind of accelerator (or none) first, then Neuron for Neuron; within
    a tier, near in accelerator model, count and memory (less memory counts 1.5 times: the model may not
    fit; more counts half: it only costs), else in vCPUs and memory; then in family and generation."""
    wk, tk = _kind(want), _kind(t)
    tier = 0 if wk == tk else 1 if {wk, tk} <= _NEURON else 2
    (w_letters, w_gen), (t_letters, t_gen) = _family_parts(want.family), _family_parts(t.family)
    d = 0.2 * abs(w_gen - t_gen)
    a, b = want.accelerator, t.accelerator
    if a is not None and b is not None and a.kind != "unknown" and b.kind != "unknown":
        d += (0.0 if a.model == b.model else 0.5) + (0.0 if w_letters == t_letters else 0.5)
        d += _gap(a.count, b.count) + _gap(a.memory_gib, b.memory_gib, shortfall=1.5, surplus=0.5)
        d += 0.25 * _gap(want.vcpu, t.vcpu)  # the host's size, last
    else:
        if w_letters != t_letters:
            same_class = _CPU_CLASS.get(w_letters, w_letters) == _CPU_CLASS.get(t_letters, t_letters)
            d += 0.5 if same_class else 1.0
        d += _gap(want.vcpu, t.vcpu) + _gap(want.memory_gib, t.memory_gib, shortfall=1.5, surplus=0.5)
    return tier, d


def nearest_offered(name: str, usage: Usage, n: int = 4) -> list[InstanceType]:
    """The `n` types offered for `usage` nearest to `name` (which SageMaker knows, for another use),
    nearest first: the same kind of accelerator with as much memory, then the fewest changes of
    model, count, family and generation; retired families (P2) only when nothing else is near."""
    want = instance_type(name)
    pool = [instance_type(m) for m in instance_types_for(usage) if m != name]

    def key(t: InstanceType) -> tuple[int, bool, float, float, str]:
        tier, d = _distance(want, t)
        return tier, t.family in RETIRED_FAMILIES, round(d, 6), t.price_per_hour or math.inf, t.name

    return sorted(pool, key=key)[:n]


# Families SageMaker still lists but no current framework container supports: the DLCs dropped
# P2 (K80) with PyTorch 1.13 and TensorFlow 2.12 (the DLC lookup says so).
RETIRED_FAMILIES = {
    "p2": "K80 GPUs: the PyTorch (>= 1.13) and TensorFlow (>= 2.12) containers no longer run on P2"
}


def is_retired(name: str) -> bool:
    return instance_type(name).family in RETIRED_FAMILIES


def current_replacement(name: str, usage: Usage = "training") -> InstanceType | None:
    """The closest current type to a retired one: the same kind of accelerator, the fewest devices that
    are at least as many (else the most there are), then the cheapest."""
    old = instance_type(name)
    kind = old.accelerator.kind if old.accelerator else None
    count = old.accelerator.count if old.accelerator else 0
    pool = [
        t
        for t in (instance_type(n) for n in instance_types_for(usage))
        if t.family not in RETIRED_FAMILIES and (t.accelerator.kind if t.accelerator else None) == kind
    ]
    if not pool:
        return None

    def devices(t: InstanceType) -> int:
        return t.accelerator.count if t.accelerator else 0

    enough = [t for t in pool if devices(t) >= count]
    if enough:
        fewest = min(devices(t) for t in enough)
        pool = [t for t in enough if devices(t) == fewest]
    else:
        most = max(devices(t) for t in pool)
        pool = [t for t in pool if devices(t) == most]
    return min(pool, key=lambda t: (t.price_per_hour or float("inf"), t.name))
