"""Sizing from a model's parameter count: memory per device, fit, all-reduce bytes and time."""

from __future__ import annotations

import pytest

from sagestack.training.models import JobSpec
from sagestack.training.sizing import GIB, MIB, size_job


def job(params: float, precision: str, types: list[str], count: int = 1, optimizer: str = "adamw") -> JobSpec:
    return JobSpec.model_validate(
        {
            "image": "train",
            "instance_type": types,
            "instance_count": count,
            "sizing": {"parameters": params, "precision": precision, "optimizer": optimizer},
        }
    )


def test_bert_large_in_half_precision_sends_about_650_mb_per_step():
    # The book's example: 340M parameters, fp16 gradients = 680 MB; a ring over N devices sends
    # 2(N-1)/N of that per device per step, which for N = 2 is the gradient size itself.
    s = size_job(job(340e6, "fp16", ["ml.p3.2xlarge"], count=2), "ml.p3.2xlarge")
    assert s.gradients == 680e6
    assert s.allreduce_bytes / MIB == pytest.approx(648.5, abs=0.1)
    eight = size_job(job(340e6, "fp16", ["ml.p4d.24xlarge"]), "ml.p4d.24xlarge")
    assert eight.allreduce_bytes == pytest.approx(2 * 7 / 8 * 680e6)


def test_mixed_precision_adam_needs_16_bytes_per_parameter():
    s = size_job(job(1e9, "bf16", ["ml.p4d.24xlarge"]), "ml.p4d.24xlarge")
    # 2 (weights) + 2 (gradients) + 8 (Adam moments) + 4 (fp32 master weights)
    assert s.per_device == 16e9
    sgd = size_job(job(1e9, "fp32", ["ml.p4d.24xlarge"], optimizer="sgd"), "ml.p4d.24xlarge")
    assert sgd.per_device == 8e9


def test_a_model_too_big_for_one_gpu_is_told_to_shard():
    s = size_job(job(7e9, "bf16", ["ml.p4d.24xlarge"]), "ml.p4d.24xlarge")
    assert s.fits is False and s.device_memory == 40 * GIB
    assert s.sharded_per_device == pytest.approx(112e9 / 8)
    assert s.notes[0].startswith(
        "does not fit one device (104.3 GiB > 40 GiB): shard it across the 8 devices with FSDP"
    )
    huge = size_job(job(70e9, "bf16", ["ml.g5.2xlarge"]), "ml.g5.2xlarge")
    assert huge.notes[0].startswith("does not fit even sharded over 1 devices")
    assert "shard over at least 44 devices" in huge.notes[0]


def test_multi_node_without_efa_is_flagged_network_bound():
    s = size_job(job(340e6, "fp16", ["ml.p3.16xlarge"], count=2), "ml.p3.16xlarge")
    assert s.network_bound
    assert s.intra_seconds == pytest.approx(2 * 7 / 8 * 680e6 / 300e9)  # NVLink, V100
    assert s.network_seconds == pytest.approx(2 * 1 / 2 * 680e6 / (25 / 8 * 1e9))  # 25 Gbps
    assert "choose an EFA instance" in s.notes[-1]
    efa = size_job(job(340e6, "fp16", ["ml.p4d.24xlarge"], count=2), "ml.p4d.24xlarge")
    assert "grow the per-device batch" in efa.notes[-1]
    single = size_job(job(340e6, "fp16", ["ml.p4d.24xlarge"]), "ml.p4d.24xlarge")
    assert single.network_seconds is None and not single.network_bound


def test_no_model_no_sizing():
    assert (
        size_job(JobSpec.model_validate({"image": "t", "instance_type": ["ml.m5.xlarge"]}), "ml.m5.xlarge")
        is None
    )


def test_the_old_key_model_still_reads_as_sizing_and_keeps_the_job_hash():
    from sagestack.training.identity import job_hash
    from sagestack.training.models import JobSpec

    base = {"image": "train", "instance_type": "ml.g5.2xlarge"}
    old = JobSpec.model_validate({**base, "model": {"parameters": 1e6}})
    new = JobSpec.model_validate({**base, "sizing": {"parameters": 1e6}})
    assert old == new and new.sizing is not None and new.sizing.parameters == 1e6
    digest = job_hash(new, env="dev", source_sha256="0" * 64, image_uris={})
    assert digest == job_hash(old, env="dev", source_sha256="0" * 64, image_uris={})
    # the hash input names the key as it was first named, so renaming it restarted no job
    unsized = JobSpec.model_validate(base)
    assert job_hash(unsized, env="dev", source_sha256="0" * 64, image_uris={}) != digest


def smp_v1_job(params: float, partitions: int, count: int, **more: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "image": "train",
            "instance_type": ["ml.p4d.24xlarge"],
            "instance_count": count,
            "sizing": {"parameters": params, "precision": "bf16", "optimizer": "adamw"},
            "distribution": {"smp": {"version": 1, "parameters": {"partitions": partitions, **more}}},
        }
    )


def test_smp_v1_splits_memory_over_its_partitions_and_states_the_data_parallel_degree():
    """SMP v1 with `partitions: P` on N GPUs: each holds 1/P of the model, and N / P replicas train
    on different data, each all-reducing its partition's gradients."""
    whole = 16 * 20e9  # mixed-precision Adam, 20B parameters
    four = size_job(smp_v1_job(20e9, 4, count=2), "ml.p4d.24xlarge")  # 16 A100 40 GB
    assert (four.model_parallel, four.data_parallel) == (4, 4)
    assert four.per_device == whole / 4 and four.fits is False  # 74.5 GiB of 40
    assert four.allreduce_bytes == pytest.approx(2 * 3 / 4 * 20e9 * 2 / 4)
    assert any("data-parallel degree 16 processes / 4 = 4" in n for n in four.notes)
    assert any("split the model over at least 8 partitions" in n for n in four.notes)
    eight = size_job(smp_v1_job(20e9, 8, count=2), "ml.p4d.24xlarge")
    assert (eight.data_parallel, eight.per_device, eight.fits) == (2, whole / 8, True)
    # tensor parallelism splits it further; processes_per_host counts the processes
    tp = size_job(smp_v1_job(20e9, 2, count=2, tensor_parallel_degree=4), "ml.p4d.24xlarge")
    assert (tp.model_parallel, tp.data_parallel, tp.per_device) == (8, 2, whole / 8)
    odd = size_job(smp_v1_job(20e9, 3, count=2), "ml.p4d.24xlarge")
    assert any("multiple of partitions" in n for n in odd.notes)
    # any other job holds the whole model on each device, as before
    plain = size_job(job(20e9, "bf16", ["ml.p4d.24xlarge"], count=2), "ml.p4d.24xlarge")
    assert (plain.model_parallel, plain.data_parallel, plain.per_device) == (1, 16, whole)
