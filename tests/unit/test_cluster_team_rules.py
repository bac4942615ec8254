"""Rules of EKS-orchestrated clusters and their teams, each with a spec that passes and one that
fails (message asserted)."""

from __future__ import annotations

import pytest

from tests.unit.test_rules import findings

BASE = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  big: {image: train, instance_type: ml.p5.48xlarge, instance_count: 3}
clusters:
  shared:
    orchestrator: eks
    eks: {admin_roles: ["arn:aws:iam::111111111111:role/admin"]}
    instance_groups:
      gpus: {instance_type: ml.p5.48xlarge, count: 4}
"""


def _teams(text: str) -> str:
    return BASE + "    teams:\n" + "".join(f"      {line}\n" for line in text.strip().splitlines())


def test_cluster_orchestrator_settings_rule(project):
    ok = BASE + "    priority_classes: {training: 50}\n"
    assert findings(project, "cluster-orchestrator-settings", ok) == []
    eks_with_slurm = BASE.replace("count: 4}", "count: 4, node_type: Controller, partitions: [gpu]}")
    assert findings(project, "cluster-orchestrator-settings", eks_with_slurm) == [
        "clusters.shared.instance_groups.gpus.partitions: partitions is Slurm's; this cluster is orchestrated by eks",
        "clusters.shared.instance_groups.gpus.node_type: node_type is Slurm's; this cluster is orchestrated by eks",
    ]
    slurm = """\
project: digits
region: us-east-1
clusters:
  research:
    instance_groups:
      ctl: {instance_type: ml.m5.xlarge, node_type: Controller}
      wk: {instance_type: ml.g5.xlarge, capacity: spot, labels: {a: b}}
    teams:
      research: {quota: {ml.g5.xlarge: 1}}
"""
    assert findings(project, "cluster-orchestrator-settings", slurm) == [
        "clusters.research.instance_groups.wk.capacity: capacity is orchestrator eks's; this cluster is "
        "orchestrated by slurm",
        "clusters.research.instance_groups.wk.labels: labels is orchestrator eks's; this cluster is "
        "orchestrated by slurm",
        "clusters.research.teams: teams need orchestrator: eks (HyperPod task governance runs on EKS)",
    ]


def test_cluster_team_quota_rule(project):
    ok = _teams("alpha: {quota: {ml.p5.48xlarge: 3}}\nbeta: {quota: {ml.p5.48xlarge: 1}}")
    assert findings(project, "cluster-team-quota", ok) == []
    over = _teams("alpha: {quota: {ml.p5.48xlarge: 3}}\nbeta: {quota: {ml.p5.48xlarge: 2, ml.g5.xlarge: 1}}")
    assert findings(project, "cluster-team-quota", over) == [
        "clusters.shared.teams.beta.quota.ml.p5.48xlarge: teams alpha, beta are given 5 ml.p5.48xlarge; the cluster's "
        "groups hold 4",
        "clusters.shared.teams.beta.quota.ml.g5.xlarge: team beta is given 1 ml.g5.xlarge; the cluster's groups hold 0",
    ]


def test_cluster_team_borrow_rule(project):
    # b lends its 1, and 1 is held by nobody: a may borrow 2
    ok = _teams(
        "alpha: {quota: {ml.p5.48xlarge: 2}, borrow: {ml.p5.48xlarge: 2}}\nbeta: {quota: {ml.p5.48xlarge: 1}, sharing: Lend}"
    )
    assert findings(project, "cluster-team-borrow", ok) == []
    too_much = ok.replace("sharing: Lend", "sharing: DontLend")
    assert findings(project, "cluster-team-borrow", too_much) == [
        "clusters.shared.teams.alpha.borrow.ml.p5.48xlarge: team alpha borrows up to 2 ml.p5.48xlarge, but "
        "the other teams lend 0 in total and 1 is in no team's quota, so it can borrow at most 1: lower its "
        "borrow to 1, or let beta lend (sharing: Lend or LendAndBorrow)",
    ]
    # the trial's case: two lenders lend 2 in total, every instance held, a borrow of 3
    lenders = _teams(
        "alpha: {quota: {ml.p5.48xlarge: 2}, borrow: {ml.p5.48xlarge: 3}}\n"
        "beta: {quota: {ml.p5.48xlarge: 1}, sharing: Lend}\ngamma: {quota: {ml.p5.48xlarge: 1}}"
    )
    assert findings(project, "cluster-team-borrow", lenders) == [
        "clusters.shared.teams.alpha.borrow.ml.p5.48xlarge: team alpha borrows up to 3 ml.p5.48xlarge, but "
        "the other teams lend 2 in total, so it can borrow at most 2: lower its borrow to 2, or add "
        "ml.p5.48xlarge instances to the cluster's groups",
    ]
    lender = _teams("alpha: {quota: {ml.p5.48xlarge: 2}, sharing: Lend, borrow: {ml.p5.48xlarge: 1}}")
    assert findings(project, "cluster-team-borrow", lender) == [
        "clusters.shared.teams.alpha.borrow: sharing: Lend does not borrow: set sharing: LendAndBorrow",
    ]


def test_cluster_team_job_fits_rule(project):
    ok = _teams(
        "alpha: {quota: {ml.p5.48xlarge: 2}, borrow: {ml.p5.48xlarge: 1}, jobs: [big]}\nbeta: {quota: {ml.p5.48xlarge: 2}}"
    )
    assert findings(project, "cluster-team-job-fits", ok) == []
    short = ok.replace("borrow: {ml.p5.48xlarge: 1}, ", "")
    assert findings(project, "cluster-team-job-fits", short) == [
        "clusters.shared.teams.alpha.jobs.0: big needs 3 ml.p5.48xlarge; team alpha can have at most 2 "
        "(its quota and what it may borrow)",
    ]
    unknown = ok.replace("jobs: [big]", "jobs: [bigg]")
    assert findings(project, "cluster-team-job-fits", unknown) == [
        "clusters.shared.teams.alpha.jobs.0: no job 'bigg' in jobs:"
    ]


def test_an_admin_role_that_is_not_a_role_arn_fails_the_load_with_its_line(project):
    """eks.admin_roles become EKS access entries' principals: a name, a user or a typo was accepted
    and failed only in CloudFormation, an hour into the deploy."""
    from sagestack.core.errors import SpecError
    from tests.constructs.test_clusters import _lifecycle

    _lifecycle(project.root)
    good = '["arn:aws:iam::111111111111:role/admin", "arn:aws:iam::111111111111:role/team/ml-admin"]'
    project.spec(BASE.replace('["arn:aws:iam::111111111111:role/admin"]', good)).load()
    for wrong in ("not-an-arn", "arn:aws:iam::111111111111:user/alice", "arn:aws:iam::1111:role/admin"):
        spec = BASE.replace("arn:aws:iam::111111111111:role/admin", wrong)
        with pytest.raises(SpecError) as raised:
            project.spec(spec).load()
        text = str(raised.value)
        assert "config/sagestack.yaml:10:25: clusters.shared.eks.admin_roles[0]: " in text, text
        assert "an IAM role's ARN" in text and f"(given: '{wrong}')" in text, text
        assert "Traceback" not in text
