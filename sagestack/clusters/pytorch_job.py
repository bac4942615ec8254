"""A job of the spec as the HyperPod training operator's HyperPodPyTorchJob on an EKS-orchestrated
cluster, for one team: the configuration AWS's `hyperpod-pytorch-job-template` (v1.1) describes, and
the Kubernetes object its template renders from it. The job runs the training container's own image
with its entry point and hyperparameters (the toolkit's arguments), one pod per instance, in the
team's task-governance namespace and queue, at the priority class asked for."""

from __future__ import annotations

from typing import Any

from sagestack.clusters.models import ClusterSpec
from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.contract import to_cmd_args
from sagestack.core.names import Names
from sagestack.training.models import JobSpec
from sagestack.training.request import script_arguments

API_VERSION = "sagemaker.amazonaws.com/v1"


def team_namespace(team: str) -> str:
    """The namespace task governance makes for a team's compute quota."""
    return f"hyperpod-ns-{team}"


def team_queue(team: str) -> str:
    """The Kueue LocalQueue task governance makes in a team's namespace."""
    return f"hyperpod-ns-{team}-localqueue"


def priority_class(name: str) -> str:
    """The Kueue WorkloadPriorityClass task governance makes for a cluster policy's priority class."""
    return f"{name}-priority"


def job_config(
    names: Names,
    cluster_key: str,
    spec: ClusterSpec,
    job_key: str,
    job: JobSpec,
    *,
    team: str,
    priority: str | None,
    image: str,
) -> dict[str, Any]:
    """The job as hyperpod-pytorch-job-template's configuration (its schema's keys). ValueError when
    the cluster is not EKS's, the team or priority class is not the cluster's, or no group has the
    job's instance type."""
    if spec.orchestrator != "eks":
        raise ValueError("a HyperPodPyTorchJob needs an EKS-orchestrated cluster (this one is Slurm's)")
    if team not in spec.teams:
        raise ValueError(f"no team '{team}' (teams: {', '.join(spec.teams) or 'none'})")
    if priority is not None and priority not in spec.priority_classes:
        raise ValueError(
            f"no priority class '{priority}' (priority_classes: {', '.join(spec.priority_classes) or 'none'})"
        )
    itype = next(
        (t for t in job.instance_type if any(g.instance_type == t for g in spec.instance_groups.values())),
        None,
    )
    if itype is None:
        raise ValueError(f"no instance group of {' or '.join(job.instance_type)}, the job's instance type")
    try:  # processes per host: its GPUs or Neuron cores, else 1 (a CPU type: the pod asks for no device)
        per_node = catalog_instance(itype).accelerators_per_host
        devices = device_request(itype)[1]
    except (KeyError, ValueError):
        per_node, devices = 0, 0
    config: dict[str, Any] = {
        "job_name": f"{names.prefix}-{job_key}"[:63].rstrip("-"),
        "image": image,
        "namespace": team_namespace(team),
        "queue_name": team_queue(team),
        "command": ["hyperpodrun", f"--nnodes={job.instance_count}", f"--nproc-per-node={max(1, per_node)}"],
        "args": [job.entry_point, *to_cmd_args(script_arguments(job))],
        "instance_type": itype,
        "node_count": job.instance_count,
        "tasks_per_node": str(max(1, per_node)),
        "deep_health_check_passed_nodes_only": True,
    }
    if job.environment:
        config["environment"] = dict(sorted(job.environment.items()))
    if devices:  # GPUs, or Trainium/Inferentia chips ("accelerators a.k.a GPUs or Trainium Chips")
        config["accelerators"] = config["accelerators_limit"] = devices
    if priority is not None:
        config["priority"] = priority_class(priority)
    return config


def device_request(instance_type: str) -> tuple[str | None, int]:
    """The Kubernetes device resource a pod on `instance_type` asks for, and how many a whole host
    has: NVIDIA GPUs as `nvidia.com/gpu`, Trainium and Inferentia chips as
    `aws.amazon.com/neurondevice` (16 on a trn1.32xlarge, as the HyperPod CLI's quota allocation
    maps them; AWS's Jinja template writes only nvidia.com/gpu), none for a CPU type."""
    accelerator = catalog_instance(instance_type).accelerator
    if accelerator is None or not accelerator.count:
        return None, 0
    if accelerator.kind == "nvidia":
        return "nvidia.com/gpu", accelerator.count
    return "aws.amazon.com/neurondevice", accelerator.count


def hyperpod_pytorch_job(config: dict[str, Any]) -> dict[str, Any]:
    """The HyperPodPyTorchJob the configuration describes, as the template renders it."""
    labels = {"kueue.x-k8s.io/queue-name": config["queue_name"]}
    if config.get("priority"):
        labels["kueue.x-k8s.io/priority-class"] = config["priority"]
    meta = {"name": config["job_name"], "namespace": config["namespace"], "labels": labels}
    container: dict[str, Any] = {
        "name": "pytorch-job-container",
        "image": config["image"],
        "command": config["command"],
        "args": config["args"],
    }
    if config.get("environment"):
        container["env"] = [{"name": k, "value": v} for k, v in config["environment"].items()]
    devices = config.get("accelerators")
    resource = device_request(config["instance_type"])[0] if devices else None
    container["resources"] = (
        {"requests": {resource: devices}, "limits": {resource: devices}}
        if resource
        else {"requests": {"nvidia.com/gpu": "0"}, "limits": {"nvidia.com/gpu": "0"}}
    )
    node_selector = {
        "node.kubernetes.io/instance-type": config["instance_type"],
        "sagemaker.amazonaws.com/deep-health-check-status": "Passed",
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "HyperPodPyTorchJob",
        "metadata": meta,
        "spec": {
            "nprocPerNode": config["tasks_per_node"],
            "replicaSpecs": [
                {
                    "name": "pod",
                    "replicas": config["node_count"],
                    "template": {
                        "metadata": {**meta, "labels": dict(labels)},  # a copy: YAML without anchors
                        "spec": {"containers": [container], "nodeSelector": node_selector},
                    },
                }
            ],
        },
    }
