"""Deep Learning Container image URIs.

GPU/CPU images come from sagemaker-core's offline tables (`sagemaker.core.image_uris`); Neuron-x
images (Trainium, Inferentia2) from sagestack's own table, since sagemaker-core has none for
torch 2.x. Importing sagemaker.core costs ~2.4 s, so it happens only on a cache miss: resolved
URIs (and lookup errors) are cached on disk, keyed by the sagemaker-core version, which makes the
cache exact — the same version always gives the same answer.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any, Literal

from sagestack.core.catalog.instances import instance_type

Scope = Literal["training", "inference"]
# Serverless endpoints run on CPUs of no named type: resolve their (CPU) DLC as for this one.
SERVERLESS_INSTANCE_HINT = "ml.m5.xlarge"


class ImageLookupError(ValueError):
    """No Deep Learning Container matches the request (region, version, Python, processor)."""


@dataclass(frozen=True)
class DlcRequest:
    framework: str
    version: str
    py_version: str
    region: str
    instance_type: str
    scope: Scope = "training"

    def key(self) -> str:
        return "|".join(
            (self.framework, self.version, self.py_version, self.region, self.instance_type, self.scope)
        )


def without_sdk_advice(error: Exception) -> str:
    """sagemaker-core's lookup errors end with "You may need to upgrade your SDK version (pip install
    -U sagemaker)…", which is not the fix for a spec that names an image the catalog does not have."""
    return re.sub(
        r" You may need to upgrade your SDK version \(pip install -U sagemaker\)[^.]*\.", "", str(error)
    )


@cache
def neuronx_table() -> dict[str, Any]:
    text = resources.files("sagestack.core.catalog").joinpath("data/neuronx_images.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _neuronx_uri(req: DlcRequest) -> str:
    table = neuronx_table()
    versions = table.get(req.framework)
    if versions is None:
        raise ImageLookupError(
            f"no Neuron-x {req.framework} container; Trainium/Inferentia2 images exist for: pytorch"
        )
    entry = versions.get(req.version)
    if entry is None:
        raise ImageLookupError(
            f"no Neuron-x {req.framework} {req.version} container for {req.instance_type}; "
            f"available versions: {', '.join(sorted(versions))}"
        )
    if req.region not in table["regions"]:
        raise ImageLookupError(
            f"no Neuron-x container in {req.region} for {req.instance_type}; "
            f"Neuron DLC regions: {', '.join(table['regions'])}"
        )
    if req.py_version != entry["py_version"]:
        raise ImageLookupError(
            f"the Neuron-x {req.framework} {req.version} container ships {entry['py_version']}, not {req.py_version}"
        )
    return f"{table['account']}.dkr.ecr.{req.region}.amazonaws.com/{entry[req.scope]}"


def _sagemaker_core_uri(req: DlcRequest) -> str:
    from sagemaker.core import image_uris  # heavy: only on a cache miss

    try:
        uri: str = image_uris.retrieve(
            req.framework,
            req.region,
            version=req.version,
            py_version=req.py_version,
            instance_type=req.instance_type,
            image_scope=req.scope,
        )
    except (ValueError, KeyError) as e:
        raise ImageLookupError(without_sdk_advice(e)) from None
    return uri


def _resolve(req: DlcRequest) -> str:
    accel = instance_type(req.instance_type).accelerator
    if accel is not None and accel.kind in ("trainium", "inferentia") and accel.model != "Inferentia":
        return _neuronx_uri(req)
    return _sagemaker_core_uri(req)


def _cache_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "sagestack" / f"dlc-uris-sagemaker-core-{metadata.version('sagemaker-core')}.json"


@cache
def _disk_cache() -> dict[str, dict[str, str]]:
    try:
        data: dict[str, dict[str, str]] = json.loads(_cache_path().read_text())
        return data
    except (OSError, ValueError):
        return {}


def _store(key: str, value: dict[str, str]) -> None:
    cache_ = _disk_cache()
    cache_[key] = value
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".dlc-")
        with os.fdopen(fd, "w") as f:
            json.dump(cache_, f, indent=0, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs the next run the lookup again


def cached_lookup(key: str, resolve: Callable[[], str]) -> str:
    hit = _disk_cache().get(key)
    if hit is None:
        try:
            hit = {"uri": resolve()}
        except ImageLookupError as e:
            hit = {"error": str(e)}
        _store(key, hit)
    if "error" in hit:
        raise ImageLookupError(hit["error"])
    return hit["uri"]


def dlc_image_uri(
    framework: str,
    version: str,
    py_version: str,
    *,
    region: str,
    instance_type: str,
    scope: Scope = "training",
) -> str:
    """The DLC URI for a framework version on an instance type, or ImageLookupError saying why not."""
    req = DlcRequest(framework, version, py_version, region, instance_type, scope)
    return cached_lookup(req.key(), lambda: _resolve(req))


_DLC_REPOSITORY = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/([a-z0-9-]+)[:@]")
# The training DLCs' repositories and the framework each runs (the SDK's framework_name_from_image).
DLC_TRAINING_FRAMEWORKS = {
    "pytorch-training": "pytorch",
    "pytorch-training-neuronx": "pytorch",
    "pytorch-smp": "pytorch",
    "tensorflow-training": "tensorflow",
    "huggingface-pytorch-training": "pytorch",
    "huggingface-tensorflow-training": "tensorflow",
}


def dlc_framework(uri: str) -> str | None:
    """The framework an AWS training DLC runs, read from a concrete image URI's repository name;
    None for any other image (a team's own, a Dockerfile build) or a token."""
    match = _DLC_REPOSITORY.match(uri)
    return DLC_TRAINING_FRAMEWORKS.get(match[1]) if match else None


def debugger_rules_image_uri(region: str) -> str:
    """The SageMaker Debugger/Profiler rule evaluator image of a region."""

    def resolve() -> str:
        from sagemaker.core import image_uris

        try:
            uri: str = image_uris.retrieve("debugger", region)
        except ValueError as e:
            raise ImageLookupError(
                f"no Debugger rule evaluator image in {region}: {without_sdk_advice(e)}"
            ) from None
        return uri

    return cached_lookup(f"debugger|{region}", resolve)


@cache
def smp_table() -> dict[str, Any]:
    """The SMP v2 containers AWS publishes (data/smp_images.json): PyTorch version -> its Python,
    CUDA suffix and the SMP releases it carries."""
    text = resources.files("sagestack.core.catalog").joinpath("data/smp_images.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def smp_container(version: str, py_version: str) -> tuple[str, str]:
    """The published SMP v2 container for a PyTorch version as a spec writes it ("2.2" means the
    newest 2.2.x AWS publishes): (full PyTorch version, CUDA suffix), or ImageLookupError."""
    containers: dict[str, dict[str, str]] = smp_table()["containers"]
    minor = version.count(".") == 1  # "2.2": its newest patch; "2" names no container
    patches = [k for k in containers if minor and k.startswith(version + ".")]
    full = version if version in containers else max(patches, key=_version_key, default=None)
    if full is None:
        raise ImageLookupError(
            f"SMP v2 has no container for PyTorch {version}; AWS publishes one for PyTorch "
            f"{', '.join(sorted(containers, key=_version_key))}"
        )
    entry = containers[full]
    if py_version != entry["py_version"]:
        raise ImageLookupError(
            f"the SMP v2 container for PyTorch {full} ships {entry['py_version']}, not {py_version}"
        )
    return full, entry["cuda"]


def smp_image_uri(version: str, py_version: str, *, region: str, instance_type: str) -> str:
    """The SMP v2 container (smdistributed-modelparallel) for a PyTorch version, with the tag AWS's
    SMP release notes publish: <full PyTorch version>-gpu-<py>-<cuda> (smp_table). sagemaker-core's
    pytorch-smp table gives the registry of each region."""
    full, cuda = smp_container(version, py_version)

    def resolve() -> str:
        from sagemaker.core import image_uris

        try:
            uri: str = image_uris.retrieve(
                "pytorch-smp",
                region,
                version=full,
                py_version=py_version,
                instance_type=instance_type,
                image_scope="training",
                container_version=cuda,
            )
        except (ValueError, KeyError) as e:
            raise ImageLookupError(f"SMP v2, PyTorch {full}: {without_sdk_advice(e)}") from None
        return uri

    stamp = smp_table()["as_of"]  # a table edit is a new key: no stale answer from the disk cache
    return cached_lookup(f"smp|{stamp}|{full}|{py_version}|{region}|{instance_type}", resolve)
