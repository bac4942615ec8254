"""What the conformance tiers compare between a local run and AWS's toolkit run of the same layout:
the probe files each host's entry point wrote, their environment with the host's folder read back
as /opt/ml and the toolkit's tarball as the request's code URI, and the files a host left."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def probes(base: Path) -> dict[str, dict[str, Any]]:
    """Each rank's record (probe-<rank>.json under the host's output/data)."""
    return {
        p.stem: json.loads(p.read_text()) for p in sorted((base / "output" / "data").glob("probe-*.json"))
    }


def normalize(value: str, base: Path, request: Mapping[str, Any], tarball: Path | None) -> str:
    value = value.replace(str(base), "/opt/ml")
    if tarball is not None:
        uri = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
        value = value.replace(str(tarball), uri)
    return value


def compared_env(
    probe: Mapping[str, Any],
    base: Path,
    request: Mapping[str, Any],
    tarball: Path | None,
    exported: Iterable[str],
) -> dict[str, str]:
    """Every SM_* variable and the `exported` others, PYTHONPATH's first entry, argv and cwd."""
    env = probe["env"]
    keys = [k for k in env if k.startswith("SM_")] + [k for k in exported if k in env]
    out = {k: normalize(env[k], base, request, tarball) for k in keys}
    out["PYTHONPATH[0]"] = normalize(env.get("PYTHONPATH", "").split(":")[0], base, request, tarball)
    out["argv"] = json.dumps(probe["argv"])
    out["cwd"] = normalize(probe["cwd"], base, request, tarball)
    return out


def files(folder: Path) -> set[str]:
    """The files under a folder, TensorBoard's event files by their pattern."""
    names = set()
    for p in folder.rglob("*"):
        if p.is_file():
            rel = p.relative_to(folder).as_posix()
            names.add(re.sub(r"events\.out\.tfevents\..*", "events.out.tfevents.*", rel))
    return names
