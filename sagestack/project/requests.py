"""Every request of one environment, rendered with concrete stand-ins for what only a deployment
knows (role, bucket, key, code location) and validated against the service model.

Rendered once per environment, by each feature's renderer, for every consumer: the TrainingStack
hands `render_training`'s validated jobs and searches to its pipelines (which render them again only
with CDK tokens), `sagestack plan` sizes and prices them, `sagestack render` shows them with what
each stand-in stands for, and `sagestack lock` / `-c sagestack:locked=true` hash them. Nothing here
imports aws_cdk or torch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sagestack.core.catalog.images import dlc_framework
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.drivers import DriversUnavailable
from sagestack.core.errors import SpecError, SpecIssue
from sagestack.core.layout import STAND_IN_LAUNCH_FILES
from sagestack.core.names import Names
from sagestack.core.sourcedir import SourceArchive, dockerfile_fingerprint, pack_source_dir
from sagestack.core.standins import SAMPLE_ACCOUNT, STAND_IN_BUCKET
from sagestack.endpoints.hosting_requests import STAND_IN_GENERATED, llm_endpoint_requests, serves_llm
from sagestack.endpoints.request import ModelStepContext, lineage_of, stand_in_model_requests
from sagestack.endpoints.resolved import resolve_endpoint, resolve_transform_registration
from sagestack.llm.optimization_job import resolve_optimizations
from sagestack.llm.optimization_job import stand_in_requests as optimization_requests
from sagestack.project.environment import ResolvedEnvironment
from sagestack.project.work_requests import render_work
from sagestack.training.context import MlflowTarget, stand_in_contexts
from sagestack.training.debugger import rules_image_for
from sagestack.training.launch_contract import launch_contract
from sagestack.training.launch_files import LaunchFiles
from sagestack.training.models import JobSpec
from sagestack.training.rendered import RenderedJob, resolve_training_job
from sagestack.tuning.request import render_tuning_request


def stand_in_deployment(plan: ResolvedEnvironment) -> Deployment:
    """The environment's deployment values as stand-ins (its account when it names one)."""
    return Deployment.stand_ins(
        region=plan.region, account=plan.account, tags=tuple(sorted(plan.tags.items()))
    )


@dataclass(frozen=True)
class JobImages:
    concrete: dict[str, str]  # instance type -> an image URI the service model accepts
    identity: dict[str, str]  # instance type -> what the image is (URI, or dockerfile:<fingerprint>)
    framework: str | None = None  # a DLC's framework (what its container runs); None for other images


def job_images(plan: ResolvedEnvironment, root: Path, key: str) -> JobImages:
    job = plan.spec.jobs[key]
    resolved = plan.images[job.image]
    concrete: dict[str, str] = {}
    identity: dict[str, str] = {}
    build = resolved.spec.dockerfile_spec
    fingerprint = (
        dockerfile_fingerprint(root / build.directory, build.build_args, build.target)
        if build is not None
        else None
    )
    account = stand_in_deployment(plan).account
    for itype in job.instance_type:
        if resolved.kind == "dlc":
            uris = resolved.smp_uris if job.uses_smp_v2 else resolved.dlc_uris
            concrete[itype] = identity[itype] = uris[itype]
        elif resolved.kind == "uri":
            assert resolved.spec.uri is not None
            concrete[itype] = identity[itype] = resolved.spec.uri
        else:
            assert fingerprint is not None
            concrete[itype] = f"{account}.dkr.ecr.{plan.region}.amazonaws.com/cdk-assets:{fingerprint[:64]}"
            identity[itype] = f"dockerfile:{fingerprint}"
    # read from the URI as the constructs' TrainingImage reads it, so both doors render alike
    return JobImages(concrete, identity, dlc_framework(next(iter(concrete.values()), "")))


def mlflow_target(plan: ResolvedEnvironment) -> MlflowTarget | None:
    """The MLflow the environment's jobs log to: the one `tracking.mlflow.server` names, else the
    tracking server or App the foundation creates (its ARN with the account, or the stand-in account)."""
    m = plan.spec.tracking.mlflow
    if m is None:
        return None
    if m.server is not None:
        return MlflowTarget(m.server, plan.names.prefix)
    return MlflowTarget.stand_in(stand_in_deployment(plan), plan.names, app=m.app)


def job_rules_image(plan: ResolvedEnvironment, key: str) -> str | None:
    return rules_image_for(plan.spec.jobs[key], plan.region)


def stand_in_model_context(plan: ResolvedEnvironment) -> ModelStepContext:
    """The compile/register steps' deploy-time values, as concrete stand-ins (for validation)."""

    return ModelStepContext(
        deployment=stand_in_deployment(plan), env=plan.env, group_name=plan.names.model_package_group
    )


@dataclass
class EnvironmentRequests:
    jobs: dict[str, RenderedJob] = field(default_factory=dict)
    tuning: dict[str, dict[str, Any]] = field(default_factory=dict)
    endpoints: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=dict
    )  # key -> operation -> request
    transforms: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=dict
    )  # key -> operation -> request
    # an endpoint serving an LLM or components -> 'CreateModel[ <component>]', 'CreateEndpointConfig',
    # 'CreateInferenceComponent <component>' -> request (what its template creates; not locked)
    llm_endpoints: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # an LLM with optimize: ('chat', or 'chat/<component>') -> operation -> request
    optimizations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    images: dict[str, dict[str, str]] = field(default_factory=dict)  # job -> instance type -> identity
    sources: dict[str, str] = field(default_factory=dict)  # source_dir -> sha256 of sourcedir.tar.gz
    # launcher: drivers — job -> the digest of its launch files (code/jobs/<digest>/: the unpacked
    # code and the pinned sagemaker-train's drivers), which the rendered requests name by a stand-in
    launch_files: dict[str, str] = field(default_factory=dict)
    # what the work beside training holds of the account (project/work_requests.py), which capacity
    # counts: each endpoint the environment runs -> 'CreateEndpointConfig', 'RegisterScalableTarget',
    # 'PutScalingPolicy <name>' -> request (not locked); each cluster -> its CreateCluster
    fleets: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    clusters: dict[str, dict[str, Any]] = field(default_factory=dict)


def render_training(plan: ResolvedEnvironment, root: Path, *, validate: bool = True) -> EnvironmentRequests:
    """Every CreateTrainingJob and CreateHyperParameterTuningJob request of the environment (with
    the images and source archives they name), and what its endpoints, clusters and transforms hold
    of the account (project/work_requests.py: what capacity counts), with stand-ins; validated
    unless told not to. The
    TrainingStack hands these very plans to its pipelines, which render them again only with tokens.
    Rendered once per resolved environment: a validated rendering also serves an unvalidated ask."""
    where = str(root.resolve())
    done = plan.renderings.get((where, True)) or plan.renderings.get((where, validate))
    if done is None:
        done = plan.renderings[(where, validate)] = _render_training(plan, root, validate=validate)
    return done


def _render_training(plan: ResolvedEnvironment, root: Path, *, validate: bool) -> EnvironmentRequests:
    out = EnvironmentRequests()
    deployment = stand_in_deployment(plan)
    mlflow = mlflow_target(plan)
    archives: dict[str, SourceArchive] = {}
    for key, job in plan.spec.jobs.items():
        if job.source_dir not in out.sources:
            archives[job.source_dir] = pack_source_dir(root / job.source_dir)
            out.sources[job.source_dir] = archives[job.source_dir].sha256
        images = job_images(plan, root, key)
        out.images[key] = images.identity
        out.jobs[key], launch_files = render_job(
            plan.names,
            key,
            job,
            archives[job.source_dir],
            deployment=deployment,
            images=images,
            rules_image=job_rules_image(plan, key),
            mlflow=mlflow,
            validate=validate,
        )
        if launch_files is not None:
            out.launch_files[key] = launch_files.digest
    for key, tuning in plan.spec.tuning.items():
        request = render_tuning_request(tuning, key=key, names=plan.names, job_plan=out.jobs[tuning.job])
        if validate:
            validate_request("CreateHyperParameterTuningJob", request)
        out.tuning[key] = request
    work = render_work(plan, deployment, validate=validate)
    out.fleets, out.clusters, out.transforms = work.fleets, work.clusters, work.transforms
    return out


def render_job(
    names: Names,
    key: str,
    job: JobSpec,
    archive: SourceArchive,
    *,
    deployment: Deployment,
    images: JobImages,
    rules_image: str | None,
    mlflow: MlflowTarget | None,
    validate: bool,
) -> tuple[RenderedJob, LaunchFiles | None]:
    """One job's request for each candidate, with its code packed as `archive`, and the launch files
    its contract's channels read (None: the source archive alone), as `deployment` places them: the
    stand-ins (`render_training`), or `Deployment.local(...)`'s values (`sagestack local train`)."""
    try:
        launch_files = launch_contract(job).launch_files(job, archive)
    except DriversUnavailable as e:  # the pinned sagemaker-train missing is the spec's error
        raise SpecError([SpecIssue(str(e), path=("jobs", key, "launcher"))]) from None
    rendered = resolve_training_job(
        names=names,
        key=key,
        job=job,
        source_sha256=archive.sha256,
        image_uris=images.identity,
        context=stand_in_contexts(
            deployment,
            images=images.concrete,
            rules_image=rules_image,
            mlflow=mlflow,
            framework=images.framework,
        ),
        validate=validate,
    )
    return rendered, launch_files


def render_environment(
    plan: ResolvedEnvironment, root: Path, *, validate: bool = True
) -> EnvironmentRequests:
    """Every CreateTrainingJob / CreateHyperParameterTuningJob / CreateCompilationJob /
    CreateModelPackage request of the environment, with stand-ins; validated unless told not to."""

    # The training part is the environment's one rendering; endpoints and transforms join a copy
    # (a transform's jobs rendered there, its model steps here).
    rendered = render_training(plan, root, validate=validate)
    out = replace(
        rendered,
        endpoints={},
        transforms={},
        optimizations={},
        llm_endpoints={},
    )
    ctx = stand_in_model_context(plan)
    for key, spec in plan.spec.endpoints.items():
        if spec.model is None:
            continue
        requests = stand_in_model_requests(
            resolve_endpoint(plan, key), replace(ctx, lineage=source_lineage(plan, out, spec.model.from_))
        )
        if validate:
            for operation, request in requests.items():
                validate_request(operation, request)
        out.endpoints[key] = requests

    for key, transform in plan.spec.transforms.items():
        requests = rendered.transforms[key]
        if transform.model is not None:
            registration = resolve_transform_registration(plan, key)
            lineage = source_lineage(plan, out, transform.model.from_)
            steps = stand_in_model_requests(registration, replace(ctx, lineage=lineage))
            if validate:
                for operation, request in steps.items():
                    validate_request(operation.split(" ")[0], request)
            requests = {**steps, **requests}
        out.transforms[key] = requests

    for key, spec in plan.spec.endpoints.items():
        if not serves_llm(spec):
            continue
        served = llm_endpoint_requests(
            key, spec, endpoint_name=plan.names.endpoint(key), deployment=ctx.deployment
        )
        if validate:
            for operation, request in served.items():
                validate_request(operation.split(" ")[0], request)
        out.llm_endpoints[key] = served

    for o in resolve_optimizations(plan.names, plan.spec.endpoints):
        requests = optimization_requests(o, ctx.deployment, env=plan.env, group=ctx.group_name)
        if validate:
            for operation, request in requests.items():
                validate_request(operation, request)
        out.optimizations[o.label] = requests
    return out


def source_lineage(
    plan: ResolvedEnvironment, out: EnvironmentRequests, source: str
) -> tuple[tuple[str, str], ...]:
    """The lineage a package registered from `source` (a job, or a search over one) carries."""

    job = plan.spec.job_of(source)
    lineage = lineage_of(job, out.jobs[job].digest, out.sources[plan.spec.jobs[job].source_dir])
    return (*lineage, ("sagestack:tuning", source)) if source in plan.spec.tuning else lineage


# What a rendered request holds in place of a value only the deployment (or the run) knows.
STAND_INS = {
    STAND_IN_BUCKET: "the environment's artifact bucket (FoundationStack; named by CloudFormation)",
    "role/sagestack-validation": "the execution role (FoundationStack)",
    "key/00000000-0000-0000-0000-000000000000": "the project KMS key (FoundationStack)",
    "code/sourcedir.tar.gz": "the source archive's asset location (its sha256 is in the lock)",
    f"code/jobs/{STAND_IN_LAUNCH_FILES}/": "the job's launch files prefix (launcher: drivers: its code "
    "and the SDK's drivers, unpacked), content-addressed at synth (its digest is in the lock)",
    "cdk-assets:": "the Dockerfile image's asset URI (built and pushed by cdk deploy)",
    "sagestack-validation-job": "the training job the pipeline ran",
    "reported-by-the-training-job": "the training job's image (DescribeTrainingJob)",
    "reported-by-neo": "the inference image the compilation job reports",
    "0" * 32: "the content hash the pipeline computes at run time (States.Hash of the artifact)",
    STAND_IN_GENERATED: "a name CloudFormation generates (a model, an endpoint config, an async "
    "topic): no explicit name, so a change replaces the resource",
}
# Stand-ins whose text depends on the entry (shown as they appear in the request).
STAND_IN_PATTERNS = {
    re.compile(rf"s3://{STAND_IN_BUCKET}/models/compiled/[^\"]+\.tar\.gz"): "the compiled model "
    "SageMaker Neo writes (<S3OutputLocation><model>-<target>.tar.gz); the pipeline reads it from "
    "DescribeCompilationJob's ModelArtifacts.S3ModelArtifacts",
    re.compile(rf"s3://{STAND_IN_BUCKET}/output/[^\"]+/output/model\.tar\.gz"): "the trained model "
    "the training job wrote (DescribeTrainingJob's ModelArtifacts.S3ModelArtifacts)",
}


@dataclass(frozen=True)
class ShownRequest:
    operation: str
    label: str
    request: dict[str, Any]
    stand_ins: dict[str, str]  # marker -> what it stands for


def _stand_ins(plan: ResolvedEnvironment, request: dict[str, Any]) -> dict[str, str]:
    text = json.dumps(request)
    found = {marker: what for marker, what in STAND_INS.items() if marker in text}
    for pattern, what in STAND_IN_PATTERNS.items():
        found.update({m: what for m in sorted(set(pattern.findall(text)))})
    if plan.account is None and SAMPLE_ACCOUNT in text:
        found[SAMPLE_ACCOUNT] = "the deploying account (the environment names none)"
    return found


def _llm_endpoint_requests(out: EnvironmentRequests, name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """An LLM endpoint's requests ('chat'), or one component's model and component ('chat/chat')."""
    key, _, component = name.partition("/")
    if key not in out.llm_endpoints:
        return []
    found = []
    for op, request in out.llm_endpoints[key].items():
        operation, _, part = op.partition(" ")
        if component and part != component:
            continue
        found.append((operation, f"{key}/{part}" if part else key, request))
    return found


def _fleet_requests(
    out: EnvironmentRequests, name: str, shown: set[str]
) -> list[tuple[str, str, dict[str, Any]]]:
    """An endpoint's fleet — its config (unless shown already, as an LLM endpoint's is) and its
    autoscaling's requests — after its own."""
    return [
        (op.split(" ")[0], op.partition(" ")[2] or name, request)
        for op, request in out.fleets.get(name, {}).items()
        if op not in shown
    ]


def renderable_names(out: EnvironmentRequests) -> list[str]:
    """Every name `render` takes: jobs, searches, endpoints (an LLM endpoint's components as
    '<endpoint>/<component>'), transforms, clusters, and each LLM optimized."""
    names = [*out.jobs, *out.tuning, *out.endpoints, *out.fleets, *out.transforms, *out.clusters]
    for key, ops in out.llm_endpoints.items():
        names.append(key)
        names += [f"{key}/{op.split(' ', 1)[1]}" for op in ops if op.startswith("CreateInferenceComponent ")]
    names += [label.split("/")[0] for label in out.optimizations] + list(out.optimizations)
    return list(dict.fromkeys(names))


def requests_named(
    plan: ResolvedEnvironment, out: EnvironmentRequests, name: str, candidate: int | None = None
) -> list[ShownRequest]:
    """The request(s) a job (each candidate, or one), a search or an endpoint's model steps send.
    KeyError: no such entry; IndexError: no such candidate."""
    shown: list[tuple[str, str, dict[str, Any]]] = []
    if name in out.jobs and out.jobs[name].preferred is not None and candidate is None:
        preferred = out.jobs[name].preferred
        assert preferred is not None
        shown.append(("CreateTrainingJob", out.jobs[name].launch_path, preferred.request))
    elif name in out.jobs:
        candidates = out.jobs[name].candidates
        if candidate is not None:
            if not 0 <= candidate < len(candidates):
                raise IndexError(f"job '{name}' has candidates 0..{len(candidates) - 1}; got {candidate}")
            candidates = (candidates[candidate],)
        for c in candidates:
            shown.append(("CreateTrainingJob", f"candidate {c.index}: {c.instance_type}", c.request))
    elif name in out.tuning:
        shown.append(("CreateHyperParameterTuningJob", name, out.tuning[name]))
    elif name in out.endpoints:
        shown += [(op, name, request) for op, request in out.endpoints[name].items()]
    elif name in out.transforms:
        shown += [(op.split(" ")[0], op, request) for op, request in out.transforms[name].items()]
    shown += _llm_endpoint_requests(out, name)
    shown += _fleet_requests(out, name, {op for op, _, _ in shown})
    if name in out.clusters:
        shown.append(("CreateCluster", name, out.clusters[name]))
    optimized = [label for label in out.optimizations if name in (label, label.split("/")[0])]
    for label in optimized:  # an endpoint's optimization jobs, after its model steps
        shown += [(op, f"optimize {label}", request) for op, request in out.optimizations[label].items()]
    if not shown:
        raise KeyError(name)
    return [ShownRequest(op, label, req, _stand_ins(plan, req)) for op, label, req in shown]
