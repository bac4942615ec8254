"""SageMaker Neo compile targets: which hosting family each cloud target device runs on, which
framework versions Neo accepts for it, and the inference image a compiled model runs in.

Framework versions come from sagemaker-core's offline image tables (neo-pytorch for CPU/GPU
targets, inferentia-pytorch for ml_inf1), read as JSON files so that nothing imports
sagemaker.core on this path; Neuron-x targets (ml_inf2, ml_trn1) use sagestack's own table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, Literal

from sagestack.core.catalog.images import ImageLookupError, cached_lookup, neuronx_table

Processor = Literal["cpu", "gpu", "inf", "neuronx"]


@dataclass(frozen=True)
class NeoTarget:
    device: str  # TargetDevice, e.g. ml_c5
    family: str  # the hosting instance family it compiles for, e.g. c5 (ml.c5.*)
    processor: Processor

    @property
    def instance_prefix(self) -> str:
        return f"ml.{self.family}."


# Cloud targets: a compiled model for these runs on a SageMaker endpoint of the same family.
# (Edge targets — jetson_*, rasp*, coreml … — are valid for Neo but not servable by an endpoint.)
_CLOUD: dict[str, tuple[str, Processor]] = {
    "ml_c4": ("c4", "cpu"),
    "ml_c5": ("c5", "cpu"),
    "ml_m4": ("m4", "cpu"),
    "ml_m5": ("m5", "cpu"),
    "ml_c6g": ("c6g", "cpu"),
    "ml_m6g": ("m6g", "cpu"),
    "ml_p2": ("p2", "gpu"),
    "ml_p3": ("p3", "gpu"),
    "ml_g4dn": ("g4dn", "gpu"),
    "ml_inf1": ("inf1", "inf"),
    "ml_inf2": ("inf2", "neuronx"),
    "ml_trn1": ("trn1", "neuronx"),
}


def cloud_target(device: str) -> NeoTarget | None:
    """The hosting family of a cloud TargetDevice; None for an edge device."""
    entry = _CLOUD.get(device)
    return NeoTarget(device, *entry) if entry else None


def cloud_targets() -> list[str]:
    return list(_CLOUD)


def target_for_family(family: str) -> NeoTarget | None:
    """The TargetDevice that compiles for a hosting family (c5 -> ml_c5), if Neo has one."""
    for device, (fam, proc) in _CLOUD.items():
        if fam == family:
            return NeoTarget(device, fam, proc)
    return None


@cache
def _sagemaker_core_table(name: str) -> dict[str, Any]:
    # Read the JSON file without importing sagemaker.core (its import costs ~2 s).
    path = metadata.distribution("sagemaker-core").locate_file(f"sagemaker/core/image_uri_config/{name}.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _table_for(processor: Processor) -> str:
    return "inferentia-pytorch" if processor == "inf" else "neo-pytorch"


def framework_versions(framework: str, target: NeoTarget) -> list[str] | None:
    """The framework versions Neo compiles for `target`; None when sagestack has no table for that
    framework (then the version is not checked at synth; CreateCompilationJob will judge)."""
    if framework != "PYTORCH":
        return None
    if target.processor == "neuronx":
        return sorted(neuronx_table()["pytorch"])
    table = _sagemaker_core_table(_table_for(target.processor))
    versions = list(table["versions"])
    aliases = table.get("version_aliases", {})
    return versions + [a for a, v in aliases.items() if v in versions and a not in versions]


def normalize_version(framework: str, version: str, target: NeoTarget) -> str:
    """'2.0.1' -> '2.0' where sagemaker-core's table says so."""
    if framework != "PYTORCH" or target.processor == "neuronx":
        return version
    aliases: dict[str, str] = _sagemaker_core_table(_table_for(target.processor)).get("version_aliases", {})
    return aliases.get(version, version)


def compiled_image_uri(framework: str, version: str, target: NeoTarget, region: str) -> str:
    """The inference image a Neo-compiled model runs in. The compilation job reports the exact one
    (DescribeCompilationJob.InferenceImage); this is the catalog's answer, used when it does not."""
    if framework != "PYTORCH":
        raise ImageLookupError(f"sagestack has no inference image table for {framework} Neo targets")
    if target.processor == "neuronx":
        table = neuronx_table()
        entry = table["pytorch"].get(version)
        if entry is None or region not in table["regions"]:
            raise ImageLookupError(f"no Neuron-x PyTorch {version} inference image in {region}")
        return f"{table['account']}.dkr.ecr.{region}.amazonaws.com/{entry['inference']}"
    name = _table_for(target.processor)
    version = normalize_version(framework, version, target)

    def resolve() -> str:
        from sagemaker.core import image_uris  # heavy: only on a cache miss

        try:
            uri: str = image_uris.retrieve(name, region, version=version, instance_type=target.device)
        except (ValueError, KeyError) as e:
            raise ImageLookupError(
                f"no {name} {version} image for {target.device} in {region}: {e}"
            ) from None
        return uri

    return cached_lookup(f"{name}|{version}|{target.device}|{region}", resolve)


def sagemaker_core_version() -> str:
    return metadata.version("sagemaker-core")
