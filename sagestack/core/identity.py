"""A model's identity: the content hash in the names of what it computes.

Names are published: a job already run is found again by its name, and an unchanged spec never
starts a second one. So a model's identity is the set of field names it had when names were
published (a `Registry` of `Published` records), each hashed as it is; any field added since enters
the hash only when its value differs from its default, at every depth. Adding an optional field to
the spec language then renames nothing unless a spec sets it, by construction rather than by a list
to remember.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Published:
    """A model's fields as they were when names hashed from it were published."""

    fields: frozenset[str]
    # A renamed field keeps the name it was published under, and so every name hashed from it.
    hashed_as: Mapping[str, str] = field(default_factory=dict)
    # Fields that say when or how, not what is computed: never in the identity.
    not_identity: frozenset[str] = frozenset()


Registry = Mapping[type[BaseModel], Published]


def published(
    *names: str, hashed_as: Mapping[str, str] | None = None, not_identity: tuple[str, ...] = ()
) -> Published:
    return Published(frozenset(names), dict(hashed_as or {}), frozenset(not_identity))


def identity(model: BaseModel, registry: Registry) -> dict[str, Any]:
    """The part of `model` that names what it computes, as JSON values (see the module's docstring).
    A model the registry does not know (one added after publication) hashes only what is set."""
    return _model_identity(model, model.model_dump(mode="json"), registry)


def _model_identity(model: BaseModel, dumped: dict[str, Any], registry: Registry) -> dict[str, Any]:
    # A subclass (a model extended since) is held to what its published ancestor had.
    record = next((registry[c] for c in type(model).__mro__ if c in registry), None)
    fields = record.fields if record is not None else frozenset()
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        if record is not None and name in record.not_identity:
            continue
        value = getattr(model, name)
        if (
            name not in fields
            and not info.is_required()
            and value == info.get_default(call_default_factory=True)
        ):
            continue
        key = record.hashed_as.get(name, name) if record is not None else name
        out[key] = _value_identity(value, dumped[name], registry)
    return out


def _value_identity(value: Any, dumped: Any, registry: Registry) -> Any:
    if isinstance(value, BaseModel):
        return _model_identity(value, dumped, registry)
    if isinstance(value, dict):
        return {
            key: _value_identity(v, d, registry)
            for v, (key, d) in zip(value.values(), dumped.items(), strict=True)
        }
    if isinstance(value, list | tuple):
        return [_value_identity(v, d, registry) for v, d in zip(value, dumped, strict=True)]
    return dumped


def content_hash(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()
