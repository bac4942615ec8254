"""`sagestack cluster submit` on an EKS-orchestrated cluster: the job as a HyperPodPyTorchJob for a
team (clusters.pytorch_job), printed as YAML, with the kubectl step that applies it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sagestack.cli.common import EXIT_INVALID_SPEC, UserError, console


def submit_to_eks(
    resolved: Any,
    root: Path,
    job: str,
    cluster: str,
    team: str | None,
    priority: str | None,
    output: Path | None,
    dry_run: bool,
) -> None:
    """The job as a HyperPodPyTorchJob (YAML) for `team`, and the kubectl command that applies it."""
    import yaml  # type: ignore[import-untyped]

    from sagestack.clusters.pytorch_job import hyperpod_pytorch_job, job_config
    from sagestack.project.requests import job_images

    spec = resolved.spec
    c = spec.clusters[cluster]
    if team is None:
        raise UserError(
            f"cluster '{cluster}' is orchestrated by EKS: name a team with --team "
            f"({', '.join(c.teams) or 'none defined'})",
            EXIT_INVALID_SPEC,
        )
    images = job_images(resolved, root, job).concrete
    the_job = spec.jobs[job]
    itype = next((t for t in the_job.instance_type if t in images), the_job.instance_type[0])
    try:
        config = job_config(
            resolved.names, cluster, c, job, the_job, team=team, priority=priority, image=images[itype]
        )
    except ValueError as e:
        raise UserError(f"cluster '{cluster}': {e}", EXIT_INVALID_SPEC) from None
    text = yaml.safe_dump(hyperpod_pytorch_job(config), sort_keys=False, width=10_000)
    if output is not None:
        output.write_text(text)
    else:
        typer.echo(text, nl=False)
    if dry_run:
        return
    target = output.name if output else "job.yaml"
    console(stderr=True).print(
        "# submit, as one of the cluster's admin roles:\n"
        f"#   aws eks update-kubeconfig --name {resolved.names.cluster(cluster)}-eks --region {resolved.region}\n"
        f"#   kubectl apply -f {target}",
        markup=False,
    )
