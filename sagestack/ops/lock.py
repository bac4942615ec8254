"""`config/envs/<env>.lock.json`: what an environment's spec resolved to, so that a later synth can
be held to it. Each job's content hash and candidates' request hashes and images, the tuning,
endpoint and transform requests' hashes, the source archives, the catalog versions that resolved
them, and (`--digests`) the digest of every image a request names, which a locked synth renders
requests with. No timestamps: the same spec writes the same file."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from sagestack.capacity.endpoints import deployed
from sagestack.core.catalog.instances import catalog_version
from sagestack.core.config import ENV_DIR
from sagestack.core.digests import images_in
from sagestack.monitoring.states import analyzer_image
from sagestack.ops.lock_fields import entry_changes, fields_at, job_changes, request_fields
from sagestack.ops.screen import fit, fit_nested
from sagestack.project.environment import ResolvedEnvironment
from sagestack.project.loader import lock_path as lock_path  # re-exported: callers name it here
from sagestack.project.loader import read_json
from sagestack.project.requests import EnvironmentRequests

LOCK_VERSION = 1
# Parts of the lock that say what runs; the catalog versions only say how it was resolved.
REQUEST_SECTIONS = ("jobs", "tuning", "endpoints", "transforms", "serving", "sources", "launch_files")


def request_sha256(request: dict[str, Any]) -> str:
    """A request's hash in the lock: sha256 of its canonical JSON (sorted keys, no spaces). Hashed
    here, where the lock is written, from the environment's one rendering: the lock does not go
    back to project/requests for each of its requests."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def lock_document(
    plan: ResolvedEnvironment, requests: EnvironmentRequests, digests: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The lock of an environment. `digests` ({image URI: sha256 digest}, `sagestack lock
    --digests`) become the `images` section a locked synth renders requests with; the request
    hashes are always of the requests by tag, so pinning never reads as a request change."""
    jobs: dict[str, Any] = {}
    for key, job_plan in requests.jobs.items():
        candidates = {}
        for c in job_plan.candidates:
            candidates[c.instance_type] = {
                "name": c.name,
                "request_sha256": request_sha256(c.request),
                "image": requests.images[key][c.instance_type],
            }
        jobs[key] = {"hash": job_plan.digest, "candidates": candidates}
    named = set(request_images(plan, requests))
    pinned = {uri: d for uri, d in sorted((digests or {}).items()) if uri in named}
    return {
        "$comment": "Written by `sagestack lock`; `cdk synth -c sagestack:locked=true` refuses requests that differ.",
        "version": LOCK_VERSION,
        "project": plan.project,
        "environment": plan.env,
        "region": plan.region,
        "catalog": {
            "instances": catalog_version(),
            "sagemaker-core": metadata.version("sagemaker-core"),
            "botocore": metadata.version("botocore"),
        },
        "sources": dict(sorted(requests.sources.items())),
        # launcher: drivers jobs only (a lock without one keeps its bytes): job -> the launch files'
        # digest, which moves with the code and with the pinned sagemaker-train's drivers
        **({"launch_files": dict(sorted(requests.launch_files.items()))} if requests.launch_files else {}),
        "jobs": jobs,
        "tuning": {k: {"request_sha256": request_sha256(r)} for k, r in requests.tuning.items()},
        "endpoints": {
            k: {op: request_sha256(r) for op, r in ops.items()} for k, ops in requests.endpoints.items()
        },
        **(
            {
                "transforms": {
                    k: {op: request_sha256(r) for op, r in ops.items()}
                    for k, ops in requests.transforms.items()
                }
            }
            if requests.transforms
            else {}
        ),
        **(
            {
                "optimizations": {
                    k: {op: request_sha256(r) for op, r in ops.items()}
                    for k, ops in requests.optimizations.items()
                }
            }
            if requests.optimizations
            else {}
        ),
        **({"serving": serving} if (serving := deployed_serving(plan)) else {}),
        **({"images": pinned} if pinned else {}),
        "requests": request_fields(requests),
    }


def request_images(plan: ResolvedEnvironment, requests: EnvironmentRequests) -> list[str]:
    """Every tagged ECR image the environment's requests name: training (each candidate, the
    preference job), rule evaluators, tuning, model packages, transforms' models, and the Model
    Monitor analyzer of a monitored endpoint."""

    found: list[Any] = []
    for job_plan in requests.jobs.values():
        found += [c.request for c in job_plan.candidates]
        if job_plan.preferred is not None:
            found.append(job_plan.preferred.request)
    found += [requests.tuning, requests.endpoints, requests.transforms, requests.optimizations]
    if any(ep.monitor is not None for ep in plan.spec.endpoints.values()):
        found.append(analyzer_image(plan.region))
    return images_in(found)


def locked_digests(locked: dict[str, Any] | None) -> dict[str, str]:
    """The `images` section of a lock ({image URI: digest}); empty when it has none."""
    return dict((locked or {}).get("images") or {})


def deployed_serving(plan: ResolvedEnvironment) -> dict[str, Any]:
    """What the endpoints this environment deploys run on: a later synth compares it (an autoscaled
    variant's instance type cannot change in one update). One type is recorded as `instance_type`
    (as before instance pools existed); several as `instance_types`, in priority order."""
    out: dict[str, Any] = {}
    for key, ep in plan.spec.endpoints.items():
        if not deployed(ep) or not ep.instance_type:
            continue
        types: dict[str, Any] = (
            {"instance_type": ep.instance_type[0]}
            if len(ep.instance_type) == 1
            else {"instance_types": list(ep.instance_type)}
        )
        out[key] = {**types, "autoscaled": ep.autoscaling is not None}
    return out


def _pools(served: dict[str, Any]) -> list[str]:
    return list(served.get("instance_types") or [served["instance_type"]])


def autoscaled_type_changes(locked: dict[str, Any], plan: ResolvedEnvironment) -> list[str]:
    """Endpoints whose autoscaled variant would change instance type — or any of its instance
    pools, their order included — in one update, which SageMaker refuses; each with the steps that
    make the change."""
    problems = []
    current = deployed_serving(plan)
    for key, before in (locked.get("serving") or {}).items():
        now = current.get(key)
        if now is None or not before.get("autoscaled") or _pools(now) == _pools(before):
            continue
        old, new = ", ".join(_pools(before)), ", ".join(_pools(now))
        problems.append(
            f"endpoint '{key}' would move from {old} to {new} while "
            "autoscaling is registered on it; SageMaker refuses that update (Application Auto Scaling "
            "blocks instance type changes of a scalable target). Make it two deploys: (1) remove "
            f"autoscaling: from endpoints.{key}, keep the old instance_type, `sagestack lock` and deploy "
            "(the scalable target is deregistered); (2) set the new instance_type with autoscaling: back, "
            "`sagestack lock` and deploy (the endpoint updates, then scaling is registered again)"
        )
    return problems


def write_lock(root: Path, env: str, document: dict[str, Any]) -> Path:
    path = lock_path(root, env)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def read_lock(root: Path, env: str) -> dict[str, Any] | None:
    """The environment's lock as it is now on disk (a loaded plan has the one it was loaded with:
    plan.files.lock)."""
    found = read_json(lock_path(root, env), f"{ENV_DIR}/{env}.lock.json")
    if found is None:
        return None
    data: dict[str, Any] = found[0]
    return data


def diff(old: dict[str, Any], new: dict[str, Any], sections: tuple[str, ...] | None = None) -> list[str]:
    """'path: old → new' for each leaf that differs ('+' added, '-' removed), in `sections`
    (default: everything but the comment)."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                p = f"{path}.{k}" if path else str(k)
                if k not in b:
                    out.append(f"- {p} (was {_short(a[k])})")
                elif k not in a:
                    out.append(f"+ {p} ({_short(b[k])})")
                else:
                    walk(a[k], b[k], p)
        elif a != b:
            out.append(f"~ {path}: {_short(a)} → {_short(b)}")

    keys = sections or tuple(k for k in sorted(set(old) | set(new)) if k != "$comment")
    for k in keys:
        walk(old.get(k, {}), new.get(k, {}), k)
    return out


def lock_changes(locked: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What `current` requests differently from `locked`, as the fields of each request that
    changed (the lock's `requests` section); as hashes where the old lock has no fields, with a
    hint to re-lock. Image digests (which only `sagestack lock --digests` records; a locked synth
    checks them itself) and catalog versions do not count."""
    import copy

    old = copy.deepcopy(locked)
    for job in old.get("jobs", {}).values():
        for c in job.get("candidates", {}).values():
            c.pop("image_digest", None)
    out: list[str] = []
    hashes_only = False
    for section in REQUEST_SECTIONS:
        before, after = old.get(section) or {}, current.get(section) or {}
        for key in sorted(set(before) | set(after)):
            label = f"{section}.{key}"
            if key not in after or key not in before or section in ("serving", "sources", "launch_files"):
                was = {k: v for k, v in before.items() if k == key}
                out += diff({section: was}, {section: {k: v for k, v in after.items() if k == key}})
                continue
            if before[key] == after[key]:
                continue
            explained = _explained(section, key, before[key], after[key], old, current)
            hashes_only = hashes_only or explained is None
            out += explained if explained is not None else diff({label: before[key]}, {label: after[key]})
    if hashes_only:
        env = locked.get("environment", "<env>")
        out.append(
            f"(this lock records hashes only: after `sagestack lock --env {env}` a change shows the "
            "request fields that changed)"
        )
    return out


def _explained(
    section: str, key: str, before: Any, after: Any, old: dict[str, Any], new: dict[str, Any]
) -> list[str] | None:
    """One changed entry of a hashed section told as its request fields; None without fields."""
    old_fields, new_fields = old.get("requests"), new.get("requests")
    if section == "jobs":
        return job_changes(key, before, after, old_fields, new_fields)
    if section == "tuning":
        return entry_changes(
            f"tuning.{key}", fields_at(old_fields, "tuning", key), fields_at(new_fields, "tuning", key)
        )
    lines: list[str] = []  # endpoints, transforms: {operation: request hash}
    for op in sorted(set(before) | set(after)):
        label = f"{section}.{key}.{op}"
        if op not in before or op not in after:
            lines += diff({label: before.get(op)}, {label: after.get(op)})
        elif before[op] != after[op]:
            found = entry_changes(
                label, fields_at(old_fields, section, key, op), fields_at(new_fields, section, key, op)
            )
            if found is None:
                return None
            lines += found
    return lines


def update_changes(previous: dict[str, Any], document: dict[str, Any]) -> list[str]:
    """What re-locking changes: the requests (as lock_changes tells them), then the rest of the
    lock (catalog versions, pinned digests, ...) leaf by leaf; the fields section itself is not
    repeated."""
    rest = tuple(
        k
        for k in sorted(set(previous) | set(document))
        if k not in (*REQUEST_SECTIONS, "requests", "$comment")
    )
    lines = [c for c in lock_changes(previous, document) if not c.startswith("(")]
    return lines + diff(previous, document, rest)


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    if isinstance(value, dict):
        return "{…}"
    return str(value)


SCREEN = 80  # the width a refusal is wrapped to: a terminal's, a CI log's


class LockMismatchError(Exception):
    """`-c sagestack:locked=true` and a request differs from config/envs/<env>.lock.json."""

    def __init__(self, env: str, changes: list[str], missing: bool = False) -> None:
        self.env, self.changes = env, changes
        if missing:
            text = (
                f"{env}: -c sagestack:locked=true but config/envs/{env}.lock.json does not exist; write it with "
                f"`sagestack lock --env {env}`"
            )
        else:
            head = f"{env}: -c sagestack:locked=true, and the spec's requests differ from config/envs/{env}.lock.json:"
            lines = [
                *fit(head, SCREEN, hang=""),
                *(line for c in changes for line in fit_nested(c, SCREEN, "  ")),
            ]
            text = "\n".join([*lines, f"Review the change, then `sagestack lock --env {env}` to accept it."])
        super().__init__(text)


class ServingUpdateError(Exception):
    """An update SageMaker would refuse halfway through a deploy (see autoscaled_type_changes)."""

    def __init__(self, env: str, problems: list[str]) -> None:
        self.env, self.problems = env, problems
        super().__init__(
            f"{env}: against config/envs/{env}.lock.json (what was last locked for deployment):\n"
            + "\n".join(f"  ✗ {p}" for p in problems)
        )
