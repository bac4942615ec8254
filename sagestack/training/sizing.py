"""Sizing a job from its model's parameter count and precision (the book, ch. 5-6): memory per
device for weights, gradients and optimizer state; whether it fits the accelerator; the bytes a
device sends per step in ring all-reduce, 2(N-1)/N x gradient size; and how long that takes on
the instance's NVLink and network, flagging layouts the network bounds.

Under SMP v1 (`distribution: {smp: {version: 1, parameters: {partitions: P}}}`) the model is split
over P pipeline partitions (times `tensor_parallel_degree` T, when given): each process holds 1/(P*T)
of the weights, gradients and optimizer state, and the processes (processes_per_host x hosts,
default every GPU) form N/(P*T) data-parallel replicas, which all-reduce their partition's gradients.

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
    # SMP v1: the model's split (pipeline partitions x tensor-parallel degree) and the processes
    model_parallel: int = 1
    processes: int | None = None  # default: every device

    @property
    def whole_model(self) -> float:
        """Weights, gradients and optimizer state of the whole model."""
        return self.weights + self.gradients + self.optimizer_state

    @property
    def per_device(self) -> float:
        """What one device holds: the whole model, or its partition under SMP v1."""
        return self.whole_model / self.model_parallel

    @property
    def data_parallel(self) -> int:
        """Replicas of the model that train on different data: processes / model_parallel."""
        return max(1, (self.processes or self.devices) // self.model_parallel)

    @property
    def devices(self) -> int:
        return self.devices_per_host * self.hosts

    @property
    def sharded_per_device(self) -> float:
        return self.whole_model / self.devices

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


def smp_v1_split(job: JobSpec) -> tuple[int, int] | None:
    """(pipeline partitions, tensor-parallel degree) of an SMP v1 job, None for any other job.
    SMP v1 names the pipeline degree `partitions` (or `pipeline_parallel_degree`)."""
    d = job.distribution
    if d is None or d.smp is None or d.smp.version != 1:
        return None
    p = d.smp.parameters
    partitions = p.get("partitions", p.get("pipeline_parallel_degree", 1))
    tensor = p.get("tensor_parallel_degree", 1)
    as_int = [
        v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1 for v in (partitions, tensor)
    ]
    return as_int[0], as_int[1]


def size_job(job: JobSpec, candidate: str) -> Sizing | None:
    """None when the job states no model size."""
    m = job.sizing
    if m is None:
        return None
    it = instance_type(candidate)
    split = smp_v1_split(job)
    mp = split[0] * split[1] if split else 1
    b = BYTES[m.precision]
    p = m.parameters
    mixed = b < 4
    master = 4 * p if mixed else 0.0  # fp32 master weights kept by mixed-precision optimizers
    moments = {"adam": 8 * p, "adamw": 8 * p, "sgd": 0.0, "sgd_momentum": 4 * p}[m.optimizer]
    weights, grads = p * b, p * b
    per_host = it.accelerators_per_host
    hosts = job.instance_count
    smp = job.distribution.smp if split and job.distribution else None
    processes = (smp.processes_per_host or per_host) * hosts if smp else None
    n = max(1, (processes or per_host * hosts) // mp)  # the replicas that reduce each gradient
    allreduce = 2 * (n - 1) / n * grads / mp if n > 1 else 0.0
    if it.accelerator is not None and it.accelerator.memory_gib:
        memory: float | None = it.accelerator.memory_gib * GIB
    elif it.memory_gib:
        memory = it.memory_gib * GIB / per_host
    else:
        memory = None
    link = _link_gbps(it)
    reduced = grads / mp  # each replica reduces its partition's gradients
    intra = 2 * (per_host - 1) / per_host * reduced / (link * 1e9) if (link and per_host > 1) else None
    network = None
    if hosts > 1 and it.network_gbps:
        network = 2 * (hosts - 1) / hosts * reduced / (it.network_gbps / 8 * 1e9)
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
        model_parallel=mp,
        processes=processes,
    )
    if split:
        sizing.notes.extend(_smp_v1_notes(sizing, *split))
    sizing.notes.extend(_advice(sizing, it))
    return sizing


def _smp_v1_notes(s: Sizing, partitions: int, tensor: int) -> list[str]:
    """The split SMP v1 makes, and a split the processes cannot make."""
    processes = s.processes or s.devices
    split = f"{partitions} pipeline partition(s)" + (f" x tensor-parallel {tensor}" if tensor > 1 else "")
    notes = [
        f"SMP v1: the model split over {split}; data-parallel degree {processes} processes / "
        f"{s.model_parallel} = {s.data_parallel}; {s.per_device / GIB:.1f} GiB per partition"
    ]
    if processes % s.model_parallel:
        notes.append(
            f"SMP v1 needs the processes ({processes}) to be a multiple of partitions x "
            f"tensor_parallel_degree ({s.model_parallel}): change partitions or the instance count"
        )
    return notes


def _advice(s: Sizing, it: InstanceType) -> list[str]:
    notes = []
    if s.fits is False and s.device_memory and s.model_parallel > 1:
        need = math.ceil(s.whole_model / s.device_memory)
        notes.append(
            f"a partition does not fit one device ({s.per_device / GIB:.1f} GiB > "
            f"{s.device_memory / GIB:.0f} GiB): split the model over at least {need} partitions"
        )
    elif s.fits is False and s.device_memory:
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
