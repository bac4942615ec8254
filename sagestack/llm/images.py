"""An LLM container family's image per region, version and instance type, and the accelerators each
family runs on.

The image comes from sagemaker-core's offline tables (`sagemaker.core.image_uris.retrieve`, the
same tables the SageMaker Python SDK deploys from), through the DLC catalog's disk cache (importing
sagemaker-core costs seconds); the versions are read straight from those tables' JSON. Which
accelerators a family runs on is each family's own documentation:

- djl-lmi (vLLM / LMI-Dist rolling batch), djl-tensorrtllm, huggingface-llm (TGI), huggingface-vllm,
  vllm and sglang are CUDA images: NVIDIA GPUs only (their tables have a `gpu` processor or a
  `-cuXXX` tag; TensorRT-LLM engines are built for one NVIDIA architecture).
- djl-neuronx and huggingface-llm-neuronx are Neuron SDK images: Inferentia2 and Trainium (trn1,
  trn2) only — transformers-neuronx / optimum-neuron need NeuronCore-v2, which Inf1 lacks.
  sagemaker-core refuses any framework but pytorch for a Trainium instance type, so the Neuron
  families' image is resolved for ml.inf2.xlarge there: the same image serves both.
- sagemaker-tritonserver has a `cpu` and a `gpu` processor: NVIDIA GPUs or CPU instances.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import metadata
from typing import get_args

from sagestack.core.catalog.images import ImageLookupError, cached_lookup, without_sdk_advice
from sagestack.core.catalog.instances import AcceleratorKind
from sagestack.core.catalog.instances import instance_type as lookup
from sagestack.core.catalog.suggest import did_you_mean
from sagestack.llm.models import Container, LlmSpec

CONTAINERS: tuple[str, ...] = get_args(Container)

_NVIDIA: frozenset[AcceleratorKind] = frozenset({"nvidia"})
_NEURON: frozenset[AcceleratorKind] = frozenset({"inferentia", "trainium"})
# family -> (accelerator kinds, runs on CPU-only instances)
FAMILIES: dict[str, tuple[frozenset[AcceleratorKind], bool]] = {
    "djl-lmi": (_NVIDIA, False),
    "djl-tensorrtllm": (_NVIDIA, False),
    "djl-neuronx": (_NEURON, False),
    "huggingface-llm": (_NVIDIA, False),
    "huggingface-llm-neuronx": (_NEURON, False),
    "huggingface-vllm": (_NVIDIA, False),
    "vllm": (_NVIDIA, False),
    "sglang": (_NVIDIA, False),
    "sagemaker-tritonserver": (_NVIDIA, True),
}
NEURON_FAMILIES = frozenset(f for f, (kinds, _) in FAMILIES.items() if kinds == _NEURON)
NEURON_RESOLVE_HINT = "ml.inf2.xlarge"  # the Neuron families' image, asked for on Trainium too


class LlmImageError(ImageLookupError):
    """No image of the family matches the region, version or instance type (a ValueError)."""


def accelerator_kinds(container: str) -> frozenset[str]:
    """The catalog's accelerator kinds ("nvidia", "inferentia", "trainium") the family runs on."""
    return frozenset(FAMILIES[container][0])


def runs_on_cpu(container: str) -> bool:
    """Whether the family has an image for instances without an accelerator."""
    return FAMILIES[container][1]


def instance_problem(container: str, instance_type: str) -> str | None:
    """Why `container` cannot run on `instance_type` (None when it can)."""
    try:
        acc = lookup(instance_type).accelerator
    except KeyError:
        return None  # the instance-type rules report an unknown type
    kinds = FAMILIES[container][0]
    where = _where(container)
    if acc is not None and acc.kind == "unknown":
        return None  # a type newer than the catalog's facts: nothing to judge by
    if acc is None:
        if runs_on_cpu(container):
            return None
        cpu = ", ".join(f for f, (_, on_cpu) in FAMILIES.items() if on_cpu)
        return (
            f"{container} needs an accelerator ({where}); {instance_type} has none (only {cpu} runs on CPU)"
        )
    if acc.kind not in kinds:
        return f"{container} runs on {where}; {instance_type} has {acc.model} ({acc.kind})"
    if container in NEURON_FAMILIES and acc.model == "Inferentia":
        return f"{container} needs NeuronCore-v2 (Inferentia2 / Trainium); {instance_type} is Inf1"
    return None


def _where(container: str) -> str:
    kinds, cpu = FAMILIES[container]
    if kinds == _NEURON:
        return "Inferentia2 / Trainium (ml.inf2, ml.trn1, ml.trn2)"
    return "NVIDIA GPUs" + (" or CPU instances" if cpu else "")


@cache
def _table(container: str) -> dict[str, object]:
    path = metadata.distribution("sagemaker-core").locate_file(
        f"sagemaker/core/image_uri_config/{container}.json"
    )
    data: dict[str, object] = json.loads(path.read_text())
    inner = data.get("inference")
    return inner if isinstance(inner, dict) else data


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def known_versions(container: str) -> list[str]:
    """The family's versions and version aliases sagemaker-core knows, newest first."""
    table = _table(container)
    versions = [str(v) for v in table.get("versions", {})]  # type: ignore[attr-defined]
    aliases = [str(a) for a in table.get("version_aliases", {}) or {} if a != "latest"]  # type: ignore[attr-defined]
    return sorted(set(versions) | set(aliases), key=_key, reverse=True)


def newest_version(container: str) -> str:
    """The family's newest version in sagemaker-core's table (its 'latest' alias where it has one)."""
    table = _table(container)
    aliases = table.get("version_aliases") or {}
    if isinstance(aliases, dict) and "latest" in aliases:
        return str(aliases["latest"])
    return max((str(v) for v in table.get("versions", {})), key=_key)  # type: ignore[attr-defined]


def llm_image_uri(spec: LlmSpec, *, region: str, instance_type: str) -> str:
    """The family's inference image for the region and instance type (LlmImageError saying why not:
    the versions known, the accelerators the family needs, the regions it has)."""
    container = spec.container
    version = spec.version or newest_version(container)
    known = known_versions(container)
    if version not in known:
        raise LlmImageError(
            f"{container} has no version '{version}' in sagemaker-core {metadata.version('sagemaker-core')}"
            f"{did_you_mean(version, known)} (known: {', '.join(known)})"
        )
    problem = instance_problem(container, instance_type)
    if problem is not None:
        raise LlmImageError(problem)
    asked = instance_type
    if container in NEURON_FAMILIES and instance_type.startswith(("ml.trn1", "ml.trn2")):
        asked = NEURON_RESOLVE_HINT
    key = f"llm|{container}|{version}|{region}|{asked}"
    try:
        return cached_lookup(key, lambda: _retrieve(container, version, region, asked))
    except ImageLookupError as e:
        raise LlmImageError(f"no {container} {version} image for {instance_type} in {region}: {e}") from None


def _retrieve(container: str, version: str, region: str, instance_type: str) -> str:
    from sagemaker.core import image_uris  # start-up: heavy, only on a disk-cache miss

    try:
        uri: str = image_uris.retrieve(
            container, region=region, version=version, instance_type=instance_type, image_scope="inference"
        )
    except (ValueError, KeyError) as e:
        raise ImageLookupError(without_sdk_advice(e)) from None
    return uri
