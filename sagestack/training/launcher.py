"""A job under the SDK v3's launch contract (`launcher: drivers`), as ModelTrainer renders it.

ModelTrainer sends only the user's hyperparameters (each as `safe_serialize` writes it: strings
unquoted), two channels of its own (`code`, `sm_drivers`: S3 prefixes, File, FullyReplicated) after
the user's, `/bin/bash -c "… sm_train.sh"` as the container's entry point, and GZIP output
compression. What the drivers run is in the sm_drivers channel (core/drivers.py): torchrun for
`torch_distributed` and SMP v2 (`Torchrun(smp=SMP(...))`), mpirun for `mpi`, the script alone
otherwise. The toolkit-only kinds (SMDDP, SMP v1, the TensorFlow strategies) have no driver
(rules_launcher.py says so).
"""

from __future__ import annotations

import shlex
from collections.abc import Collection
from typing import Any

from sagestack.core.drivers import (
    CODE_CHANNEL,
    CONTAINER_ARGUMENTS,
    CONTAINER_ENTRYPOINT,
    DRIVERS_CHANNEL,
    REQUIREMENTS_FILE,
    DriversConfig,
    PackedDrivers,
    pack_drivers,
    safe_serialize,
)
from sagestack.training.context import RequestContext
from sagestack.training.models import JobSpec

# The distribution kinds the SDK v3's drivers launch
DRIVERS_KINDS = ("torch_distributed", "mpi", "smp")


def drivers_config(job: JobSpec, *, requirements: bool) -> DriversConfig:
    """What the job tells the drivers (`requirements`: the code has a requirements.txt, which the
    toolkit would install; under the drivers the SDK installs the file SourceCode names)."""
    common: dict[str, Any] = {
        "entry_script": job.entry_point,
        "source_dir": job.source_dir,
        "requirements": REQUIREMENTS_FILE if requirements else None,
    }
    dist = job.distribution
    if dist is None:
        return DriversConfig(**common)
    if dist.torch_distributed is not None:
        return DriversConfig(**common, driver="torchrun")
    if dist.smp is not None and dist.smp.version == 2:
        return DriversConfig(**common, driver="torchrun", smp=dict(dist.smp.parameters))
    if dist.mpi is not None:
        return DriversConfig(
            **common,
            driver="mpi",
            process_count_per_node=dist.mpi.processes_per_host,
            # ModelTrainer's MPI takes a list (the driver passes it to Popen, no shell): quoting is kept
            mpi_additional_options=tuple(shlex.split(dist.mpi.custom_mpi_options)),
        )
    # rules_launcher refuses the rest (drivers-distribution); the plain script is what would run
    return DriversConfig(**common)


def pack_job_drivers(job: JobSpec, source_files: Collection[str]) -> PackedDrivers:
    """The job's sm_drivers channel (`source_files`: the paths its source archive packs)."""
    return pack_drivers(drivers_config(job, requirements=REQUIREMENTS_FILE in source_files))


def drivers_hyperparameters(job: JobSpec, script_arguments: dict[str, Any]) -> dict[str, str]:
    """The script's arguments as ModelTrainer sends them, and SMP v2's `mp_parameters`."""
    hyperparameters = {k: safe_serialize(v) for k, v in script_arguments.items()}
    dist = job.distribution
    if dist is not None and dist.smp is not None and dist.smp.version == 2:
        mp = drivers_config(job, requirements=False).mp_parameters()
        if mp is not None:
            hyperparameters["mp_parameters"] = mp
    return hyperparameters


def drivers_algorithm(algorithm: dict[str, Any]) -> dict[str, Any]:
    return {
        **algorithm,
        "ContainerEntrypoint": list(CONTAINER_ENTRYPOINT),
        "ContainerArguments": list(CONTAINER_ARGUMENTS),
    }


def drivers_channels(ctx: RequestContext) -> list[dict[str, Any]]:
    """The code and sm_drivers channels, after the user's (ModelTrainer's order)."""
    if ctx.launch_files_s3_uri is None:
        raise ValueError(
            "launcher: drivers needs the job's launch files (RequestContext.launch_files_s3_uri)"
        )
    return [
        {
            "ChannelName": name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": f"{ctx.launch_files_s3_uri}{name}/",
                    "S3DataDistributionType": "FullyReplicated",
                }
            },
            "InputMode": "File",
        }
        for name in (CODE_CHANNEL, DRIVERS_CHANNEL)
    ]
