"""The requests a lock records field by field, and a lock mismatch told as the fields that changed
(as `cdk diff` tells properties) rather than as hashes.

The lock's `requests` section holds each rendered request flattened ("HyperParameters.epochs":
"10"), one field a line, so that a review of the lock reads as a review of the requests; a job's
fields shared by all its candidates are written once. The hashes stay the lock's judge of a
change: a lock written before `requests` existed still matches, and a mismatch against it is told
as hashes, with a hint to re-lock."""

from __future__ import annotations

import json
from typing import Any

from sagestack.project.requests import EnvironmentRequests

SPEC_HASH = "sagestack:spec-hash"


def flatten(value: Any, path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"a": {"b": [1]}} -> {"a.b[0]": 1}; an empty dict or list is a leaf of its own."""
    out = {} if out is None else out
    if isinstance(value, dict) and value:
        for k, v in value.items():
            flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            flatten(v, f"{path}[{i}]", out)
    else:
        out[path] = value
    return out


def request_fields(requests: EnvironmentRequests) -> dict[str, Any]:
    """The lock's `requests` section: each request of the lock's hashed sections, flattened. A
    job: the fields all its candidates share, then each candidate's own (its type, its image)."""
    jobs: dict[str, Any] = {}
    for key, job_plan in requests.jobs.items():
        flat = {c.instance_type: flatten(c.request) for c in job_plan.candidates}
        shared = dict(next(iter(flat.values()), {}))
        for fields in flat.values():
            shared = {p: v for p, v in shared.items() if p in fields and fields[p] == v}
        own = {t: {p: v for p, v in f.items() if p not in shared} for t, f in flat.items()}
        jobs[key] = {"shared": shared, "candidates": own}
    out: dict[str, Any] = {
        "jobs": jobs,
        "tuning": {k: flatten(r) for k, r in requests.tuning.items()},
        "endpoints": {k: {op: flatten(r) for op, r in ops.items()} for k, ops in requests.endpoints.items()},
        "transforms": {
            k: {op: flatten(r) for op, r in ops.items()} for k, ops in requests.transforms.items()
        },
    }
    return {k: v for k, v in out.items() if v}


def _job_fields(section: dict[str, Any] | None, key: str, itype: str) -> dict[str, Any] | None:
    job = ((section or {}).get("jobs") or {}).get(key)
    if job is None or itype not in job.get("candidates", {}):
        return None
    return {**job["shared"], **job["candidates"][itype]}


def fields_at(section: dict[str, Any] | None, *path: str) -> dict[str, Any] | None:
    found: Any = section
    for part in path:
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found if isinstance(found, dict) else None


def _spec_hashes(fields: dict[str, Any]) -> list[str]:
    """The content hashes a request carries (its sagestack:spec-hash tag or metadata)."""
    found = [v for p, v in fields.items() if p.endswith(SPEC_HASH) and isinstance(v, str)]
    for p, v in fields.items():
        if v == SPEC_HASH and p.endswith("Key") and isinstance(fields.get(p[:-3] + "Value"), str):
            found.append(fields[p[:-3] + "Value"])
    return found


def _masked(value: Any, hashes: list[str]) -> Any:
    """A value with the hashes (and the 8-character heads names carry) taken out."""
    if not isinstance(value, str):
        return value
    for h in sorted(hashes, key=len, reverse=True):
        value = value.replace(h, "#").replace(h[:8], "#")
    return value


def _show(value: Any) -> str:
    """A field's value as JSON; a sha256 by its first 12 digits, as the lock's other lines show it."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12]
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def field_changes(
    old: dict[str, Any], new: dict[str, Any], hashes: tuple[list[str], list[str]] = ([], [])
) -> list[str]:
    """'~ path: old → new', '+ path: value', '- path: value' for each field that differs, leaving
    out those whose only change is the content hash (`hashes`: old, new) — names, tags, paths."""
    old_hashes = [*hashes[0], *_spec_hashes(old)]
    new_hashes = [*hashes[1], *_spec_hashes(new)]
    lines = []
    for path in sorted(set(old) | set(new)):
        if path not in new:
            lines.append(f"- {path}: {_show(old[path])}")
        elif path not in old:
            lines.append(f"+ {path}: {_show(new[path])}")
        elif old[path] != new[path] and _masked(old[path], old_hashes) != _masked(new[path], new_hashes):
            lines.append(f"~ {path}: {_show(old[path])} → {_show(new[path])}")
    return lines


def job_changes(
    key: str, old: dict[str, Any], new: dict[str, Any], old_fields: Any, new_fields: Any
) -> list[str] | None:
    """A changed job: its hash, candidates added or gone, and the fields of its requests that
    changed (those every candidate shares once, then each candidate's own). None when the old
    lock has no fields for it."""
    old_c, new_c = old.get("candidates", {}), new.get("candidates", {})
    hashes = ([old["hash"]] if "hash" in old else [], [new["hash"]] if "hash" in new else [])
    per: dict[str, list[str]] = {}
    for itype in [t for t in new_c if t in old_c]:
        before, after = _job_fields(old_fields, key, itype), _job_fields(new_fields, key, itype)
        if before is None or after is None:
            return None
        per[itype] = field_changes(before, after, hashes)
    moved = old.get("hash") != new.get("hash")
    lines = [f"~ jobs.{key}" + (f" (hash {old.get('hash')} → {new.get('hash')})" if moved else "")]
    lines += [f"    + candidate {t}" for t in new_c if t not in old_c]
    lines += [f"    - candidate {t}" for t in old_c if t not in new_c]
    every = [c for c in next(iter(per.values()), []) if all(c in v for v in per.values())]
    lines += [f"    {c}" for c in every]
    for itype, changes in per.items():
        own = [c for c in changes if c not in every]
        if own:
            lines += [f"    {itype}:", *(f"      {c}" for c in own)]
    if len(lines) == 1:
        lines.append("    only the names and tags carrying the hash (it covers the source too)")
    return lines


def entry_changes(label: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[str] | None:
    """A changed request (a search's, an endpoint's or a transform's): its fields that changed, or
    that only its content hash did. None when either side has no fields."""
    if old is None or new is None:
        return None
    changes = field_changes(old, new)
    if changes:
        return [f"~ {label}", *(f"    {c}" for c in changes)]
    before, after = _spec_hashes(old), _spec_hashes(new)
    moved = f" ({before[0]} → {after[0]})" if before and after else ""
    return [f"~ {label}: only the content hash it carries{moved}"]
