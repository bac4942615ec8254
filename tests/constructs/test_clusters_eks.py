"""HyperPod on EKS: the EKS control plane (API authentication, access entries, a private endpoint,
secrets under the project key, every log type, the add-ons HyperPod needs), the HyperPod cluster with
Orchestrator.Eks, continuous provisioning, per-group capacity, labels and taints, and task governance
(the cluster policy and the teams' compute quotas); cdk-nag clean, cfn-lint clean, with and without
an account."""

from __future__ import annotations

import json

import pytest

from tests.constructs.test_clusters import _lifecycle
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

ADMIN = "arn:aws:iam::111111111111:role/platform-admin"
PLAN = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/reserved-p5"
OBSERVABILITY = "amazon-sagemaker-hyperpod-observability"
EKS_SPEC = f"""\
project: digits
region: us-east-1
images:
  train: {{dlc: {{framework: pytorch, version: "2.5", py_version: py311}}}}
jobs:
  llm:
    image: train
    instance_type: ml.p5.48xlarge
    instance_count: 2
    distribution: {{torch_distributed: {{}}}}
    hyperparameters: {{epochs: 1, lr: 0.001}}
clusters:
  shared:
    orchestrator: eks
    eks: {{admin_roles: ["{ADMIN}"], helm_dependencies: installed, autoscaling: true}}
    instance_groups:
      system: {{instance_type: ml.m5.xlarge, count: 2, labels: {{role: system}}}}
      gpus:
        instance_type: ml.p5.48xlarge
        count: 4
        capacity: spot
        training_plan: {PLAN}
        labels: {{role: training}}
        taints: [{{key: nvidia.com/gpu, value: "true", effect: NoSchedule}}]
    priority_classes: {{inference: 90, training: 50, experiments: 10}}
    teams:
      research: {{quota: {{ml.p5.48xlarge: 3}}, fair_share_weight: 60, borrow: {{ml.p5.48xlarge: 1}}}}
      product: {{quota: {{ml.p5.48xlarge: 1}}, fair_share_weight: 40, sharing: Lend}}
    observability: {{logging: true, metrics: {{task_governance: ADVANCED, network: ADVANCED}}}}
"""


@pytest.fixture(scope="module")
def eks_app(tmp_path_factory):
    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("eks") / "p")
    project.spec(EKS_SPEC).env("dev", "retain_data: false\n").env("prod", 'account: "222222222222"\n')
    _lifecycle(project.root)
    out = tmp_path_factory.mktemp("out")
    built = BuiltApp(project.root, out)  # every environment; fails on any unacknowledged cdk-nag finding
    built.outdir = out  # type: ignore[attr-defined]
    return built


def _template(app, env="dev"):  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    return Template.from_stack(app.stages[env].clusters)


def test_the_hyperpod_cluster_is_orchestrated_by_its_eks_cluster(eks_app):
    t = _template(eks_app)
    (cluster,) = t.find_resources("AWS::SageMaker::Cluster").values()
    props = cluster["Properties"]
    (eks_id,) = t.find_resources("AWS::EKS::Cluster")
    assert props["Orchestrator"] == {"Eks": {"ClusterArn": {"Fn::GetAtt": [eks_id, "Arn"]}}}
    assert props["NodeProvisioningMode"] == "Continuous" and props["NodeRecovery"] == "Automatic"
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    gpus, system = groups["gpus"], groups["system"]
    assert "SlurmConfig" not in gpus and "SlurmConfig" not in system
    assert gpus["CapacityRequirements"] == {"Spot": {}} and "CapacityRequirements" not in system
    assert gpus["KubernetesConfig"] == {
        "Labels": {"role": "training"},
        "Taints": [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NoSchedule"}],
    }
    assert gpus["TrainingPlanArn"] == PLAN
    assert gpus["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in system
    assert gpus["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    # created only once the add-ons are, but for observability's, which needs its nodes
    addons = t.find_resources("AWS::EKS::Addon")
    before = {k for k, a in addons.items() if a["Properties"]["AddonName"] != OBSERVABILITY}
    assert before and before <= set(cluster["DependsOn"])


def test_karpenter_autoscaling_has_a_role_held_to_its_own_cluster(eks_app):
    """eks.autoscaling: HyperPod's managed Karpenter on the cluster, through a role only HyperPod
    assumes, which may add and delete nodes of clusters tagged as this one only."""
    t = _template(eks_app)
    (cluster,) = t.find_resources("AWS::SageMaker::Cluster").values()
    props = cluster["Properties"]
    assert props["AutoScaling"] == {"Mode": "Enable", "AutoScalerType": "Karpenter"}
    role_id = props["ClusterRole"]["Fn::GetAtt"][0]
    role = t.find_resources("AWS::IAM::Role")[role_id]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "hyperpod.sagemaker.amazonaws.com"}
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in t.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    (statement,) = policy
    assert statement["Action"] == ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"]
    tags = statement["Condition"]["StringEquals"]
    assert tags["aws:ResourceTag/sagestack:cluster"] == "shared"
    assert tags["aws:ResourceTag/sagestack:environment"] == "dev"
    assert {"Key": "sagestack:cluster", "Value": "shared"} in props["Tags"]


def test_the_eks_cluster_is_private_api_authenticated_encrypted_and_logged(eks_app):
    t = _template(eks_app)
    (eks,) = t.find_resources("AWS::EKS::Cluster").values()
    p = eks["Properties"]
    assert p["Version"] == "1.34"
    assert p["AccessConfig"] == {
        "AuthenticationMode": "API",
        "BootstrapClusterCreatorAdminPermissions": False,
    }
    vpc = p["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True and vpc["EndpointPublicAccess"] is False
    assert len(vpc["SubnetIds"]) == 2  # two zones, as EKS requires
    assert p["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert "Fn::ImportValue" in json.dumps(p["EncryptionConfig"][0]["Provider"]["KeyArn"])
    assert {x["Type"] for x in p["Logging"]["ClusterLogging"]["EnabledTypes"]} == {
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    }
    entries = [e["Properties"] for e in t.find_resources("AWS::EKS::AccessEntry").values()]
    principals = json.dumps([e["PrincipalArn"] for e in entries])
    assert ADMIN in principals and "deploy-role" in principals
    assert all(e["AccessPolicies"][0]["PolicyArn"].endswith("AmazonEKSClusterAdminPolicy") for e in entries)
    names = {a["Properties"]["AddonName"] for a in t.find_resources("AWS::EKS::Addon").values()}
    assert names == {
        "vpc-cni",
        "eks-pod-identity-agent",
        "cert-manager",
        "amazon-sagemaker-hyperpod-training-operator",
        "amazon-sagemaker-hyperpod-taskgovernance",
        OBSERVABILITY,
    }


def test_teams_become_the_cluster_policy_and_compute_quotas(eks_app):
    t = _template(eks_app)
    (policy,) = t.find_resources("AWS::SageMaker::ClusterSchedulerConfig").values()
    config = policy["Properties"]["SchedulerConfig"]
    assert [c["Name"] for c in config["PriorityClasses"]] == ["inference", "training", "experiments"]
    assert config["FairShare"] == "Enabled" and config["IdleResourceSharing"] == "Enabled"
    quotas = {
        q["Properties"]["ComputeQuotaTarget"]["TeamName"]: q
        for q in t.find_resources("AWS::SageMaker::ComputeQuota").values()
    }
    research = quotas["research"]["Properties"]
    assert research["ComputeQuotaTarget"]["FairShareWeight"] == 60
    assert research["ComputeQuotaConfig"]["ComputeQuotaResources"] == [
        {"InstanceType": "ml.p5.48xlarge", "Count": 3}
    ]
    assert research["ComputeQuotaConfig"]["ResourceSharingConfig"] == {
        "Strategy": "LendAndBorrow",
        "AbsoluteBorrowLimits": [{"InstanceType": "ml.p5.48xlarge", "Count": 1}],
    }
    assert quotas["product"]["Properties"]["ComputeQuotaConfig"]["ResourceSharingConfig"] == {
        "Strategy": "Lend"
    }
    assert "Fn::GetAtt" in json.dumps(research["ClusterArn"])


def test_pending_helm_dependencies_deploy_the_eks_cluster_only_and_say_the_step(tmp_path):
    from aws_cdk.assertions import Template

    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path / "p")
    project.spec(EKS_SPEC.replace(", helm_dependencies: installed", "")).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    app = BuiltApp(project.root, tmp_path / "out", ["dev"])
    t = Template.from_stack(app.stages["dev"].clusters)
    t.resource_count_is("AWS::EKS::Cluster", 1)
    t.resource_count_is("AWS::SageMaker::Cluster", 0)
    t.resource_count_is("AWS::SageMaker::ComputeQuota", 0)
    t.resource_count_is("AWS::APS::Workspace", 0)  # observability waits for the HyperPod cluster
    outputs = json.dumps(t.to_json()["Outputs"])
    assert "helm install hyperpod-dependencies" in outputs and "HyperPodHelmChart" in outputs


def test_eks_cluster_templates_pass_cfn_lint(eks_app):
    (dev,) = eks_app.outdir.glob("assembly-dev/*Clusters*.template.json")
    code, output = cfn_lint([str(dev)])
    assert code == 0, output
    # With an account, CDK looks the region's zones up (here unresolved: dummy1a/b, which the synth
    # reports); W3010, a zone written in the template, is then the only finding.
    (prod,) = eks_app.outdir.glob("assembly-prod/*Clusters*.template.json")
    code, output = cfn_lint([str(prod)])
    findings = [line for line in output.splitlines() if line.strip()]
    assert findings and all(":W3010:" in line for line in findings), output


def _observability(t):  # type: ignore[no-untyped-def]
    (addon_id,) = [
        k
        for k, a in t.find_resources("AWS::EKS::Addon").items()
        if a["Properties"]["AddonName"] == OBSERVABILITY
    ]
    addon = t.find_resources("AWS::EKS::Addon")[addon_id]
    role_id = addon["Properties"]["PodIdentityAssociations"][0]["RoleArn"]["Fn::GetAtt"][0]
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in t.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    return addon, t.find_resources("AWS::IAM::Role")[role_id]["Properties"], policy


def _resolved(value, names):  # type: ignore[no-untyped-def]
    """A Fn::Join of strings and references, with each reference written as names gives it."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolved(part, names) for part in parts)
    return names[json.dumps(value, sort_keys=True)]


def test_observability_writes_to_a_workspace_of_its_own_under_the_project_key(eks_app):
    """observability: the add-on on the EKS cluster, configured with its own Prometheus workspace
    (KMS-encrypted with the project key, kept in an environment that retains data), the spec's
    metric levels and logging; created after the HyperPod cluster (its pods need a node) and the
    Pod Identity agent."""
    t = _template(eks_app)
    ((ws_id, workspace),) = t.find_resources("AWS::APS::Workspace").items()
    assert workspace["Properties"]["Alias"] == "digits-dev-shared"
    assert "Fn::ImportValue" in json.dumps(workspace["Properties"]["KmsKeyArn"])  # the foundation's key
    assert workspace["DeletionPolicy"] == "Delete"  # dev: retain_data: false
    addon, _, _ = _observability(t)
    props = addon["Properties"]
    (cluster_id,) = t.find_resources("AWS::SageMaker::Cluster")
    (agent,) = [
        k
        for k, a in t.find_resources("AWS::EKS::Addon").items()
        if a["Properties"]["AddonName"] == "eks-pod-identity-agent"
    ]
    assert {cluster_id, agent} <= set(addon["DependsOn"])
    assert (
        props["PodIdentityAssociations"][0]["ServiceAccount"]
        == "hyperpod-observability-operator-otel-collector"
    )
    (eks_id,) = t.find_resources("AWS::EKS::Cluster")
    assert props["ClusterName"] == {"Ref": eks_id}
    names = {
        json.dumps({"Ref": "AWS::URLSuffix"}): "amazonaws.com",
        json.dumps({"Fn::GetAtt": [ws_id, "WorkspaceId"]}, sort_keys=True): "ws-1",
        json.dumps({"Fn::GetAtt": [ws_id, "Arn"]}, sort_keys=True): "arn:aws:aps:us-east-1:1:workspace/ws-1",
    }
    config = json.loads(_resolved(props["ConfigurationValues"], names))
    assert config["ampWorkspace"] == {
        "prometheusEndpoint": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1",
        "arn": "arn:aws:aps:us-east-1:1:workspace/ws-1",
    }
    levels = {k: v["level"] for k, v in config["metricsProvider"].items()}
    assert levels["taskGovernanceMetrics"] == "ADVANCED" and levels["networkMetrics"] == "ADVANCED"
    assert levels["trainingMetrics"] == "BASIC" and levels["scalingMetrics"] == "DISABLED"
    assert config["logging"] == {"enabled": True}
    prod = _template(eks_app, "prod")
    (kept,) = prod.find_resources("AWS::APS::Workspace").values()
    assert kept["DeletionPolicy"] == "Retain"


def test_the_observability_role_is_held_to_its_cluster_workspace_and_log_groups(eks_app):
    """The collector's Pod Identity role: trusted by EKS Pod Identity for this EKS cluster of this
    account only; remote write to this workspace only; CloudWatch Logs in this HyperPod cluster's log
    groups only (the two logs actions IAM gives no resource type, on '*')."""
    t = _template(eks_app)
    (ws_id,) = t.find_resources("AWS::APS::Workspace")
    (eks_id,) = t.find_resources("AWS::EKS::Cluster")
    _, role, policy = _observability(t)
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert trust["Condition"] == {
        "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
        "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [eks_id, "Arn"]}},
    }
    by_resource = {json.dumps(s["Resource"], sort_keys=True): s for s in policy}
    write = by_resource.pop(json.dumps({"Fn::GetAtt": [ws_id, "Arn"]}, sort_keys=True))
    assert write["Action"] == "aps:RemoteWrite"
    unscoped = by_resource.pop(json.dumps("*"))
    assert sorted(unscoped["Action"]) == ["logs:DescribeLogGroups", "logs:StopQuery"]
    scoped = {
        _resolved(json.loads(k), {json.dumps({"Ref": "AWS::AccountId"}): "1"}): s
        for k, s in by_resource.items()
    }
    group = "arn:aws:logs:us-east-1:1:log-group:/aws/sagemaker/Clusters/digits-dev-shared/*"
    assert set(scoped) == {group, group + ":log-stream:*"}
    assert "logs:PutLogEvents" in scoped[group + ":log-stream:*"]["Action"]
    assert "logs:CreateLogGroup" in scoped[group]["Action"]


def test_observability_may_write_to_an_existing_workspace_without_logs(tmp_path):
    """prometheus_workspace: no workspace is created; the role may remote-write to the one named and
    has no CloudWatch Logs statement without logging."""
    from aws_cdk.assertions import Template

    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    arn = "arn:aws:aps:us-east-1:111111111111:workspace/ws-0123abcd-4567"
    spec = EKS_SPEC.replace(
        "observability: {logging: true, metrics: {task_governance: ADVANCED, network: ADVANCED}}",
        f"observability: {{prometheus_workspace: '{arn}', addon_version: v1.0.5-eksbuild.1}}",
    )
    assert spec != EKS_SPEC
    project = Project(tmp_path / "p")
    project.spec(spec).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    app = BuiltApp(project.root, tmp_path / "out", ["dev"])
    t = Template.from_stack(app.stages["dev"].clusters)
    t.resource_count_is("AWS::APS::Workspace", 0)
    addon, _, policy = _observability(t)
    assert addon["Properties"]["AddonVersion"] == "v1.0.5-eksbuild.1"
    assert policy == [{"Action": "aps:RemoteWrite", "Effect": "Allow", "Resource": arn}]
    config = json.loads(
        _resolved(
            addon["Properties"]["ConfigurationValues"],
            {json.dumps({"Ref": "AWS::URLSuffix"}): "amazonaws.com"},
        )
    )
    assert config["ampWorkspace"] == {
        "prometheusEndpoint": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567",
        "arn": arn,
    }
    assert config["logging"] == {"enabled": False}
