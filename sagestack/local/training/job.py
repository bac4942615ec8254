"""A local training job: what it is asked to do (LocalTrainOptions) and the request it runs
(LocalRequest); the error that stops a run (LocalRunError) is local/errors.py's, shared with the sandbox.

The request is rendered here and nowhere else in the local emulation, by the renderer every
environment's requests are rendered by (project.requests.render_job) with the local deployment's
values (core.Deployment.local): the request `render` shows with stand-ins is the request a local run
runs, with local values. Fields of the request the platform alone acts on (spot, warm pools, training
plans, InfraCheckConfig's health checks) change nothing here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.core.sourcedir import pack_source_dir
from sagestack.local.errors import LocalRunError
from sagestack.project.loader import LoadedSpec
from sagestack.project.requests import JobImages, render_job

LOCAL_IMAGE = "local"  # the image (and the rule evaluator's image) is this machine's environment


@dataclass(frozen=True)
class LocalTrainOptions:
    hosts: int = 1
    procs: int = 1
    interrupt_at: int | None = None
    workdir: Path | None = None
    fresh: bool = (
        False  # remove an earlier run's entries from a folder sagestack made (local/training/rundir.py)
    )
    overrides: dict[str, Any] = field(default_factory=dict)  # hyperparameters, as the spec would set them
    threads: int | None = None  # per process; default: this machine's cores shared by every process
    install_requirements: bool = False  # pip install -r requirements.txt here, as the container does
    tracking: bool = True  # with tracking.mlflow: log to the local MLflow store
    tracking_tags: dict[str, str] = field(default_factory=dict)  # set on the run (e.g. the tuning trial)
    # a tuning trial: the objective's metric, which SageMaker adds to each trial's hyperparameters as
    # `_tuning_objective_metric` (the toolkit keeps it from the script; TensorFlow's moves model_dir)
    tuning_objective: str | None = None


@dataclass(frozen=True)
class LocalRequest:
    """The first candidate's CreateTrainingJob request, with what rendered it."""

    request: dict[str, Any]
    digest: str  # the job's content hash
    archive: bytes  # sourcedir.tar.gz, as the request's code location holds it
    deployment: Deployment  # the local values the request was rendered with
    framework: str | None = None  # the container the job's image runs (tensorflow, pytorch), if a DLC
    # the drivers contract (a request with ContainerEntrypoint): the sm_drivers channel's files,
    # relative path -> bytes (core.drivers' PackedDrivers.files)
    drivers: dict[str, bytes] | None = None

    @property
    def job_name(self) -> str:
        return str(self.request["TrainingJobName"])

    @property
    def job_arn(self) -> str:
        d = self.deployment
        return f"arn:aws:sagemaker:{d.region}:{d.account}:training-job/{self.job_name}"


def local_training_request(
    loaded: LoadedSpec, job_key: str, overrides: dict[str, Any], *, tuning_objective: str | None = None
) -> LocalRequest:
    """The job's request rendered as for the cloud, with the local deployment's values and
    hyperparameter overrides applied the way the spec would set them; a tuning trial's request
    carries the objective as SageMaker adds it (`_tuning_objective_metric`, not JSON-encoded)."""
    spec = loaded.spec
    if job_key not in spec.jobs:
        raise LocalRunError(f"no job '{job_key}' (jobs: {', '.join(spec.jobs) or 'none'})")
    job = spec.jobs[job_key]
    if overrides:
        job = job.model_copy(update={"hyperparameters": {**job.hyperparameters, **overrides}})
    archive = pack_source_dir(loaded.root / job.source_dir)
    deployment = Deployment.local(region=spec.region)
    framework = image_framework(loaded, job.image)
    # the image is this machine's environment; the job's hash names no image (`image_uris` {})
    images = JobImages(dict.fromkeys(job.instance_type, LOCAL_IMAGE), {}, framework)
    plan, launch_files = render_job(
        Names(spec.project, loaded.env or "local"),
        job_key,
        job,
        archive,
        deployment=deployment,
        images=images,
        rules_image=LOCAL_IMAGE,
        mlflow=None,
        validate=False,
    )
    request = plan.candidates[0].request
    # the sm_drivers channel's files, when the contract's launch files carry them
    drivers = None if launch_files is None else launch_files.drivers.files
    if tuning_objective is not None:
        # a trial's request, as the tuning job's definition is made from it (under launcher: drivers,
        # the toolkit contract: the tuning API has no ContainerEntrypoint), with the objective added
        base = plan.tuning_base
        request = {
            **base,
            "HyperParameters": {**base["HyperParameters"], "_tuning_objective_metric": tuning_objective},
        }
        drivers = None
    return LocalRequest(request, plan.digest, archive.data, deployment, framework, drivers)


def image_framework(loaded: LoadedSpec, image: str) -> str | None:
    """The framework container an image key of the spec runs locally: a DLC's (Hugging Face's
    training DLCs run PyTorch); None for a team's own image, which the PyTorch contract serves."""
    spec = loaded.spec.images.get(image)
    if spec is None or spec.dlc is None:
        return None
    return "pytorch" if spec.dlc.framework == "huggingface" else spec.dlc.framework
