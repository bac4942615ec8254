"""Rules of HyperPod's observability add-on (`clusters.<name>.observability`), each with a spec that
passes and one that fails (message asserted), and the add-on's configuration as sagestack renders it
beside AWS's own template's."""

from __future__ import annotations

import pytest

from tests.unit.test_rules import findings

BASE = """\
project: digits
region: us-east-1
clusters:
  shared:
    orchestrator: eks
    eks: {admin_roles: ["arn:aws:iam::111111111111:role/admin"]}
    instance_groups:
      system: {instance_type: ml.m5.4xlarge, count: 1}
      gpus: {instance_type: ml.g5.xlarge, count: 2}
    observability: {}
"""


def test_observability_on_a_slurm_cluster_is_refused(project):
    slurm = """\
project: digits
region: us-east-1
clusters:
  research:
    instance_groups:
      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}
      wk: {instance_type: ml.g5.4xlarge}
    observability: {logging: true}
"""
    assert findings(project, "cluster-orchestrator-settings", slurm) == [
        "clusters.research.observability: observability needs orchestrator: eks "
        "(amazon-sagemaker-hyperpod-observability is an EKS add-on; a Slurm cluster's metrics come "
        "from its lifecycle scripts)"
    ]
    assert findings(project, "cluster-orchestrator-settings", BASE) == []


def test_observability_on_a_slurm_cluster_fails_the_load_with_its_line(project):
    """The refusal as a user meets it: the file, the line and the key of observability:, and the fix."""
    from sagestack.core.errors import SpecError

    slurm = BASE.replace("    orchestrator: eks\n", "").replace(
        '    eks: {admin_roles: ["arn:aws:iam::111111111111:role/admin"]}\n', ""
    )
    slurm = slurm.replace(
        "system: {instance_type: ml.m5.4xlarge, count: 1}",
        "ctl: {instance_type: ml.m5.4xlarge, node_type: Controller}",
    )
    with pytest.raises(SpecError) as raised:
        project.spec(slurm).load()
    text = str(raised.value)
    assert "config/sagestack.yaml:8:20: clusters.shared.observability:" in text, text
    assert "orchestrator: eks" in text


def test_cluster_observability_node_rule(project):
    assert findings(project, "cluster-observability-node", BASE) == []
    small = BASE.replace("ml.m5.4xlarge", "ml.m5.2xlarge")
    assert findings(project, "cluster-observability-node", small) == [
        "clusters.shared.observability: no group of 4xlarge or larger (ml.g5.xlarge, ml.m5.2xlarge): "
        "the add-on's pods need one; add e.g. system: {instance_type: ml.m5.4xlarge}"
    ]
    # without the add-on, small nodes are fine
    assert findings(project, "cluster-observability-node", small.replace("    observability: {}\n", "")) == []


def test_cluster_observability_metrics_rule(project):
    advanced = BASE.replace("observability: {}", "observability: {metrics: {task_governance: ADVANCED}}")
    assert findings(project, "cluster-observability-metrics", advanced) == []
    without_kueue = advanced.replace('role/admin"]}', 'role/admin"], task_governance: false}')
    assert findings(project, "cluster-observability-metrics", without_kueue) == [
        "clusters.shared.observability.metrics.task_governance: ADVANCED task governance metrics need "
        "eks.task_governance: true (Kueue's metrics)"
    ]
    assert (
        findings(project, "cluster-observability-metrics", without_kueue.replace("ADVANCED", "DISABLED"))
        == []
    )


def test_the_configuration_is_aws_template_s_key_for_key():
    """AWS's observability-template.yaml (aws/sagemaker-hyperpod-cluster-setup) writes these keys,
    levels and scrape intervals; the spec's defaults are that template's parameter defaults."""
    from sagestack.clusters.models import ObservabilitySpec
    from sagestack.clusters.observability import addon_configuration, remote_write_endpoint, workspace_of

    arn = "arn:aws:aps:us-west-2:111111111111:workspace/ws-577036b0-ac41-4e0b-81a5-4436385b0fdc"
    partition, region, workspace_id = workspace_of(arn)
    assert (partition, region) == ("aws", "us-west-2")
    endpoint = remote_write_endpoint(region, workspace_id)
    assert (
        endpoint
        == "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-577036b0-ac41-4e0b-81a5-4436385b0fdc"
    )
    config = addon_configuration(ObservabilitySpec(), workspace_arn=arn, endpoint=endpoint)
    levels = {k: v["level"] for k, v in config["metricsProvider"].items()}
    assert levels == {
        "trainingMetrics": "BASIC",
        "inferenceMetrics": "BASIC",
        "taskGovernanceMetrics": "DISABLED",
        "scalingMetrics": "DISABLED",
        "customMetrics": "BASIC",
        "nodeMetrics": "BASIC",
        "acceleratedComputeMetrics": "BASIC",
        "networkMetrics": "DISABLED",
    }
    assert {v["scrapeInterval"] for v in config["metricsProvider"].values()} == {30}
    assert config["ampWorkspace"] == {"prometheusEndpoint": endpoint, "arn": arn}
    assert config["logging"] == {"enabled": False}
    on = ObservabilitySpec.model_validate(
        {"logging": True, "metrics": {"network": "ADVANCED", "cluster": "ADVANCED"}}
    )
    config = addon_configuration(on, workspace_arn=arn, endpoint=endpoint)
    assert config["logging"] == {"enabled": True}
    assert config["metricsProvider"]["networkMetrics"]["level"] == "ADVANCED"
    assert config["metricsProvider"]["customMetrics"]["level"] == "ADVANCED"


@pytest.mark.parametrize(
    ("instance_type", "size"),
    [
        ("ml.m5.4xlarge", 4),
        ("ml.p5.48xlarge", 48),
        ("ml.m5.xlarge", 1),
        ("ml.t3.large", 0),
        ("ml.t3.medium", 0),
    ],
)
def test_node_size(instance_type, size):
    from sagestack.clusters.observability import node_size

    assert node_size(instance_type) == size
