"""HyperPod clusters: the cluster stack synthesizes (cdk-nag clean), passes cfn-lint, and carries the
CreateCluster request botocore's model accepts; the rules; plan's quota and cost rows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

SPEC = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  llm:
    image: train
    instance_type: ml.p5.48xlarge
    instance_count: 2
    distribution: {torch_distributed: {}}
    hyperparameters: {epochs: 1, lr: 0.001}
clusters:
  research:
    instance_groups:
      controller: {instance_type: ml.m5.xlarge, node_type: Controller}
      login: {instance_type: ml.m5.xlarge, node_type: Login}
      workers: {instance_type: ml.p5.48xlarge, count: 2, threads_per_core: 1, volume_size_gb: 500, partitions: [gpu]}
"""


def _lifecycle(root: Path) -> None:
    script = root / "cluster_src" / "on_create.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(resources.files("sagestack.templates").joinpath("on_create.sh").read_text())
    script.chmod(0o755)


@pytest.fixture(scope="module")
def cluster_app(tmp_path_factory):
    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("cluster") / "p")
    project.spec(SPEC).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    out = tmp_path_factory.mktemp("out")
    built = BuiltApp(project.root, out, ["dev"])  # fails on any unacknowledged cdk-nag finding
    built.outdir = out  # type: ignore[attr-defined]
    return built


def _template(app):  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    return Template.from_stack(app.stages["dev"].clusters)


def test_the_cluster_is_slurm_with_its_groups_storage_and_health_checks(cluster_app):
    (cluster,) = _template(cluster_app).find_resources("AWS::SageMaker::Cluster").values()
    props = cluster["Properties"]
    assert props["ClusterName"] == "digits-dev-research"
    assert props["Orchestrator"] == {"Slurm": {"SlurmConfigStrategy": "Managed"}}
    assert props["NodeRecovery"] == "Automatic"
    groups = {g["InstanceGroupName"]: g for g in props["InstanceGroups"]}
    assert {n: g["SlurmConfig"]["NodeType"] for n, g in groups.items()} == {
        "controller": "Controller",
        "login": "Login",
        "workers": "Compute",
    }
    workers = groups["workers"]
    assert workers["SlurmConfig"]["PartitionNames"] == ["gpu"] and workers["ThreadsPerCore"] == 1
    assert workers["OnStartDeepHealthChecks"] == ["InstanceStress", "InstanceConnectivity"]
    assert "OnStartDeepHealthChecks" not in groups["controller"]  # not an accelerated type
    storage = workers["InstanceStorageConfigs"]
    assert storage[0] == {"EbsVolumeConfig": {"VolumeSizeInGB": 500}}
    assert storage[1]["FsxLustreConfig"]["MountPath"] == "/fsx"
    assert workers["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert "/code/clusters/research/" in json.dumps(workers["LifeCycleConfig"]["SourceS3Uri"])
    # the environment's tags and the cluster's own, which `sagestack cost` groups its spend by
    assert props["Tags"] == [
        {"Key": "sagestack:cluster", "Value": "research"},
        {"Key": "sagestack:environment", "Value": "dev"},
        {"Key": "sagestack:project", "Value": "digits"},
    ]


def test_nodes_are_in_one_zone_open_to_each_other_with_lustre_linked_to_the_bucket(cluster_app):
    t = _template(cluster_app)
    subnets = t.find_resources("AWS::EC2::Subnet")
    assert len(subnets) == 2  # one public, one private: a single Availability Zone
    (ingress,) = [
        r["Properties"]
        for r in t.find_resources("AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("IpProtocol") == "-1"
    ]
    assert ingress["SourceSecurityGroupId"] == ingress["GroupId"]
    (fs,) = t.find_resources("AWS::FSx::FileSystem").values()
    assert fs["Properties"]["LustreConfiguration"]["DeploymentType"] == "PERSISTENT_2"
    (dra,) = t.find_resources("AWS::FSx::DataRepositoryAssociation").values()
    assert dra["Properties"]["FileSystemPath"] == "/data"
    assert "/data/" in json.dumps(dra["Properties"]["DataRepositoryPath"])
    t.resource_count_is("AWS::EC2::FlowLog", 1)
    # No account: no lookup, the zone is the deploy region's first (Fn::GetAZs), nothing to report
    zones = {json.dumps(s["Properties"]["AvailabilityZone"]) for s in subnets.values()}
    assert zones == {json.dumps({"Fn::Select": [0, {"Fn::GetAZs": ""}]})}
    from aws_cdk import App

    from sagestack.app.lookups import unresolved_lookups

    assert unresolved_lookups(App(), cluster_app.outdir, list(cluster_app.stages.values())) == []


def test_the_flow_logs_are_encrypted_with_the_project_key_which_lets_logs_use_it_for_them_only(cluster_app):
    from aws_cdk.assertions import Template

    t = _template(cluster_app)
    (flow_log,) = t.find_resources("AWS::EC2::FlowLog").values()
    group_ref = flow_log["Properties"]["LogGroupName"]["Ref"]
    group = t.find_resources("AWS::Logs::LogGroup")[group_ref]["Properties"]
    assert group["LogGroupName"] == "/sagestack/digits-dev/clusters/research/flow-logs"
    assert "Fn::ImportValue" in group["KmsKeyId"] and "Key" in group["KmsKeyId"]["Fn::ImportValue"]
    foundation = Template.from_stack(cluster_app.stages["dev"].foundation)
    (key,) = foundation.find_resources("AWS::KMS::Key").values()
    scoped = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if "flow-logs" in json.dumps(s.get("Condition", {}))
    ]
    assert len(scoped) == 1 and "logs." in json.dumps(scoped[0]["Principal"])
    context = json.dumps(scoped[0]["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert ":log-group:/sagestack/digits-dev/clusters/research/flow-logs" in context


def test_the_node_role_has_no_managed_policy_and_reads_only_its_scripts(cluster_app):
    roles = _template(cluster_app).find_resources("AWS::IAM::Role")
    node = next(r for k, r in roles.items() if k.startswith("ClusterresearchNodeRole"))
    assert "ManagedPolicyArns" not in node["Properties"]
    policies = _template(cluster_app).find_resources("AWS::IAM::Policy")
    node_policy = next(p for k, p in policies.items() if k.startswith("ClusterresearchNodeRole"))
    text = json.dumps(node_policy["Properties"]["PolicyDocument"])
    assert "/code/clusters/research/*" in text and "s3:PutObject" not in text


def test_cluster_templates_pass_cfn_lint(cluster_app):
    templates = sorted(str(p) for p in cluster_app.outdir.glob("assembly-dev/*.template.json"))
    code, output = cfn_lint([*templates])
    assert code == 0, output


def test_a_cluster_synthesizes_where_the_environment_names_its_account(project, tmp_path):
    """The lifecycle deployment's role is imported with the stack's account: parsed from its token
    ARN instead, the bucket key's grant went to the key policy in the foundation stack, which then
    depended on the cluster stack (a cycle: DependencyCycle at synth)."""
    from tests.support.cdk_app import BuiltApp

    project.spec(SPEC).env("prod", 'account: "111111111111"\n')
    _lifecycle(project.root)
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    assert "ClusterresearchLifecycleDeployRole" not in json.dumps(app.template("prod").to_json())


def _sagestack_synth(root: Path, outdir: Path) -> subprocess.CompletedProcess[str]:
    """`sagestack synth`: the project's app.py (app.builder.main, what `cdk synth` runs) in its own
    process, with no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(AWS_EC2_METADATA_DISABLED="true")
    command = [
        str(Path(sys.executable).parent / "sagestack"),
        "synth",
        "--root",
        str(root),
        "-o",
        str(outdir),
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _zones(outdir: Path) -> set[str]:
    (template,) = outdir.glob("assembly-prod/*Clusters*.template.json")
    resources = json.loads(template.read_text())["Resources"].values()
    return {
        json.dumps(r["Properties"]["AvailabilityZone"]) for r in resources if r["Type"] == "AWS::EC2::Subnet"
    }


def test_an_unresolved_zone_lookup_is_reported_with_what_resolves_it(project, tmp_path):
    """With an account, CDK asks the account for the region's zones (a context lookup); unresolved,
    the template held AvailabilityZone "dummy1a" and the synth said nothing. The synth names the
    environment, the stack and the lookup, the command that performs it and the cdk.context.json
    entry that answers it offline; with that entry written, the zone is the one it names."""
    project.spec(SPEC).env("prod", 'account: "111111111111"\n')
    _lifecycle(project.root)
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, project.root / name)
    synth = _sagestack_synth(project.root, tmp_path / "out")
    assert synth.returncode == 0, synth.stderr[-3000:]
    assert _zones(tmp_path / "out") == {'"dummy1a"'}
    report = synth.stderr[synth.stderr.index("warning: prod: unresolved context lookup") :]
    assert all(len(line) <= 80 for line in report.splitlines()), report
    words = " ".join(report.split())
    for part in (
        "the Availability Zones of account 111111111111 in us-east-1",
        "(stack digits-prod-clusters holds CDK's stand-in for it: not deployable)",
        "npx cdk synth -c sagestack:environments=prod --profile <profile>",
        "key: availability-zones:account=111111111111:region=us-east-1",
        'value: ["us-east-1a", "us-east-1b", "us-east-1c"]',
        "clusters.research.availability_zone: us-east-1a",
    ):
        assert part in words, (part, report)
    assert "1 context lookup(s) unresolved (above): not deployable yet" in synth.stdout
    # The entry as printed, written by hand, resolves it (sagestack synth reads cdk.context.json)
    key = "availability-zones:account=111111111111:region=us-east-1"
    (project.root / "cdk.context.json").write_text(json.dumps({key: ["us-east-1c", "us-east-1d"]}))
    again = _sagestack_synth(project.root, tmp_path / "again")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "unresolved context lookup" not in again.stderr and "lookup(s) unresolved" not in again.stdout
    assert _zones(tmp_path / "again") == {'"us-east-1c"'}


def test_under_the_cdk_cli_a_lookup_not_yet_tried_is_a_note_and_a_failed_one_the_report(
    tmp_path, monkeypatch
):
    """`cdk synth` runs the app, looks up what the manifest says is missing (with its credentials)
    and runs it again: the first run only says what cdk looks up next; once the lookup failed (the
    CLI's $providerError value), the whole report."""
    from aws_cdk import App

    from sagestack.app.lookups import unresolved_lookups

    key = "availability-zones:account=111111111111:region=eu-west-1"
    missing = {
        "key": key,
        "provider": "availability-zones",
        "props": {"account": "111111111111", "region": "eu-west-1", "dummyValue": ["dummy1a", "dummy1b"]},
    }
    (tmp_path / "assembly-prod").mkdir()
    (tmp_path / "manifest.json").write_text(json.dumps({"missing": [missing]}))
    stack = {"type": "aws:cloudformation:stack", "properties": {"templateFile": "c.json", "stackName": "p-c"}}
    nested = {"artifacts": {"c": stack}, "missing": [missing]}
    (tmp_path / "assembly-prod" / "manifest.json").write_text(json.dumps(nested))
    (tmp_path / "assembly-prod" / "c.json").write_text('{"AvailabilityZone": "dummy1a"}')
    monkeypatch.setenv("CDK_CLI_VERSION", "2.1100.0")
    assert unresolved_lookups(App(), tmp_path, []) == [
        "note: cdk looks up the Availability Zones of account 111111111111 in eu-west-1 next, with this "
        "run's credentials"
    ]
    failed = App(context={key: {"$providerError": "Need to perform AWS calls", "$dontSaveContext": True}})
    report = " ".join(" ".join(unresolved_lookups(failed, tmp_path, [])).split())
    assert report.startswith(
        "warning: prod: unresolved context lookup: the Availability Zones of account 111111111111 in "
        "eu-west-1 (stack p-c holds CDK's stand-in for it: not deployable)."
    )
    assert 'key: availability-zones:account=111111111111:region=eu-west-1 value: ["eu-west-1a", ' in report
    monkeypatch.delenv("CDK_CLI_VERSION")
    assert " ".join(" ".join(unresolved_lookups(App(), tmp_path, [])).split()) == report


def test_a_cluster_s_zone_in_the_spec_needs_no_lookup(project, tmp_path):
    from aws_cdk import App

    from sagestack.app.lookups import unresolved_lookups
    from tests.support.cdk_app import BuiltApp

    project.spec(SPEC + "    availability_zone: us-east-1b\n").env("prod", 'account: "111111111111"\n')
    _lifecycle(project.root)
    app = BuiltApp(project.root, tmp_path / "out", ["prod"])
    assert _zones(tmp_path / "out") == {'"us-east-1b"'}
    assert "missing" not in json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert unresolved_lookups(App(), tmp_path / "out", list(app.stages.values())) == []


def _library_cluster(tmp_path, **props):  # type: ignore[no-untyped-def]
    """A HyperPodCluster in a stack of its own (constructed, not synthesized)."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms

    from sagestack.constructs import ArtifactBucket, HyperPodCluster
    from sagestack.core.names import Names

    _lifecycle(tmp_path)
    stack = Stack(App(), "S")
    key = kms.Key(stack, "Key")
    return HyperPodCluster(
        stack,
        "Cluster",
        names=Names("digits", "dev"),
        key="research",
        lifecycle_dir=str(tmp_path / "cluster_src"),
        artifacts=ArtifactBucket(stack, "Artifacts", encryption_key=key),
        encryption_key=key,
        **props,
    )


def test_the_typed_props_build_the_spec_s_own_cluster(tmp_path):
    """The library door (typed props, CDK types) and the spec door make the same ClusterSpec."""
    from aws_cdk import Size

    from sagestack.clusters.models import ClusterSpec
    from sagestack.constructs import ClusterFileSystem, ClusterInstanceGroup

    spec = ClusterSpec.model_validate(  # SPEC's clusters.research
        {
            "instance_groups": {
                "controller": {"instance_type": "ml.m5.xlarge", "node_type": "Controller"},
                "login": {"instance_type": "ml.m5.xlarge", "node_type": "Login"},
                "workers": {
                    "instance_type": "ml.p5.48xlarge",
                    "count": 2,
                    "threads_per_core": 1,
                    "volume_size_gb": 500,
                    "partitions": ["gpu"],
                },
            }
        }
    )
    typed = _library_cluster(
        tmp_path,
        instance_groups={
            "controller": ClusterInstanceGroup("ml.m5.xlarge", node_type="Controller"),
            "login": ClusterInstanceGroup("ml.m5.xlarge", node_type="Login"),
            "workers": ClusterInstanceGroup(
                "ml.p5.48xlarge",
                count=2,
                threads_per_core=1,
                volume_size=Size.gibibytes(500),
                partitions=["gpu"],
            ),
        },
    )
    assert typed.spec == spec
    bigger = _library_cluster(
        tmp_path / "b",
        instance_groups={"workers": ClusterInstanceGroup("ml.p5.48xlarge")},
        file_system=ClusterFileSystem(storage=Size.gibibytes(2400), mount_path="/shared"),
        node_recovery=False,
        availability_zone="us-east-1b",
    )
    assert bigger.spec.availability_zone == "us-east-1b"
    assert bigger.spec.fsx is not None and bigger.spec.fsx.storage_gib == 2400
    assert bigger.request["NodeRecovery"] == "None"
    none = _library_cluster(
        tmp_path / "n", instance_groups={"workers": ClusterInstanceGroup("ml.p5.48xlarge")}, file_system=None
    )
    assert none.file_system is None and none.spec.fsx is None
    # the library door tags the cluster with its key too (and the caller's tags beside it)
    assert typed.request["Tags"] == [{"Key": "sagestack:cluster", "Value": "research"}]
    tagged = _library_cluster(
        tmp_path / "t",
        instance_groups={"workers": ClusterInstanceGroup("ml.p5.48xlarge")},
        tags={"team": "ml"},
    )
    assert tagged.request["Tags"] == [
        {"Key": "sagestack:cluster", "Value": "research"},
        {"Key": "team", "Value": "ml"},
    ]


def test_a_cluster_takes_one_door_and_says_what_the_model_refuses(tmp_path):
    from sagestack.constructs import ClusterInstanceGroup

    groups = {"workers": ClusterInstanceGroup("ml.p5.48xlarge")}
    with pytest.raises(ValueError, match="either spec or the typed props"):
        _library_cluster(
            tmp_path,
            spec={"instance_groups": {"w": {"instance_type": "ml.p5.48xlarge"}}},
            instance_groups=groups,
        )
    with pytest.raises(ValueError, match="give instance_groups"):
        _library_cluster(tmp_path / "b")
    with pytest.raises(ValueError, match=r"instance_groups\.workers\.count"):
        _library_cluster(
            tmp_path / "c", instance_groups={"workers": ClusterInstanceGroup("ml.p5.48xlarge", count=0)}
        )


def test_the_create_cluster_request_is_valid_for_botocore():
    from sagestack.clusters.models import ClusterSpec
    from sagestack.clusters.request import create_cluster_request, stand_in_cluster_context
    from sagestack.core.catalog.service_model import validate_request
    from sagestack.core.deployment import Deployment
    from sagestack.core.names import Names

    spec = ClusterSpec.model_validate(
        {
            "instance_groups": {
                "controller": {"instance_type": "ml.m5.xlarge", "node_type": "Controller"},
                "workers": {"instance_type": "ml.p5.48xlarge", "count": 2},
            }
        }
    )
    request = create_cluster_request(
        Names("digits", "dev"),
        "research",
        spec,
        stand_in_cluster_context(Deployment.stand_ins(region="us-east-1"), fsx=True),
    )
    validate_request("CreateCluster", request)
    request["InstanceGroups"][0]["ThreadsPerCore"] = 3
    with pytest.raises(ValueError):
        validate_request("CreateCluster", request)


def test_plan_counts_cluster_nodes_against_their_quota_and_prices_them(project):
    from sagestack.capacity.assess import assess
    from sagestack.capacity.ledger import QuotaBook
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_training

    project.spec(SPEC).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    plan = resolve_environment(project.load("dev"))
    report = assess(plan, render_training(plan, project.root), QuotaBook.none("off"))
    rows = {r.key: r for r in report.rows if r.kind == "cluster"}
    assert set(rows) == {"research/controller", "research/login", "research/workers"}
    workers = rows["research/workers"]
    assert workers.quota == "ml.p5.48xlarge for cluster usage" and workers.needed == 2
    assert workers.cost_on_demand == pytest.approx(2 * workers.price_per_hour)


@pytest.mark.train
def test_the_sbatch_script_runs_the_training_code_over_simulated_nodes(project, tmp_path):
    """The program a cluster runs, run here: the rendered sbatch script with srun and scontrol as
    two simulated nodes on this machine, torchrun rendezvous over loopback."""
    from sagestack.clusters.request import sbatch_script
    from tests.conftest import REPO
    from tests.support.moto_server import free_port

    project.spec(SPEC).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    loaded = project.load("dev")
    from sagestack.project import resolve_environment

    plan = resolve_environment(loaded)
    script = tmp_path / "job.sbatch"
    script.write_text(
        sbatch_script(
            plan.names,
            "research",
            loaded.spec.clusters["research"],
            "llm",
            loaded.spec.jobs["llm"],
            code_dir="/fsx/code",
        )
    )
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "srun").write_text(
        '#!/bin/bash\nwhile [[ $# -gt 0 && "$1" == --* ]]; do shift; done\npids=()\n'
        'for ((i = 0; i < SLURM_NNODES; i++)); do SLURM_NODEID=$i SLURM_PROCID=$i "$@" & pids+=($!); done\n'
        'status=0; for pid in "${pids[@]}"; do wait "$pid" || status=$?; done; exit $status\n'
    )
    (shims / "scontrol").write_text(
        "#!/bin/bash\nfor ((i = 0; i < SLURM_NNODES; i++)); do echo 127.0.0.1; done\n"
    )
    for shim in shims.iterdir():
        shim.chmod(0o755)
    shared = tmp_path / "fsx"
    env = {
        **os.environ,
        "PATH": f"{shims}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SLURM_NNODES": "2",
        "SLURM_JOB_NODELIST": "node-[1-2]",
        "SAGESTACK_SHARED": str(shared),
        "SAGESTACK_CODE_DIR": str(REPO / "training_src"),
        "SAGESTACK_PROCS_PER_NODE": "1",
        "MASTER_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
    }
    opt_ml_before = Path("/opt/ml").exists()
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "world_size=2" in run.stdout + run.stderr
    assert "val_accuracy=" in run.stdout + run.stderr
    job_dir = shared / "sagestack" / "digits-dev" / "llm"
    assert (job_dir / "model" / "model.pt").exists()
    # everything the container keeps under /opt/ml went to the job's folder on the shared file system
    assert list((job_dir / "output" / "tensorboard").glob("events.out.tfevents.*"))
    assert not Path("/opt/ml").exists() or opt_ml_before


ON_CREATE_PROBE = r"""
set -eu
t="$1"; script="$2"
# this machine's /etc and /mnt stay untouched: a private mount namespace, /etc overlaid, /mnt a
# tmpfs (reachable by every user, unlike a test's own folder) and FSx a tmpfs mounted on it
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$t/upper,workdir=$t/work" /etc
mount -t tmpfs -o mode=0755 tmpfs /mnt
mkdir /mnt/fsx
mount -t tmpfs -o mode=0755 tmpfs /mnt/fsx
id -u ubuntu >/dev/null 2>&1 || useradd -M ubuntu  # HyperPod's default user
useradd -M outsider
SAGESTACK_SHARED=/mnt/fsx bash "$script" >/dev/null
SAGESTACK_SHARED=/mnt/fsx bash "$script" >/dev/null  # it runs again on each node
for d in sagestack sagestack/code sagestack/checkpoints sagestack/models; do
  stat -c "mode $d %a %U %G" "/mnt/fsx/$d"
done
echo "members $(getent group sagestack)"
as() { user=$1; shift; setpriv --reuid "$user" --regid "$user" --init-groups "$@"; }
as outsider touch /mnt/fsx/sagestack/checkpoints/planted.pt 2>/dev/null && echo "outsider wrote" || echo "outsider refused"
as outsider ls /mnt/fsx/sagestack/checkpoints >/dev/null 2>&1 && echo "outsider read" || echo "outsider cannot read"
as ubuntu mkdir /mnt/fsx/sagestack/checkpoints/job && echo "member wrote"
stat -c "made %a %G" /mnt/fsx/sagestack/checkpoints/job
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "setpriv", "useradd")),
    reason="runs on_create.sh in a private mount namespace with its own /etc: needs root, unshare, setpriv",
)
def test_on_create_gives_the_shared_folders_to_a_group_not_to_everyone(tmp_path):
    """On a shared cluster a folder anyone can write is a folder where anyone can plant a checkpoint
    someone else's job loads: the folders belong to root:sagestack (the same gid on every node),
    2770, so members share them (new folders inherit the group) and other users cannot even list them."""
    script = resources.files("sagestack.templates").joinpath("on_create.sh")
    for sub in ("upper", "work"):
        (tmp_path / sub).mkdir()
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "bash",
            "-c",
            ON_CREATE_PROBE,
            "probe",
            str(tmp_path),
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    lines = probe.stdout.splitlines()
    for folder in ("sagestack", "sagestack/code", "sagestack/checkpoints", "sagestack/models"):
        assert f"mode {folder} 2770 root sagestack" in lines, probe.stdout
    assert any(line.startswith("members sagestack:x:57700:") and "ubuntu" in line for line in lines), lines
    assert "outsider refused" in lines and "outsider cannot read" in lines
    assert "member wrote" in lines and "made 2755 sagestack" in lines  # the group travels down
