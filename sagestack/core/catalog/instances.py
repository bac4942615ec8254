"""Instance types: what exists (botocore's enums) joined with what each one has (data/instances.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

from sagestack.core.catalog.service_model import enum_values
from sagestack.core.catalog.suggest import did_you_mean

AcceleratorKind = Literal["nvidia", "trainium", "inferentia", "unknown"]
Usage = Literal["training", "hosting", "transform"]

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
        memory_gib=vcpu * ratio if vcpu is not None and ratio is not None else None,
        accelerator=accelerator,
        price_per_hour=data["cpu_prices"].get(name),
    )


@cache
def instance_types_for(usage: Usage) -> tuple[str, ...]:
    return enum_values(_ENUM_FOR_USAGE[usage])


@cache
def all_instance_types() -> frozenset[str]:
    return frozenset(instance_types_for("training")) | frozenset(instance_types_for("hosting"))


def check_instance_type(name: str, usage: Usage) -> str | None:
    """None when `name` is a valid `usage` instance type, else an error message with a suggestion."""
    allowed = instance_types_for(usage)
    if name in allowed:
        return None
    what = {"training": "training job", "hosting": "endpoint", "transform": "transform job"}[usage]
    other: Usage = "hosting" if usage == "training" else "training"
    if name in instance_types_for(other):
        return f"'{name}' exists but SageMaker does not offer it for {what}s"
    return f"'{name}' is not a SageMaker {what} instance type{did_you_mean(name, allowed)}"


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
