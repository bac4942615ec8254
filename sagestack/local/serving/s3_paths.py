"""Where a spec's endpoint keeps its async results and capture files when served here: the cloud's
layout under `.sagestack/local/<env>/s3/<bucket>/` (the local bucket, core.deployment.LOCAL_BUCKET),
so a local run is read back the way a cloud one is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sagestack.core.deployment import LOCAL_BUCKET
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.local.serving.async_inference import AsyncOptions
from sagestack.local.serving.compile import local_root
from sagestack.project.loader import LoadedSpec


def s3_root(loaded: LoadedSpec) -> Path:
    """s3://<bucket>/<key> is <this>/<bucket>/<key> here."""
    return local_root(loaded) / "s3"


def endpoint_name(loaded: LoadedSpec, endpoint: str) -> str:
    return Names(loaded.spec.project, loaded.env or "local").endpoint(endpoint)


def async_options(loaded: LoadedSpec, endpoint: str) -> AsyncOptions:
    prefix = S3Layout(LOCAL_BUCKET).async_prefix(endpoint)
    return AsyncOptions(
        endpoint=endpoint_name(loaded, endpoint),
        s3_root=s3_root(loaded),
        output_uri=f"{prefix}/output/",
        failure_uri=f"{prefix}/failures/",
        notifications=local_root(loaded) / "async" / endpoint / "notifications.jsonl",
    )


def capture_dir(loaded: LoadedSpec, endpoint: str) -> Path:
    """Where the endpoint's capture files go (`local monitor` reads them back)."""
    return s3_root(loaded) / LOCAL_BUCKET / "capture" / endpoint / endpoint_name(loaded, endpoint)


def serving_extras(
    loaded: LoadedSpec, endpoint: str, *, asynchronous: bool | None, capture: bool | None
) -> dict[str, Any]:
    """ServeOptions' async and capture settings, from the flags or else the spec."""
    spec = loaded.spec.endpoints[endpoint]
    extras: dict[str, Any] = {}
    if asynchronous if asynchronous is not None else spec.async_ is not None:
        extras["asynchronous"] = async_options(loaded, endpoint)
    if capture if capture is not None else spec.data_capture is not None:
        extras["capture_dir"] = capture_dir(loaded, endpoint)
        extras["capture_percent"] = spec.data_capture.sampling_percent if spec.data_capture else 100
    return extras
