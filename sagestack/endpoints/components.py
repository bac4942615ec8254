"""Inference components on one endpoint: how their copies pack onto the instance type.

SageMaker places each copy of a component on an instance with the CPU cores, memory and
accelerator devices it asks for (ComputeResourceRequirements) free. `pack` does the same
arithmetic the way a scheduler would (first fit, largest copies first) so that `plan` can show how
many instances the initial copies take — and the rules can refuse a copy that fits on no instance
at all, or initial copies that need more instances than managed scaling's max.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.endpoints.models import ComponentSpec, EndpointSpec


@dataclass(frozen=True)
class Capacity:
    cpu: float
    memory_mb: float
    accelerators: int

    def fits(self, need: Capacity) -> bool:
        return (
            need.cpu <= self.cpu + 1e-9
            and need.memory_mb <= self.memory_mb + 1e-9
            and need.accelerators <= self.accelerators
        )

    def minus(self, need: Capacity) -> Capacity:
        return Capacity(
            self.cpu - need.cpu, self.memory_mb - need.memory_mb, self.accelerators - need.accelerators
        )


@dataclass
class Instance:
    free: Capacity
    copies: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Packing:
    instance_type: str
    per_instance: Capacity | None  # None: the catalog does not know this type's size
    instances: tuple[Instance, ...]
    unplaceable: tuple[str, ...]  # components whose one copy fits on no instance

    @property
    def instances_needed(self) -> int:
        return len(self.instances)


def instance_capacity(instance_type: str) -> Capacity | None:
    try:
        it = lookup(instance_type)
    except (KeyError, ValueError):
        return None
    if it.vcpu is None or it.memory_gib is None:
        return None
    devices = it.accelerator.count if it.accelerator else 0
    return Capacity(cpu=float(it.vcpu), memory_mb=it.memory_gib * 1024, accelerators=devices)


def copy_needs(c: ComponentSpec) -> Capacity:
    return Capacity(cpu=c.cpu_cores, memory_mb=float(c.memory_mb), accelerators=c.accelerators or 0)


def pack(ep: EndpointSpec, *, copies: str = "initial") -> Packing:
    """Place every component's copies (initial: `copies`; max: `max_copies` or `copies`) on as few
    instances of the endpoint's type as first-fit-decreasing finds."""
    assert ep.primary_instance_type is not None
    per = instance_capacity(ep.primary_instance_type)
    if per is None:
        return Packing(ep.primary_instance_type, None, (), ())
    wanted: list[tuple[str, Capacity]] = []
    unplaceable = []
    for name, c in ep.components.items():
        need = copy_needs(c)
        if not per.fits(need):
            unplaceable.append(name)
            continue
        count = c.copies if copies == "initial" else (c.max_copies or c.copies)
        wanted += [(name, need)] * count
    wanted.sort(key=lambda w: (w[1].accelerators, w[1].memory_mb, w[1].cpu), reverse=True)
    instances: list[Instance] = []
    for name, need in wanted:
        for inst in instances:
            if inst.free.fits(need):
                inst.free = inst.free.minus(need)
                inst.copies.append(name)
                break
        else:
            instances.append(Instance(per.minus(need), [name]))
    return Packing(ep.primary_instance_type, per, tuple(instances), tuple(unplaceable))


def describe(p: Packing) -> list[str]:
    """One line per instance: which copies it holds and what is left free."""
    lines = []
    for i, inst in enumerate(p.instances, 1):
        counts: dict[str, int] = {}
        for c in inst.copies:
            counts[c] = counts.get(c, 0) + 1
        held = ", ".join(f"{n}x{k}" for k, n in counts.items())
        free = inst.free
        lines.append(
            f"instance {i}: {held} (free: {free.cpu:g} vCPU, {free.memory_mb / 1024:.1f} GiB"
            + (
                f", {free.accelerators} accelerator(s)"
                if p.per_instance and p.per_instance.accelerators
                else ""
            )
            + ")"
        )
    return lines
