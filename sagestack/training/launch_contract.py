"""Which launch contract a job's container starts under, asked in one place (`launch_contract`), and
what differs between the two; every other module asks the job's contract, none reads `launcher:`.

- toolkit (the default; the SageMaker SDK v2's script mode): AWS's training toolkit, inside the Deep
  Learning Containers, reads the program and the source archive from the hyperparameters
  (`sagemaker_program`, `sagemaker_submit_directory`, the distribution's keys: training/request.py),
  every value JSON-encoded; so the image must carry sagemaker-training.
- drivers (the SDK v3's ModelTrainer; training/launcher.py): `/bin/bash -c "… sm_train.sh"` as the
  container's entry point, the script's arguments as `safe_serialize` writes them, the `code` and
  `sm_drivers` channels after the user's (the job's launch files, training/launch_files.py, uploaded
  by the constructs and laid out by the local run), GZIP output; any image with Python. A tuning
  job's trials keep the toolkit contract (the tuning API has no ContainerEntrypoint), and the pinned
  SDK's drivers are part of what the job computes (its content hash).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from sagestack.core.drivers import SDK_DISTRIBUTION, SDK_VERSION
from sagestack.core.sourcedir import SourceArchive
from sagestack.training.context import RequestContext
from sagestack.training.launch_files import LaunchFiles, job_launch_files
from sagestack.training.launcher import drivers_algorithm, drivers_channels, drivers_hyperparameters
from sagestack.training.models import JobSpec


class LaunchContract:
    """The toolkit contract's answers; DriversContract gives the drivers' where they differ."""

    name: ClassVar[str] = "toolkit"  # the spec's `launcher:` value
    # the image must carry sagemaker-training (a DLC, an image built FROM one, or one that installs it)
    image_needs_toolkit: ClassVar[bool] = True
    # the hyperparameters carry the SDK v2's own keys (sagemaker_program, …, the distribution's)
    sends_sdk_keys: ClassVar[bool] = True
    # the SDK's drivers run the script (sm_train.sh and the sm_drivers channel)
    runs_sdk_drivers: ClassVar[bool] = False
    # CloudFormation resources a job's pipeline adds for the contract (the launch files' upload)
    pipeline_resources: ClassVar[int] = 0

    def hyperparameters(self, job: JobSpec, arguments: dict[str, Any]) -> dict[str, str]:
        """The script's arguments as the contract's SDK sends them (the SDK v2: each JSON-encoded, as
        request.encode_hyperparameter), with the contract's own keys that depend on the spec alone."""
        return {k: json.dumps(v) for k, v in arguments.items()}

    def algorithm(self, algorithm: dict[str, Any]) -> dict[str, Any]:
        """The AlgorithmSpecification, with what the contract starts the container with."""
        return algorithm

    def channels(self, ctx: RequestContext) -> list[dict[str, Any]]:
        """The channels the contract adds after the user's."""
        return []

    def output(self, output: dict[str, Any]) -> dict[str, Any]:
        """The OutputDataConfig, with the contract's compression."""
        return output

    def launch_files(self, job: JobSpec, archive: SourceArchive) -> LaunchFiles | None:
        """The files the contract's channels read (`archive`: the job's code); None: the source
        archive alone, which the hyperparameters name."""
        return None

    def identity(self) -> dict[str, str]:
        """What the job's content hash covers beyond its spec, code and images."""
        return {}

    def trial_job(self, job: JobSpec) -> JobSpec | None:
        """The job a tuning job's trials run when it is not `job` itself."""
        return None


class DriversContract(LaunchContract):
    """`launcher: drivers`: the SDK v3's ModelTrainer contract."""

    name: ClassVar[str] = "drivers"
    image_needs_toolkit: ClassVar[bool] = False
    sends_sdk_keys: ClassVar[bool] = False
    runs_sdk_drivers: ClassVar[bool] = True
    pipeline_resources: ClassVar[int] = 1

    def hyperparameters(self, job: JobSpec, arguments: dict[str, Any]) -> dict[str, str]:
        return drivers_hyperparameters(job, arguments)

    def algorithm(self, algorithm: dict[str, Any]) -> dict[str, Any]:
        return drivers_algorithm(algorithm)

    def channels(self, ctx: RequestContext) -> list[dict[str, Any]]:
        return drivers_channels(ctx)

    def output(self, output: dict[str, Any]) -> dict[str, Any]:
        return {**output, "CompressionType": "GZIP"}  # ModelTrainer's OutputDataConfig default

    def launch_files(self, job: JobSpec, archive: SourceArchive) -> LaunchFiles | None:
        return job_launch_files(job, archive)

    def identity(self) -> dict[str, str]:
        # what runs is also the pinned SDK's drivers (the rest of sm_drivers follows from the spec and code)
        return {"drivers": f"{SDK_DISTRIBUTION}=={SDK_VERSION}"}

    def trial_job(self, job: JobSpec) -> JobSpec | None:
        # CreateHyperParameterTuningJob has no ContainerEntrypoint (the SDK v3's tuner does the same)
        return job.model_copy(update={"launcher": LaunchContract.name})


CONTRACTS: dict[str, LaunchContract] = {c.name: c for c in (LaunchContract(), DriversContract())}


def launch_contract(job: JobSpec) -> LaunchContract:
    """The contract the job's container starts under: the one place that reads `launcher:`."""
    return CONTRACTS[job.launcher]
