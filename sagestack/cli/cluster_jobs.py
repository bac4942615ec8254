"""`sagestack cluster submit` on an EKS-orchestrated cluster: the job as a HyperPodPyTorchJob for a
team (clusters.pytorch_job), printed as YAML, and applied to the cluster with kubectl (ops/kube.py:
a kubeconfig of the run's own from EKS and STS); `--dry-run` prints it only."""

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
    _apply(resolved, cluster, text)


def _apply(resolved: Any, cluster: str, manifest: str) -> None:
    """Apply the object to the cluster's EKS control plane with this run's credentials (a
    kubeconfig of its own); without kubectl or credentials, say exactly how to do it by hand."""
    import boto3

    from sagestack.cli.aws import aws_errors
    from sagestack.ops.kube import NoKubectl, apply, kubeconfig, token

    eks_cluster = resolved.names.eks_cluster(cluster)
    by_hand = (
        f"aws eks update-kubeconfig --name {eks_cluster} --region {resolved.region} && kubectl apply -f job.yaml"
        " (the object above, saved as job.yaml: --output job.yaml --dry-run)"
    )
    session = boto3.Session(region_name=resolved.region)
    if session.get_credentials() is None:
        raise UserError(f"no AWS credentials to reach {eks_cluster}: {by_hand}")
    with aws_errors(resolved.region):
        config = kubeconfig(session.client("eks"), eks_cluster, token(session, eks_cluster, resolved.region))
    try:
        done = apply(manifest, config)
    except NoKubectl:
        raise UserError(f"kubectl is not on the PATH (install it to submit): {by_hand}") from None
    if done.returncode != 0:
        raise UserError(
            f"kubectl apply on {eks_cluster} failed: {done.stderr.strip() or done.stdout.strip()}"
        )
    console(stderr=True).print(f"{done.stdout.strip()} (on {eks_cluster})", markup=False)
