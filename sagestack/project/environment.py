"""Resolution of a spec for one environment: names, images and everything derived once, so that
the stacks, `sagestack plan` and the local runner all consume the same decisions."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sagestack.core.catalog.images import dlc_image_uri, smp_image_uri
from sagestack.core.names import Names
from sagestack.foundation.models import ImageSpec
from sagestack.project.loader import EnvironmentFiles, LoadedSpec
from sagestack.project.models import ProjectSpec


@dataclass(frozen=True)
class ResolvedImage:
    name: str
    spec: ImageSpec
    # dlc: one URI per instance type that uses it (cpu / gpu / neuronx builds differ)
    dlc_uris: dict[str, str] = field(default_factory=dict)
    # dlc used by SMP v2 jobs: the SMP container of the same PyTorch version, per instance type
    smp_uris: dict[str, str] = field(default_factory=dict)

    @property
    def all_uris(self) -> list[str]:
        return sorted(set(self.dlc_uris.values()) | set(self.smp_uris.values()))

    @property
    def kind(self) -> str:
        if self.spec.dlc is not None:
            return "dlc"
        return "dockerfile" if self.spec.dockerfile is not None else "uri"


@dataclass(frozen=True)
class ResolvedEnvironment:
    spec: ProjectSpec
    env: str
    images: dict[str, ResolvedImage]
    # The environment's lock and quota snapshot, read with its spec: what the synth checks, the
    # pipelines' run-time quota codes and the lineage its packages record come from here.
    files: EnvironmentFiles = field(default_factory=EnvironmentFiles)
    # Its requests, rendered once (project.requests.render_training): a synth's lock check and its
    # TrainingStack read the same rendering. Not part of what the environment is.
    renderings: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def project(self) -> str:
        return self.spec.project

    @property
    def region(self) -> str:
        return self.spec.region

    @property
    def account(self) -> str | None:
        return self.spec.account

    @property
    def retain_data(self) -> bool:
        return self.spec.retain_data

    @cached_property
    def names(self) -> Names:
        """Every physical name of this environment (sagestack.core.names); built once, as the spec
        and the environment it is made of do not change."""
        return Names(self.spec.project, self.env)

    @property
    def tags(self) -> dict[str, str]:
        """The spec's tags and the environment's own (`Names.tags`, which IAM conditions name)."""
        return {**self.spec.tags, **self.names.tags}


def resolve_environment(loaded: LoadedSpec) -> ResolvedEnvironment:
    """Resolve images (DLC URIs per instance type that uses them) for one loaded environment."""

    if loaded.env is None:
        raise ValueError("resolve_environment needs a spec loaded for an environment")
    spec = loaded.spec
    users: dict[str, list[str]] = {}
    smp_users: dict[str, list[str]] = {}
    for job in spec.jobs.values():
        bucket = smp_users if job.uses_smp_v2 else users
        for itype in job.instance_type:
            if itype not in bucket.setdefault(job.image, []):
                bucket[job.image].append(itype)
    images: dict[str, ResolvedImage] = {}
    for name, image in spec.images.items():
        uris: dict[str, str] = {}
        smp: dict[str, str] = {}
        if image.dlc is not None:
            dlc = image.dlc
            for itype in users.get(name, []):
                uris[itype] = dlc_image_uri(
                    dlc.framework, dlc.version, dlc.py_version, region=spec.region, instance_type=itype
                )
            for itype in smp_users.get(name, []):
                smp[itype] = smp_image_uri(
                    dlc.version, dlc.py_version, region=spec.region, instance_type=itype
                )
        images[name] = ResolvedImage(name=name, spec=image, dlc_uris=uris, smp_uris=smp)
    return ResolvedEnvironment(spec=spec, env=loaded.env, images=images, files=loaded.files)
