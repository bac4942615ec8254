"""HyperPod cluster rules, each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tests.unit.test_rules import findings


def _lifecycle(root: Path) -> None:
    script = root / "cluster_src" / "on_create.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(resources.files("sagestack.templates").joinpath("on_create.sh").read_text())
    script.chmod(0o755)


CLUSTER_BASE = """\
project: digits
region: us-east-1
clusters:
  research:
    instance_groups:
"""


def test_cluster_controller_rule(project):
    _lifecycle(project.root)
    ok = (
        CLUSTER_BASE
        + "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n      wk: {instance_type: ml.g5.xlarge, count: 2}\n"
    )
    assert findings(project, "cluster-controller", ok) == []
    bad = CLUSTER_BASE + "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller, count: 2}\n"
    assert findings(project, "cluster-controller", bad) == [
        "clusters.research.instance_groups.ctl.count: a Slurm controller group has one node, not 2",
        "clusters.research.instance_groups: no Compute group: jobs would have nowhere to run",
    ]


def test_cluster_lifecycle_script_rule(project):
    spec = (
        CLUSTER_BASE
        + "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n      wk: {instance_type: ml.g5.xlarge}\n"
    )
    (missing,) = findings(project, "cluster-lifecycle-script", spec)
    assert "cluster_src/ does not exist" in missing
    _lifecycle(project.root)
    assert findings(project, "cluster-lifecycle-script", spec) == []
    script = project.root / "cluster_src" / "on_create.sh"
    script.write_text("#!/bin/bash\nif then\n")
    script.chmod(0o644)
    messages = findings(project, "cluster-lifecycle-script", spec)
    assert any("is not executable: chmod +x it" in m for m in messages), messages
    assert any(
        m.startswith("clusters.research.lifecycle.on_create: bash -n on_create.sh:") for m in messages
    ), messages


def test_cluster_availability_zone_rule(project):
    spec = (
        CLUSTER_BASE
        + "      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}\n      wk: {instance_type: ml.g5.xlarge}\n"
        + "    availability_zone: ZONE\n"
    )
    assert findings(project, "cluster-availability-zone", spec.replace("ZONE", "us-east-1b")) == []
    assert findings(project, "cluster-availability-zone", spec.replace("ZONE", "eu-west-1a")) == [
        "clusters.research.availability_zone: eu-west-1a is not a zone of us-east-1: write e.g. "
        "availability_zone: us-east-1a"
    ]
    assert findings(project, "cluster-availability-zone", spec.replace("ZONE", "us-east-11a")) == [
        "clusters.research.availability_zone: us-east-11a is not a zone of us-east-1: write e.g. "
        "availability_zone: us-east-1a"
    ]
