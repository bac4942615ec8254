"""A job resolved for one environment: its content hash, each instance candidate's request, and how
the pipeline gets capacity (one job with InstancePreferences, or its own candidate loop)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.quotas import quota_name, training_usage
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.names import Names
from sagestack.training.candidates import RenderedCandidate
from sagestack.training.context import RequestContext
from sagestack.training.identity import job_hash
from sagestack.training.launch_contract import launch_contract
from sagestack.training.models import JobSpec
from sagestack.training.preferences import PreferredJob, preference_refusal, preferred_job
from sagestack.training.request import processes_per_host, render_training_request


@dataclass(frozen=True)
class RenderedJob:
    key: str
    job: JobSpec
    digest: str
    candidates: tuple[RenderedCandidate, ...]
    # One job with ResourceConfig.InstancePreferences (SageMaker picks the first candidate with
    # capacity), when the candidates' requests differ in nothing else; else the pipeline's own loop.
    preferred: PreferredJob | None = None
    loop_reason: str | None = None  # why the candidates keep the pipeline's loop
    # launcher: drivers — the first candidate under the toolkit contract, which a tuning job's trials
    # run: the tuning API has no ContainerEntrypoint (the SDK v3's tuner does the same)
    toolkit_request: dict[str, Any] | None = None

    @property
    def tuning_base(self) -> dict[str, Any]:
        """The request a tuning job's training definition is made from."""
        return self.toolkit_request or self.candidates[0].request

    @property
    def launch_path(self) -> str:
        """How the pipeline gets capacity, in a line (`plan` and `render` show it)."""
        return f"{self.launch_kind}: {self.launch_detail}"

    @property
    def launch_kind(self) -> str:
        return "InstancePreferences" if self.preferred is not None else "candidate loop"

    @property
    def launch_detail(self) -> str:
        if self.preferred is not None:
            return "one job; SageMaker launches the first candidate with capacity"
        return self.loop_reason or ""


def resolve_training_job(
    *,
    names: Names,
    key: str,
    job: JobSpec,
    source_sha256: str,
    image_uris: dict[str, str],
    context: Callable[[str], RequestContext],
    validate: bool = True,
) -> RenderedJob:
    """Every candidate's request, `context` giving each candidate's. With validate=True each one is
    checked against botocore's SageMaker model (pass a context of concrete values, e.g.
    training.context.stand_in_contexts: CloudFormation tokens are not ARNs)."""

    digest = job_hash(job, env=names.env, source_sha256=source_sha256, image_uris=image_uris)
    candidates = []
    for i, itype in enumerate(job.instance_type):
        name = names.training_job(key, digest, i)
        request = render_training_request(
            job, job_key=key, candidate=itype, name=name, digest=digest, ctx=context(itype)
        )
        if validate:
            validate_request("CreateTrainingJob", request)
        candidates.append(
            RenderedCandidate(
                index=i,
                instance_type=itype,
                name=name,
                request=request,
                processes_per_host=processes_per_host(job, itype),
                quota_name=quota_name(itype, training_usage(job.use_spot_instances)),
            )
        )
    toolkit_request = None
    trial_job = launch_contract(job).trial_job(job)
    if trial_job is not None:
        itype = job.instance_type[0]
        toolkit_request = render_training_request(
            trial_job,
            job_key=key,
            candidate=itype,
            name=candidates[0].name,
            digest=digest,
            ctx=context(itype),
        )
    refusal = preference_refusal(job, candidates)
    preferred = None
    if refusal is None:
        preferred = preferred_job(names, key, digest, candidates)
        if validate:
            validate_request("CreateTrainingJob", preferred.request)
    return RenderedJob(
        key=key,
        job=job,
        digest=digest,
        candidates=tuple(candidates),
        preferred=preferred,
        loop_reason=refusal,
        toolkit_request=toolkit_request,
    )
