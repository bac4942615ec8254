"""The catalog against its sources: botocore's enums and sagemaker-core's tables."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from functools import cache, partial
from importlib import resources
from typing import get_args

import pytest

from sagestack.core.catalog import (
    RequestValidationError,
    check_instance_type,
    dlc_image_uri,
    instance_type,
    instance_types_for,
    quota_name,
    validate_request,
)
from sagestack.core.catalog.images import ImageLookupError
from sagestack.core.catalog.instances import (
    RETIRED_FAMILIES,
    all_instance_types,
    catalog_data,
    nearest_offered,
)


def _gpu_info() -> dict:
    text = resources.files("sagemaker.core").joinpath("image_uri_config/instance_gpu_info.json").read_text()
    return json.loads(text)["us-east-1"]


def test_catalog_names_only_instance_types_sagemaker_knows():
    known = set(instance_types_for("training")) | set(instance_types_for("hosting"))
    stale = [name for name in catalog_data()["accelerated"] if name not in known]
    assert stale == []


def test_gpu_counts_and_memory_agree_with_sagemaker_core():
    mismatches = []
    for name, info in _gpu_info().items():
        try:
            it = instance_type(name)
        except KeyError:
            continue  # sagemaker-core lists some types SageMaker no longer offers (e.g. ml.g5n)
        acc = it.accelerator
        if acc is None or acc.count != info["Count"]:
            mismatches.append((name, "count", info["Count"], acc and acc.count))
        elif round(acc.memory_gib * acc.count) != round(info["TotalGpuMemoryInMiB"] / 1024):
            mismatches.append(
                (name, "memory", info["TotalGpuMemoryInMiB"] / 1024, acc.memory_gib * acc.count)
            )
    # sagemaker-core reports 183104 MiB (A10G usable memory) for g5.48xlarge; the spec sheet says 8 x 24 GiB.
    assert [m for m in mismatches if m[0] != "ml.g5.48xlarge"] == []


def test_every_training_type_has_facts():
    missing_vcpu = [n for n in instance_types_for("training") if instance_type(n).vcpu is None]
    assert missing_vcpu == []


@pytest.mark.parametrize(
    ("name", "per_host"),
    [
        ("ml.p4d.24xlarge", 8),
        ("ml.g5.12xlarge", 4),
        ("ml.trn1.32xlarge", 32),
        ("ml.trn1.2xlarge", 2),
        ("ml.m5.xlarge", 1),
        ("ml.p3.16xlarge", 8),
    ],
)
def test_processes_per_host_follow_the_container_rule(name, per_host):
    # GPUs, else Neuron cores, else 1 (the SageMaker PyTorch container's default).
    assert instance_type(name).accelerators_per_host == per_host


def test_accelerated_family_newer_than_the_table_is_marked_unknown():
    it = instance_type("ml.g7.2xlarge")
    assert it.accelerator is not None and it.accelerator.kind == "unknown"


def test_efa_types_match_the_training_toolkit():
    toolkit = {
        "ml.g4dn.8xlarge",
        "ml.g4dn.12xlarge",
        "ml.g5.48xlarge",
        "ml.p3dn.24xlarge",
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.trn1.32xlarge",
    }
    efa = {n for n in catalog_data()["accelerated"] if instance_type(n).efa}
    assert toolkit <= efa
    assert efa - toolkit == {
        "ml.p5en.48xlarge",
        "ml.trn1n.32xlarge",
        "ml.trn2.48xlarge",
        "ml.p6-b200.48xlarge",
    }


def test_instance_type_check_messages():
    assert check_instance_type("ml.g5.xlarge", "training") is None
    assert check_instance_type("ml.g5.xlarg", "training") == (
        "'ml.g5.xlarg' is not a SageMaker training job instance type; did you mean 'ml.g5.xlarge'?"
    )
    assert check_instance_type("ml.inf2.xlarge", "hosting") is None


def _names(name: str, usage: str) -> list[str]:
    return [t.name for t in nearest_offered(name, usage)]  # type: ignore[arg-type]


def test_a_type_offered_for_another_use_names_the_nearest_types_offered_for_this_one():
    # botocore's enums: p3dn (8x V100 32 GiB) trains but hosts no endpoint; t2 hosts but trains nothing.
    assert "ml.p3dn.24xlarge" in instance_types_for("training")
    assert "ml.p3dn.24xlarge" not in instance_types_for("hosting")
    near = _names("ml.p3dn.24xlarge", "hosting")
    assert near[0] == "ml.p4d.24xlarge"  # 8 NVIDIA GPUs again, with at least their memory
    assert "ml.p3.16xlarge" in near  # the same 8 V100s, with half the memory
    assert check_instance_type("ml.p3dn.24xlarge", "hosting") == (
        "'ml.p3dn.24xlarge' exists but SageMaker does not offer it for endpoints; the nearest offered: "
        "ml.p4d.24xlarge (8x A100 40 GiB), ml.p4de.24xlarge (8x A100 80 GiB), ml.p3.16xlarge (8x V100 16 "
        "GiB), ml.p5.48xlarge (8x H100 80 GiB)"
    )
    t2 = _names("ml.t2.medium", "training")
    assert t2[0] == "ml.t3.medium" and "ml.m5.large" in t2  # 2 vCPUs, general purpose
    assert check_instance_type("ml.t2.medium", "training").startswith(
        "'ml.t2.medium' exists but SageMaker does not offer it for training jobs; the nearest offered: "
        "ml.t3.medium (2 vCPU, 4 GiB), "
    )
    # Inferentia trains nothing: Trainium is the Neuron type that does.
    assert {instance_type(n).accelerator.kind for n in _names("ml.inf2.xlarge", "training")} == {"trainium"}
    assert _names("ml.inf2.xlarge", "training")[0] == "ml.trn1.2xlarge"  # one chip, as inf2.xlarge


@pytest.mark.parametrize("usage", ["training", "hosting", "transform", "processing"])
def test_every_type_refused_for_a_use_gets_offered_types_of_its_kind_when_there_are_any(usage):
    offered = set(instance_types_for(usage))
    kinds = {
        n: (instance_type(n).accelerator.kind if instance_type(n).accelerator else None) for n in offered
    }
    for name in sorted(all_instance_types() - offered):
        message = check_instance_type(name, usage)
        near = nearest_offered(name, usage)
        assert message is not None and near and all(t.name in offered for t in near), name
        assert all(t.name in message for t in near), name
        it = instance_type(name)
        kind = it.accelerator.kind if it.accelerator else None
        if kind in kinds.values():
            first = near[0].accelerator.kind if near[0].accelerator else None
            assert first == kind, (name, near[0].name)
        if any(kinds[n] == kind and instance_type(n).family not in RETIRED_FAMILIES for n in offered):
            assert near[0].family not in RETIRED_FAMILIES, name


def test_quota_names_follow_sagemaker():
    assert quota_name("ml.g5.2xlarge", "training") == "ml.g5.2xlarge for training job usage"
    assert quota_name("ml.g5.2xlarge", "spot_training") == "ml.g5.2xlarge for spot training job usage"
    assert quota_name("ml.c5.xlarge", "endpoint") == "ml.c5.xlarge for endpoint usage"


def test_dlc_uris_by_processor_and_region(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from sagestack.core.catalog import images

    images._disk_cache.cache_clear()
    gpu = dlc_image_uri("pytorch", "2.5", "py311", region="us-east-1", instance_type="ml.p4d.24xlarge")
    cpu = dlc_image_uri("pytorch", "2.5", "py311", region="eu-west-1", instance_type="ml.m5.xlarge")
    assert gpu == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"
    assert cpu == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.5-cpu-py311"
    cached = json.loads(next((tmp_path / "sagestack").glob("dlc-uris-*.json")).read_text())
    assert gpu in {v.get("uri") for v in cached.values()}
    images._disk_cache.cache_clear()


def test_dlc_lookup_error_is_clear():
    with pytest.raises(
        ImageLookupError, match=r"Unsupported Python version: py38\. Supported Python version\(s\): py311"
    ):
        dlc_image_uri("pytorch", "2.5", "py38", region="us-east-1", instance_type="ml.g5.xlarge")


def test_validate_request_accepts_valid_and_rejects_invalid():
    validate_request("ListTrainingJobs", {"MaxResults": 10})
    with pytest.raises(RequestValidationError, match="Invalid type for parameter MaxResults"):
        validate_request("ListTrainingJobs", {"MaxResults": "10"})
    with pytest.raises(RequestValidationError, match="Unknown parameter in input"):
        validate_request("ListTrainingJobs", {"Bogus": 1})


def test_validate_request_checks_what_botocore_leaves_to_the_service():
    # botocore's ParamValidator checks only minimums; the service also enforces maxima, enums, patterns.
    with pytest.raises(RequestValidationError) as info:
        validate_request(
            "CreateModelPackageGroup",
            {"ModelPackageGroupName": "digits_dev", "ModelPackageGroupDescription": "x" * 1025},
        )
    text = str(info.value)
    assert "ModelPackageGroupName: 'digits_dev' does not match the pattern" in text
    assert "ModelPackageGroupDescription: 1025 characters, at most 1024 allowed" in text
    with pytest.raises(RequestValidationError, match=r"'ml\.g5\.huge' is not one of"):
        validate_request(
            "CreateNotebookInstance",
            {
                "NotebookInstanceName": "nb",
                "InstanceType": "ml.g5.huge",
                "RoleArn": "arn:aws:iam::123456789012:role/r",
            },
        )


def test_did_you_mean_offers_the_one_closest_value_as_written_or_nothing():
    from sagestack.core.catalog.suggest import closest, did_you_mean

    types = ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g4dn.xlarge"]
    assert closest("ml.g5.xlarg", types) == ["ml.g5.xlarge"]  # one, though three are close
    assert closest("ML.G5.XLARG", types, n=2) == ["ml.g5.xlarge", "ml.g5.2xlarge"]  # best first
    assert did_you_mean("ml.g5.xlarg", ["ml.G5.xlarge"]) == "; did you mean 'ml.G5.xlarge'?"  # as written
    assert did_you_mean("zzz", types) == ""


@pytest.fixture
def fresh_image_cache(tmp_path, monkeypatch):
    """The DLC URI cache in a folder of the test's own: every lookup resolves (none is served from
    the user's ~/.cache), and what it stores can be read back."""
    from sagestack.core.catalog import images

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    images._disk_cache.cache_clear()
    yield tmp_path / "sagestack"
    images._disk_cache.cache_clear()


def test_trainium_and_inferentia2_images_come_from_the_neuron_table(fresh_image_cache):
    ecr = "763104351884.dkr.ecr.us-west-2.amazonaws.com"
    trn = dlc_image_uri("pytorch", "2.5", "py310", region="us-west-2", instance_type="ml.trn1.32xlarge")
    assert trn == f"{ecr}/pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04"
    inf2 = dlc_image_uri(
        "pytorch", "2.5", "py310", region="us-west-2", instance_type="ml.inf2.xlarge", scope="inference"
    )
    assert inf2 == f"{ecr}/pytorch-inference-neuronx:2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04"
    refused = {
        ("tensorflow", "2.5", "py310", "us-west-2"): "no Neuron-x tensorflow container; Trainium/Inferentia2 "
        "images exist for: pytorch",
        ("pytorch", "9.9", "py310", "us-west-2"): "no Neuron-x pytorch 9.9 container for ml.trn1.32xlarge; "
        "available versions: 2.1, 2.5",
        ("pytorch", "2.5", "py311", "us-west-2"): "the Neuron-x pytorch 2.5 container ships py310, not py311",
    }
    for (framework, version, py, region), message in refused.items():
        with pytest.raises(ImageLookupError) as info:
            dlc_image_uri(framework, version, py, region=region, instance_type="ml.trn1.32xlarge")
        assert str(info.value) == message
    with pytest.raises(
        ImageLookupError, match=r"^no Neuron-x container in af-south-1 for ml\.trn1\.32xlarge; "
    ):
        dlc_image_uri("pytorch", "2.5", "py310", region="af-south-1", instance_type="ml.trn1.32xlarge")


def test_smp_v2_and_debugger_images_resolve_as_the_sdk_does(fresh_image_cache):
    from sagestack.core.catalog.images import debugger_rules_image_uri, smp_image_uri

    # The tags AWS's SMP release notes publish: the full PyTorch version and the CUDA it ships with
    ecr = "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel"
    published = {
        ("2.0", "py310", "ml.p4d.24xlarge"): "2.0.1-gpu-py310-cu121",  # the SDK: 2.0-gpu-py310-cu118
        ("2.1", "py310", "ml.p4d.24xlarge"): "2.1.2-gpu-py310-cu121",
        ("2.2", "py310", "ml.p4d.24xlarge"): "2.2.0-gpu-py310-cu121",  # sagestack rendered 2.2-gpu-…
        ("2.2.0", "py310", "ml.p5.48xlarge"): "2.2.0-gpu-py310-cu121",
        ("2.3", "py311", "ml.p4d.24xlarge"): "2.3.1-gpu-py311-cu121",
        ("2.4", "py311", "ml.p4de.24xlarge"): "2.4.1-gpu-py311-cu121",
        ("2.5", "py311", "ml.p5.48xlarge"): "2.5.1-gpu-py311-cu124",
    }
    for (version, py, itype), tag in published.items():
        assert smp_image_uri(version, py, region="us-east-1", instance_type=itype) == f"{ecr}:{tag}"
    refused = {
        ("1.0", "py311"): "SMP v2 has no container for PyTorch 1.0; AWS publishes one for PyTorch 2.0.1, "
        "2.1.2, 2.2.0, 2.3.1, 2.4.1, 2.5.1",
        # an SMP library version sagemaker-core's table keeps among PyTorch's: no such container
        ("2.3.0", "py310"): "SMP v2 has no container for PyTorch 2.3.0; AWS publishes one for PyTorch 2.0.1, "
        "2.1.2, 2.2.0, 2.3.1, 2.4.1, 2.5.1",
        ("2.5", "py38"): "the SMP v2 container for PyTorch 2.5.1 ships py311, not py38",
    }
    for (version, py), message in refused.items():
        with pytest.raises(ImageLookupError) as info:
            smp_image_uri(version, py, region="us-east-1", instance_type="ml.p5.48xlarge")
        assert str(info.value) == message
    with pytest.raises(ImageLookupError, match=r"^SMP v2, PyTorch 2\.5\.1: Unsupported region: af-south-1\."):
        smp_image_uri("2.5", "py311", region="af-south-1", instance_type="ml.p5.48xlarge")
    rules = debugger_rules_image_uri("eu-west-1")
    assert rules == "929884845733.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest"
    with pytest.raises(
        ImageLookupError, match=r"^no Debugger rule evaluator image in xx-nowhere-1: "
    ) as info:
        debugger_rules_image_uri("xx-nowhere-1")
    assert "upgrade your SDK" not in str(info.value)  # not the fix for a region the catalog lacks


def test_a_lookup_and_its_refusal_are_cached_on_disk(fresh_image_cache, monkeypatch):
    from sagestack.core.catalog import images

    calls = []

    def resolve() -> str:
        calls.append(1)
        return "uri-1"

    def refuse() -> str:
        calls.append(1)
        raise ImageLookupError("no such image")

    assert images.cached_lookup("k", resolve) == "uri-1" and images.cached_lookup("k", resolve) == "uri-1"
    for _ in range(2):
        with pytest.raises(ImageLookupError, match=r"^no such image$"):
            images.cached_lookup("bad", refuse)
    assert len(calls) == 2  # each resolved once
    (stored,) = fresh_image_cache.glob("dlc-uris-sagemaker-core-*.json")
    assert json.loads(stored.read_text()) == {"bad": {"error": "no such image"}, "k": {"uri": "uri-1"}}
    images._disk_cache.cache_clear()  # a new process reads the file
    assert images.cached_lookup("k", refuse) == "uri-1"


def test_neo_framework_versions_and_compiled_images_follow_sagemaker_cores_tables(fresh_image_cache):
    from sagestack.core.catalog.neo import (
        cloud_target,
        compiled_image_uri,
        framework_versions,
        normalize_version,
        target_for_family,
    )

    c5, g4dn, inf1, inf2 = (cloud_target(d) for d in ("ml_c5", "ml_g4dn", "ml_inf1", "ml_inf2"))
    assert c5 is not None and g4dn is not None and inf1 is not None and inf2 is not None
    cpu = framework_versions("PYTORCH", c5)
    assert cpu is not None and cpu[:8] == ["1.4", "1.5", "1.6", "1.7", "1.8", "1.12", "1.13", "2.0"]
    assert "2.0.1" in cpu and "2.1" not in cpu  # the table's aliases count, as sagemaker-core resolves them
    assert framework_versions("PYTORCH", inf1) == ["1.7", "1.8", "1.9"]
    assert framework_versions("PYTORCH", inf2) == ["2.1", "2.5"]  # sagestack's Neuron-x table
    assert framework_versions("TENSORFLOW", c5) is None  # no table: CreateCompilationJob judges
    assert (
        normalize_version("PYTORCH", "2.0.1", c5) == "2.0"
        and normalize_version("PYTORCH", "2.0", c5) == "2.0"
    )
    assert normalize_version("PYTORCH", "2.0.1", inf2) == "2.0.1"
    assert normalize_version("TENSORFLOW", "2.0.1", c5) == "2.0.1"
    assert compiled_image_uri("PYTORCH", "2.0.1", c5, "us-east-1") == (
        "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-inference-pytorch:2.0-cpu-py3"
    )
    assert compiled_image_uri("PYTORCH", "2.0", g4dn, "eu-west-1") == (
        "802834080501.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-inference-pytorch:2.0-gpu-py3"
    )
    assert compiled_image_uri("PYTORCH", "1.9", inf1, "us-east-1") == (
        "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-neo-pytorch:1.9-inf-py3"
    )
    assert compiled_image_uri("PYTORCH", "2.5", inf2, "us-west-2") == (
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-inference-neuronx:2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04"
    )
    refused = [
        (
            ("TENSORFLOW", "2.0", c5, "us-east-1"),
            "sagestack has no inference image table for TENSORFLOW Neo targets",
        ),
        (("PYTORCH", "9.9", inf2, "us-west-2"), "no Neuron-x PyTorch 9.9 inference image in us-west-2"),
        (("PYTORCH", "2.5", inf2, "af-south-1"), "no Neuron-x PyTorch 2.5 inference image in af-south-1"),
        (
            ("PYTORCH", "9.9", c5, "us-east-1"),
            "no neo-pytorch 9.9 image for ml_c5 in us-east-1: Unsupported ",
        ),
    ]
    for args, message in refused:
        with pytest.raises(ImageLookupError) as info:
            compiled_image_uri(*args)
        assert str(info.value).startswith(message)
    assert target_for_family("inf2") == inf2 and target_for_family("g5") is None
    assert c5.instance_prefix == "ml.c5."


# --- Every image URI sagestack renders, held to its source ------------------------------------
#
# The source is sagemaker-core's `image_uris` (the tables the SageMaker SDK deploys from), except
# where AWS publishes something else. Each departure is listed here with its reason; the test fails
# on a departure that is not listed and on a listed one that no longer departs.
_SMP_FULL = (
    "AWS's SMP release notes publish the full PyTorch version; sagemaker-core keeps the version as written"
)
_SMP_MINOR = "sagemaker-core has no alias for the minor version; sagestack takes the newest published patch"
_SMP_LIBRARY = (
    "an SMP library version in sagemaker-core's PyTorch versions: AWS publishes no container for "
    "PyTorch {v}, so sagestack refuses it"
)
_NEURONX = (
    "sagemaker-core has no Neuron-x table: for a Trainium/Inferentia2 type it answers from the CUDA "
    "table or refuses; sagestack's data/neuronx_images.json lists the Neuron DLCs AWS publishes"
)
_NEURON_LLM_ON_TRAINIUM = (
    "sagemaker-core refuses every framework but pytorch on a Trainium type; the family's Neuron image "
    "(resolved for ml.inf2.xlarge) serves Trainium too"
)
_NEO_ALIAS = (
    "a PyTorch version the model was compiled with, which sagemaker-core's neo-pytorch table aliases "
    "to the image that serves it: sagestack tags that image's version (the table's versions, the tags "
    "the SDK's own tests check); sagemaker-core would put the alias itself in the tag"
)


def _neo_aliases() -> dict[str, str]:
    text = resources.files("sagemaker.core").joinpath("image_uri_config/neo-pytorch.json").read_text()
    return json.loads(text).get("version_aliases", {})


# (kind, version as the spec writes it) -> (how the tag sagestack renders starts, None for a
# refusal; why)
IMAGE_DEPARTURES: dict[tuple[str, str], tuple[str | None, str]] = {
    ("smp", "2.0"): (
        "2.0.1-gpu-py310-cu121",
        _SMP_FULL + "; the SDK picks cu118 off p5, AWS publishes cu121 only (SMP v2.0.0)",
    ),
    ("smp", "2.0.1"): ("2.0.1-gpu-py310-cu121", "the SDK picks cu118 off p5; AWS publishes cu121 only"),
    ("smp", "2.1"): ("2.1.2-gpu-py310-cu121", _SMP_FULL),
    ("smp", "2.2"): ("2.2.0-gpu-py310-cu121", _SMP_FULL),
    ("smp", "2.3"): ("2.3.1-gpu-py311-cu121", _SMP_MINOR),
    ("smp", "2.4"): ("2.4.1-gpu-py311-cu121", _SMP_MINOR),
    ("smp", "2.5"): ("2.5.1-gpu-py311-cu124", _SMP_MINOR),
    **{("smp", v): (None, _SMP_LIBRARY.format(v=v)) for v in ("2.3.0", "2.5.0", "2.7.0", "2.8.0")},
    ("neuronx-training", "2.1"): ("2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04", _NEURONX),
    ("neuronx-training", "2.5"): ("2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04", _NEURONX),
    ("neuronx-inference", "2.1"): ("2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04", _NEURONX),
    ("neuronx-inference", "2.5"): ("2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04", _NEURONX),
    ("neo-neuronx", "2.1"): ("2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04", _NEURONX),
    ("neo-neuronx", "2.5"): ("2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04", _NEURONX),
    **{("neo", alias): (f"{image}-", _NEO_ALIAS) for alias, image in _neo_aliases().items()},
    **{
        ("llm-on-trainium", family): ("", _NEURON_LLM_ON_TRAINIUM)  # the image for ml.inf2.xlarge
        for family in ("djl-neuronx", "huggingface-llm-neuronx")
    },
}
_SMP_DISTRIBUTION = {
    "torch_distributed": {"enabled": True},
    "smdistributed": {"modelparallel": {"enabled": True}},
}


def _outcome(render: Callable[[], str]) -> str:
    """The URI, or "refused" (the two sides word their refusals differently: only the fact counts)."""
    try:
        return str(render())
    except (ValueError, KeyError):  # ImageLookupError is a ValueError
        return "refused"


@pytest.fixture
def fast_image_tables(fresh_image_cache, monkeypatch):
    """sagemaker-core reads botocore's endpoints.json on every retrieve (~50 ms) and sagestack's disk
    cache rewrites its file on every miss: both are kept in memory for the thousands of lookups."""
    from sagemaker.core import common_utils

    from sagestack.core.catalog import images

    monkeypatch.setattr(common_utils, "_botocore_resolver", cache(common_utils._botocore_resolver))
    monkeypatch.setattr(images, "_store", lambda key, value: images._disk_cache().__setitem__(key, value))


def _rotating(regions: Iterable[str]) -> Callable[[], str]:
    """One region per case, taken in turn, so the cases together visit every region of a table."""
    order = sorted(regions)
    turn = itertools.count(1)
    return lambda: order[next(turn) % len(order)]


# A case: (kind, version as written, sagestack's rendering, sagemaker-core's for the same inputs)
Case = tuple[str, str, Callable[[], str], Callable[[], str]]


def _dlc_cases() -> Iterator[Case]:
    """Every (framework, scope, version, py, processor) sagemaker-core's tables offer for the DLC
    frameworks a spec may name, each in one of the version's regions (in turn); the newest version
    in every region."""
    from sagemaker.core import image_uris

    from sagestack.foundation.models import DlcImage

    hint = {"cpu": "ml.m5.xlarge", "gpu": "ml.g5.2xlarge"}
    for framework in get_args(DlcImage.model_fields["framework"].annotation):
        config = image_uris.config_for_framework(framework)
        for scope in ("training", "inference"):
            table = config.get(scope)
            if table is None:
                continue
            versions = table["versions"]
            names = [*versions, *(a for a in table.get("version_aliases", {}) if a != "latest")]
            for version in names:
                vconf = versions[table.get("version_aliases", {}).get(version, version)]
                processors = [
                    p for p in table.get("processors") or vconf.get("processors") or [] if p in hint
                ]
                regions = _rotating(vconf.get("registries") or ["us-east-1"])
                everywhere = version == names[len(versions) - 1]
                for py, processor in itertools.product(vconf.get("py_versions") or ["py3"], processors):
                    for region in sorted(vconf.get("registries", {})) if everywhere else [regions()]:
                        mine = dict(region=region, instance_type=hint[processor])
                        yield (
                            f"dlc-{framework}-{scope}",
                            version,
                            partial(dlc_image_uri, framework, version, py, **mine, scope=scope),
                            partial(
                                image_uris.retrieve,
                                framework,
                                version=version,
                                py_version=py,
                                image_scope=scope,
                                **mine,
                            ),
                        )


def _neuronx_cases() -> Iterator[Case]:
    """Trainium / Inferentia2 DLCs: sagestack's own table, every version and region."""
    from sagemaker.core import image_uris

    from sagestack.core.catalog.images import neuronx_table

    table = neuronx_table()
    for version, entry in table["pytorch"].items():
        for scope, itype in (("training", "ml.trn1.32xlarge"), ("inference", "ml.inf2.xlarge")):
            for region in table["regions"]:
                args = dict(region=region, instance_type=itype)
                yield (
                    f"neuronx-{scope}",
                    version,
                    partial(dlc_image_uri, "pytorch", version, entry["py_version"], **args, scope=scope),
                    partial(
                        image_uris.retrieve,
                        "pytorch",
                        version=version,
                        py_version=entry["py_version"],
                        image_scope=scope,
                        **args,
                    ),
                )


def _smp_cases() -> Iterator[Case]:
    """SMP v2: every version sagemaker-core's pytorch-smp table names and each one's major.minor,
    with either Python, on p4d and p5, against what the SDK renders (get_training_image_uri)."""
    from sagemaker.core import image_uris

    from sagestack.core.catalog.images import smp_image_uri

    smp = image_uris.config_for_framework("pytorch-smp")["training"]
    versions = {*smp["versions"], *smp["version_aliases"]}
    regions = _rotating(smp["versions"]["2.0.1"]["registries"])
    for version in sorted(versions | {v.rsplit(".", 1)[0] for v in versions}):
        for py, itype in itertools.product(("py310", "py311"), ("ml.p4d.24xlarge", "ml.p5.48xlarge")):
            region = regions()
            yield (
                "smp",
                version,
                partial(smp_image_uri, version, py, region=region, instance_type=itype),
                partial(
                    image_uris.get_training_image_uri,
                    region,
                    "pytorch",
                    version,
                    py,
                    distribution=_SMP_DISTRIBUTION,
                    instance_type=itype,
                ),
            )


def _neo_cases() -> Iterator[Case]:
    """The image a Neo-compiled PyTorch model runs in: every cloud target and version."""
    from sagemaker.core import image_uris

    from sagestack.core.catalog.images import neuronx_table
    from sagestack.core.catalog.neo import cloud_target, cloud_targets, compiled_image_uri, framework_versions

    for device in cloud_targets():
        target = cloud_target(device)
        assert target is not None
        name = "inferentia-pytorch" if target.processor == "inf" else "neo-pytorch"
        if target.processor == "neuronx":
            kind, regions = "neo-neuronx", _rotating(neuronx_table()["regions"])
        else:
            first = next(iter(image_uris.config_for_framework(name)["versions"].values()))
            kind, regions = "neo", _rotating(first["registries"])
        for version in framework_versions("PYTORCH", target) or []:
            region = regions()
            yield (
                kind,
                version,
                partial(compiled_image_uri, "PYTORCH", version, target, region),
                partial(image_uris.retrieve, name, region, version=version, instance_type=device),
            )


def _llm_cases() -> Iterator[Case]:
    """Every LLM family's versions on each accelerator the family runs on (and CPU where it does)."""
    from sagemaker.core import image_uris

    from sagestack.llm.images import CONTAINERS, FAMILIES, known_versions, llm_image_uri
    from sagestack.llm.models import LlmSpec

    for family in CONTAINERS:
        kinds, on_cpu = FAMILIES[family]
        itypes = ["ml.inf2.xlarge", "ml.trn1.32xlarge"] if "inferentia" in kinds else ["ml.g5.2xlarge"]
        for version, itype in itertools.product(known_versions(family), itypes + ["ml.m5.xlarge"] * on_cpu):
            spec = LlmSpec.model_validate(
                {"container": family, "version": version, "weights": {"s3": "m/"}, "parameters": 8e9}
            )
            on_trainium = itype.startswith("ml.trn")
            yield (
                "llm-on-trainium" if on_trainium else "llm",
                family if on_trainium else f"{family} {version}",
                partial(llm_image_uri, spec, region="us-east-1", instance_type=itype),
                partial(
                    image_uris.retrieve,
                    family,
                    region="us-east-1",
                    version=version,
                    instance_type=itype,
                    image_scope="inference",
                ),
            )


def _regional_cases() -> Iterator[Case]:
    """Debugger's rule evaluator and Model Monitor's analyzer, in every region their tables name
    (also what an environment-agnostic stack's CfnMapping holds)."""
    from sagemaker.core import image_uris

    from sagestack.core.catalog.images import debugger_rules_image_uri
    from sagestack.monitoring.states import analyzer_image

    for framework, ours in (("debugger", debugger_rules_image_uri), ("model-monitor", analyzer_image)):
        for vconf in image_uris.config_for_framework(framework)["versions"].values():
            for region in sorted(vconf["registries"]):
                yield framework, "", partial(ours, region), partial(image_uris.retrieve, framework, region)


def test_every_image_sagestack_renders_is_sagemaker_cores_or_a_listed_departure(fast_image_tables):
    compared: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (kind, version) -> [(ours, core's)]
    sources = (_dlc_cases, _neuronx_cases, _smp_cases, _neo_cases, _llm_cases, _regional_cases)
    for kind, version, ours, theirs in itertools.chain.from_iterable(source() for source in sources):
        compared.setdefault((kind, version), []).append((_outcome(ours), _outcome(theirs)))
    assert sum(map(len, compared.values())) > 1500  # the tables were walked, not skipped
    kinds = {kind for kind, _ in compared}
    assert {"dlc-pytorch-training", "dlc-tensorflow-inference", "smp", "neo", "llm", "debugger"} <= kinds

    unlisted, departed = {}, set()
    for key, pairs in compared.items():
        differ = [(o, t) for o, t in pairs if o != t]
        listed = IMAGE_DEPARTURES.get(key)
        if listed is None:
            if differ:
                unlisted[key] = differ[0]
            continue
        tag, _why = listed
        assert differ, f"{key}: listed as a departure but sagestack now renders sagemaker-core's answer"
        departed.add(key)
        rendered = [o for o, _ in pairs if o != "refused"]  # with another Python, both may refuse
        if tag is None:
            assert not rendered, (key, rendered)
        else:
            assert rendered and all(o.rsplit(":", 1)[-1].startswith(tag) for o in rendered), (key, rendered)
    assert not unlisted, f"departures from sagemaker-core without a listed reason: {unlisted}"
    assert departed == set(IMAGE_DEPARTURES), set(IMAGE_DEPARTURES) - departed
    assert all(len(why) > 40 for _, why in IMAGE_DEPARTURES.values())  # each with its reason


def test_a_neuron_llm_family_on_trainium_runs_its_inferentia2_image(fresh_image_cache):
    from sagestack.llm.images import NEURON_FAMILIES, known_versions, llm_image_uri
    from sagestack.llm.models import LlmSpec

    for family in sorted(NEURON_FAMILIES):
        spec = LlmSpec.model_validate(
            {
                "container": family,
                "version": known_versions(family)[0],
                "weights": {"s3": "m/"},
                "parameters": 8e9,
            }
        )
        on = {
            t: llm_image_uri(spec, region="us-east-1", instance_type=t)
            for t in ("ml.trn1.32xlarge", "ml.inf2.xlarge")
        }
        assert on["ml.trn1.32xlarge"] == on["ml.inf2.xlarge"], family
