"""Sizing a job from its model's parameter count and precision (the book, ch. 5-6): memory per
device for weights, gradients and optimizer state; whether it fits the accelerator; the bytes a
device sends per step in ring all-reduce, 2(N-1)/N x gradient size; and how long that takes on
the instance's NVLink and network, flagging layouts the network bounds.

Activations are not counted (they depend on batch and sequence length); the figures are a floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sagestack.core.catalog.instances import InstanceType, instance_type
from sagestack.training.models import JobSpec

GIB = 1024**3
MIB = 1024**2
BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
# Nominal link rates (GB/s), NVIDIA's data sheets: NVLink total bandwidth per GPU; PCIe where a
# GPU has no NVLink peers (Gen3 x16 for V100/T4-era instances, Gen4 x16 after).
NVLINK_GBPS = {"V100": 300.0, "A100": 600.0, "H100": 900.0, "H200": 900.0, "B200": 1800.0}
PCIE_GBPS = {"V100": 16.0, "T4": 16.0, "K80": 16.0, "M60": 16.0}
PCIE_GEN4_GBPS = 32.0


@dataclass(frozen=True)
class Sizing:
    instance_type: str
    parameters: float
    precision: str
    optimizer: str
    weights: float  # bytes per device (unsharded)
    gradients: float
    optimizer_state: float
    devices_per_host: int
    hosts: int
    device_memory: float | None  # bytes of one accelerator (or one host's memory on CPUs)
    allreduce_bytes: float  # each device sends per step (flat ring over all devices)
    intra_seconds: float | None  # the in-host reduction, over NVLink or PCIe
    network_seconds: float | None  # the cross-host reduction, over the instance's network
    notes: list[str] = field(default_factory=list)

    @property
    def per_device(self) -> float:
        return self.weights + self.gradients + self.optimizer_state

    @property
    def devices(self) -> int:
        return self.devices_per_host * self.hosts

    @property
    def sharded_per_device(self) -> float:
        return self.per_device / self.devices

    @property
    def fits(self) -> bool | None:
        return None if self.device_memory is None else self.per_device <= self.device_memory

    @property
    def network_bound(self) -> bool:
        return (
            self.network_seconds is not None
            and self.intra_seconds is not None
            and self.network_seconds > self.intra_seconds
        )


def _link_gbps(it: InstanceType) -> float | None:
    a = it.accelerator
    if a is None or a.kind != "nvidia":
        return None
    if it.nvlink and a.model in NVLINK_GBPS:
        return NVLINK_GBPS[a.model]
    return PCIE_GBPS.get(a.model, PCIE_GEN4_GBPS)


def size_job(job: JobSpec, candidate: str) -> Sizing | None:
    """None when the job states no model size."""
    m = job.sizing
    if m is None:
        return None
    it = instance_type(candidate)
    b = BYTES[m.precision]
    p = m.parameters
    mixed = b < 4
    master = 4 * p if mixed else 0.0  # fp32 master weights kept by mixed-precision optimizers
    moments = {"adam": 8 * p, "adamw": 8 * p, "sgd": 0.0, "sgd_momentum": 4 * p}[m.optimizer]
    weights, grads = p * b, p * b
    per_host = it.accelerators_per_host
    hosts = job.instance_count
    n = per_host * hosts
    allreduce = 2 * (n - 1) / n * grads if n > 1 else 0.0
    if it.accelerator is not None and it.accelerator.memory_gib:
        memory: float | None = it.accelerator.memory_gib * GIB
    elif it.memory_gib:
        memory = it.memory_gib * GIB / per_host
    else:
        memory = None
    link = _link_gbps(it)
    intra = 2 * (per_host - 1) / per_host * grads / (link * 1e9) if (link and per_host > 1) else None
    network = None
    if hosts > 1 and it.network_gbps:
        network = 2 * (hosts - 1) / hosts * grads / (it.network_gbps / 8 * 1e9)
    sizing = Sizing(
        instance_type=candidate,
        parameters=p,
        precision=m.precision,
        optimizer=m.optimizer,
        weights=weights,
        gradients=grads,
        optimizer_state=moments + master,
        devices_per_host=per_host,
        hosts=hosts,
        device_memory=memory,
        allreduce_bytes=allreduce,
        intra_seconds=intra,
        network_seconds=network,
    )
    sizing.notes.extend(_advice(sizing, it))
    return sizing


def _advice(s: Sizing, it: InstanceType) -> list[str]:
    notes = []
    if s.fits is False and s.device_memory:
        if s.sharded_per_device <= s.device_memory:
            notes.append(
                f"does not fit one device ({s.per_device / GIB:.1f} GiB > {s.device_memory / GIB:.0f} GiB): shard it "
                f"across the {s.devices} devices with FSDP (hyperparameter fsdp=true) or SMP "
                f"(distribution: smp) — {s.sharded_per_device / GIB:.1f} GiB each"
            )
        else:
            need = math.ceil(s.per_device / s.device_memory)
            notes.append(
                f"does not fit even sharded over {s.devices} devices ({s.sharded_per_device / GIB:.1f} GiB each > "
                f"{s.device_memory / GIB:.0f} GiB): shard over at least {need} devices"
            )
    if s.network_bound:
        assert s.network_seconds is not None and s.intra_seconds is not None
        ratio = s.network_seconds / s.intra_seconds
        hint = (
            "choose an EFA instance (ml.p4d.24xlarge, ml.p5.48xlarge) for the cross-host step"
            if not it.efa
            else "grow the per-device batch or accumulate gradients to send less often"
        )
        notes.append(f"network-bound: the cross-host reduction takes {ratio:.0f}x the in-host one; {hint}")
    return notes
