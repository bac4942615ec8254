"""A job's identity: the content hash in its name (spec + code + images).

Job names are published: a job already run is found again by its name, and an unchanged spec never
starts a second job. So a model's identity is the set of field names it had when names were
published (`PUBLISHED`), each hashed as it is; any field added since enters the hash only when its
value differs from its default, at every depth. Adding an optional field to the spec language then
renames no job unless a spec sets it, by construction rather than by a list to remember.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from sagestack.core.model import VpcSpec
from sagestack.training import models as m


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


PUBLISHED: Registry = {
    m.JobSpec: published(
        "image",
        "source_dir",
        "entry_point",
        "instance_type",
        "instance_count",
        "volume_size_gb",
        "volume_kms",
        "max_run",
        "input_mode",
        "channels",
        "distribution",
        "use_spot_instances",
        "max_wait",
        "checkpoint",
        "hyperparameters",
        "metric_definitions",
        "debugger",
        "profiler",
        "tensorboard",
        "environment",
        "efa",
        "vpc",
        "network_isolation",
        "encrypt_inter_container_traffic",
        "retry_attempts",
        "keep_alive",
        "run_on_deploy",
        "tags",
        "sizing",
        # The key was first named `model`.
        hashed_as={"sizing": "model"},
        # When a job retrains is not what it computes: a schedule renames nothing.
        not_identity=("schedule",),
    ),
    m.ChannelSpec: published(
        "file_system", "s3_uri", "key_prefix", "local_path", "input_mode", "content_type", "distribution"
    ),
    m.FileSystemSpec: published("id", "type", "directory_path", "access_mode"),
    m.Distribution: published("torch_distributed", "smddp", "mpi", "smp"),
    m.TorchDistributed: published(),
    m.SmddpDistribution: published("custom_mpi_options"),
    m.MpiDistribution: published("processes_per_host", "custom_mpi_options"),
    m.SmpDistribution: published("version", "parameters", "processes_per_host", "custom_mpi_options"),
    m.CheckpointSpec: published("every_steps", "keep_last", "local_path"),
    m.DebuggerSpec: published("rules", "stop_on_issue", "hook"),
    m.DebuggerRuleSpec: published("rule", "parameters", "stop_training", "email", "sms"),
    m.DebuggerHookSpec: published("parameters", "collections"),
    m.ProfilerSpec: published("system_interval_ms", "framework", "dataloader", "python", "rules"),
    m.FrameworkProfiling: published("start_step", "num_steps"),
    m.DataloaderProfiling: published("start_step", "num_steps", "metrics_regex"),
    m.PythonProfiling: published("start_step", "num_steps", "profiler", "cprofile_timer"),
    VpcSpec: published("subnets", "security_groups", "egress"),
    m.ModelSizing: published("parameters", "precision", "optimizer"),
}


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


def job_hash(job: m.JobSpec, *, env: str, source_sha256: str, image_uris: dict[str, str]) -> str:
    """Content address of a job: its spec's identity, its code and its images. 10 hex characters."""
    payload = {"job": identity(job, PUBLISHED), "env": env, "source": source_sha256, "images": image_uris}
    return content_hash(payload)[:10]
