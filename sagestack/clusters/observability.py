"""HyperPod's observability add-on on an EKS-orchestrated cluster: its configuration values (the
Prometheus workspace it writes to, each metric category's level, CloudWatch logging), the service
account its Pod Identity role is bound to, and the smallest node it fits on.

AWS's sources, read 2026-12: the SageMaker developer guide ("Setting up the SageMaker HyperPod
observability add-on", "Troubleshooting the Amazon SageMaker HyperPod observability add-on") and
AWS's own CloudFormation for it (aws/sagemaker-hyperpod-cluster-setup,
eks/cloudformation/observability-template.yaml), whose configuration this renders key for key."""

from __future__ import annotations

import re
from typing import Any

from sagestack.clusters.models import ObservabilitySpec

ADDON = "amazon-sagemaker-hyperpod-observability"
# The add-on's OpenTelemetry collector, the one service account its Pod Identity association binds.
NAMESPACE = "hyperpod-observability"
SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
# AWS's template and Terraform module scrape every category every 30 seconds.
SCRAPE_INTERVAL_SECONDS = 30
# "The smallest Amazon EC2 instance type that works in this case is 4xlarge": the add-on's pods need
# a node at least that large besides what already runs there.
SMALLEST_NODE_SIZE = 4

# The spec's category -> the add-on's metricsProvider key (`cluster` is AWS's `customMetrics`: the
# template's ClusterMetricLevel parameter fills it).
CATEGORIES = {
    "training": "trainingMetrics",
    "task_governance": "taskGovernanceMetrics",
    "scaling": "scalingMetrics",
    "cluster": "customMetrics",
    "node": "nodeMetrics",
    "accelerated_compute": "acceleratedComputeMetrics",
    "network": "networkMetrics",
}
_WORKSPACE_ARN = re.compile(
    r"^arn:(?P<partition>aws[-a-z]*):aps:(?P<region>[a-z0-9-]+):\d{12}:workspace/(?P<id>.+)$"
)


def remote_write_endpoint(region: str, workspace_id: str, url_suffix: str = "amazonaws.com") -> str:
    """The workspace's Prometheus endpoint as the add-on takes it: no trailing slash (the workspace's
    own PrometheusEndpoint attribute ends in one; AWS's template builds the URL from the ID)."""
    return f"https://aps-workspaces.{region}.{url_suffix}/workspaces/{workspace_id}"


def workspace_of(arn: str) -> tuple[str, str, str]:
    """An existing workspace's partition, region and ID, from its ARN (the spec's pattern holds)."""
    match = _WORKSPACE_ARN.match(arn)
    if match is None:
        raise ValueError(f"not a Prometheus workspace ARN: {arn}")
    return match["partition"], match["region"], match["id"]


def addon_configuration(spec: ObservabilitySpec, *, workspace_arn: str, endpoint: str) -> dict[str, Any]:
    """The add-on's ConfigurationValues (before JSON): the workspace, every category's level with
    AWS's scrape interval (inference metrics stay BASIC, as AWS's template fixes them), logging."""
    levels = spec.metrics.model_dump()
    provider: dict[str, Any] = {
        key: {"level": levels[category], "scrapeInterval": SCRAPE_INTERVAL_SECONDS}
        for category, key in CATEGORIES.items()
    }
    provider["inferenceMetrics"] = {"level": "BASIC", "scrapeInterval": SCRAPE_INTERVAL_SECONDS}
    return {
        "ampWorkspace": {"prometheusEndpoint": endpoint, "arn": workspace_arn},
        "metricsProvider": provider,
        "logging": {"enabled": spec.logging},
    }


def node_size(instance_type: str) -> int:
    """How many xlarges an instance type's size is: ml.m5.4xlarge 4, ml.m5.xlarge 1, ml.t3.large 0."""
    size = instance_type.rsplit(".", 1)[-1]
    if size == "xlarge":
        return 1
    match = re.fullmatch(r"(\d+)xlarge", size)
    return int(match[1]) if match else 0
