"""`launcher: drivers` deployed: jobs under the SDK v3's contract on images that are no DLC (a
registry image, one built FROM NVIDIA's PyTorch), alone, under torchrun on two spot hosts with
checkpoints, under MPI, with Debugger/Profiler, TensorBoard, MLflow and a schedule, and a search over a
drivers job on a DLC, synthesized for an environment without an account and one with, cdk-nag's packs,
cfn-lint and checkov passing. Each job's launch files (its code unpacked, its drivers) are staged in
the assembly and unpacked under their content-addressed prefix; the state machine waits for them, its
CreateTrainingJob reads them as the code and sm_drivers channels, and the execution role may read
that prefix."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from tests.constructs.test_nag import COMPLIANCE
from tests.support.cdk_app import BuiltApp
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

SPEC = f"""\
project: drv
region: us-east-1
{COMPLIANCE}tracking: {{mlflow: {{}}}}
images:
  registry: {{uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1}}
  ngc: {{dockerfile: containers/ngc}}
  dlc: {{dlc: {{framework: pytorch, version: "2.5", py_version: py311}}}}
jobs:
  single:
    image: registry
    launcher: drivers
    instance_type: ml.g5.2xlarge
    metric_definitions: {{loss: 'loss=([0-9.]+)'}}
    tensorboard: true
    debugger: {{rules: [{{rule: loss_not_decreasing}}]}}
    profiler: {{system_interval_ms: 500, rules: [profiler_report]}}
    schedule: {{expression: cron(0 3 ? * MON *)}}
  torchrun:
    image: ngc
    launcher: drivers
    instance_type: ml.g5.12xlarge
    instance_count: 2
    distribution: {{torch_distributed: {{}}}}
    use_spot_instances: true
    max_run: 2h
    max_wait: 4h
    checkpoint: {{every_steps: 100}}
  mpi:
    image: ngc
    launcher: drivers
    instance_type: ml.g5.12xlarge
    distribution: {{mpi: {{processes_per_host: 4}}}}
  tuned:
    image: dlc
    launcher: drivers
    instance_type: ml.m5.xlarge
    metric_definitions: {{loss: 'loss=([0-9.]+)'}}
  classic:
    image: dlc
    instance_type: ml.m5.xlarge
tuning:
  search:
    job: tuned
    objective: {{metric: loss, type: Minimize}}
    ranges: {{lr: {{continuous: [1.0e-4, 1.0e-1]}}}}
    max_jobs: 4
    max_parallel_jobs: 2
"""
DRIVERS_JOBS = ("single", "torchrun", "mpi", "tuned")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from tests.conftest import Project

    project = Project(tmp_path_factory.mktemp("drivers") / "p")
    project.spec(SPEC)
    project.write("containers/ngc/Dockerfile", "FROM nvcr.io/nvidia/pytorch:25.01-py3\n")
    project.write("training_src/requirements.txt", "numpy\nmlflow\nsagemaker-mlflow\n")
    project.write("training_src/lib/util.py", "X = 1\n")
    project.env("dev", "retain_data: false\n")  # no account: an environment-agnostic stage
    project.env("prod", 'account: "111111111111"\n')
    out = tmp_path_factory.mktemp("drivers-out")
    return BuiltApp(project.root, out, ["dev", "prod"]), out, project.root


def _expected_digest(root: Path, job) -> tuple[str, dict[str, bytes], dict[str, bytes]]:  # type: ignore[no-untyped-def]
    """The prefix's hash as the contract states it (sha256 of the archive's and the drivers' sha256,
    16 hex), and the files the prefix must hold: the archive's members and the packed drivers."""
    import io
    import tarfile

    from sagestack.core.sourcedir import pack_source_dir
    from sagestack.training.launcher import pack_job_drivers

    archive = pack_source_dir(root / "training_src")
    drivers = pack_job_drivers(job, archive.files)
    with tarfile.open(fileobj=io.BytesIO(archive.data)) as tar:
        code = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    digest = hashlib.sha256(f"{archive.sha256}\0{drivers.sha256}".encode()).hexdigest()[:16]
    return digest, code, drivers.files


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _joined(value: object) -> str:
    """A template value (a string, or an Fn::Join) with each token as '<token>'."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict), value
    if "Fn::Join" not in value:
        return "<token>"
    sep, parts = value["Fn::Join"]
    return str(sep).join(p if isinstance(p, str) else "<token>" for p in parts)


def _resolved(stack: Stack, value: object) -> str:
    """A value with its tokens as cdk-nag writes them (Ref X -> <X>, an import -> the export's name)."""
    from sagestack.constructs.nag import nag_text

    return nag_text(stack, value) if isinstance(value, str) else json.dumps(stack.resolve(value))


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_each_drivers_job_deploys_its_launch_files_under_their_content_addressed_prefix(built, env):
    from sagestack.project.requests import render_training

    app, _, root = built
    stage = app.stages[env]
    training = Template.from_stack(stage.training)
    deployments = training.find_resources("Custom::CDKBucketDeployment")
    prefixes = {}
    for key in DRIVERS_JOBS:
        pipeline = stage.training.pipelines[key]
        digest, code, drivers = _expected_digest(root, pipeline.job_spec)
        prefixes[key] = f"code/jobs/{digest}/"
        (lid,) = [lid for lid in deployments if lid.startswith(f"LaunchFiles{digest}")]
        assert deployments[lid]["Properties"]["DestinationBucketKeyPrefix"] == prefixes[key]
        assert deployments[lid]["Properties"]["Prune"] is True
        # staged once per content in the assembly: exactly the archive's files and the drivers
        staged = Path(stage.outdir) / ".sagestack-launch-files" / digest
        assert _files(staged / "code") == code and "requirements.txt" in code
        assert _files(staged / "sm_drivers") == drivers
    # the spec path's rendering (what `sagestack lock` records) names the same digests
    rendered = render_training(stage.plan, root).launch_files
    assert rendered == {k: p.split("/")[2] for k, p in prefixes.items()}  # the toolkit job has none
    # torchrun and MPI pack other drivers; the plain jobs of one folder share their files and upload
    assert len(set(prefixes.values())) == 3 and prefixes["single"] == prefixes["tuned"]
    assert len([lid for lid in deployments if lid.startswith("LaunchFiles")]) == 3


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_state_machine_waits_for_the_upload_and_reads_the_two_channels_there(built, env):
    app, _, root = built
    stage = app.stages[env]
    training = Template.from_stack(stage.training).to_json()["Resources"]
    for key in DRIVERS_JOBS:
        pipeline = stage.training.pipelines[key]
        digest, _, _ = _expected_digest(root, pipeline.job_spec)
        machine = pipeline.state_machine.node.default_child.logical_id  # type: ignore[union-attr]
        machine = Stack.of(pipeline).resolve(machine)
        waits = [d for d in training[machine]["DependsOn"] if d.startswith(f"LaunchFiles{digest}")]
        assert [training[d]["Type"] for d in waits] == ["Custom::CDKBucketDeployment"]
        definition = json.dumps(training[machine]["Properties"]["DefinitionString"])
        for channel in ("code", "sm_drivers"):
            assert f"/code/jobs/{digest}/{channel}/" in definition
        request = pipeline.job_plan.candidates[0].request
        uris = {
            c["ChannelName"]: _resolved(Stack.of(pipeline), c["DataSource"]["S3DataSource"]["S3Uri"])
            for c in request["InputDataConfig"]
        }
        assert uris["code"].endswith(f"/code/jobs/{digest}/code/") and uris["code"].startswith("s3://")
        assert uris["sm_drivers"].endswith(f"/code/jobs/{digest}/sm_drivers/")
        assert request["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
        assert '"ContainerEntrypoint":["/bin/bash"]' in definition.replace(" ", "").replace('\\"', '"')
        assert "sagemaker_program" not in request["HyperParameters"]
    torchrun = stage.training.pipelines["torchrun"].job_plan.candidates[0].request
    assert torchrun["EnableManagedSpotTraining"] is True and "CheckpointConfig" in torchrun
    single = stage.training.pipelines["single"].job_plan.candidates[0].request
    assert {"TensorBoardOutputConfig", "DebugHookConfig", "ProfilerConfig", "MlflowConfig"} <= set(single)
    assert stage.training.pipelines["single"].retraining is not None


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_roles_may_touch_only_the_launch_files_prefixes(built, env):
    app, _, root = built
    stage = app.stages[env]
    prefixes = {
        f"code/jobs/{_expected_digest(root, stage.training.pipelines[k].job_spec)[0]}/" for k in DRIVERS_JOBS
    }
    # the deploy role (CDK's deployment function): objects under each job's prefix, and the staged zip
    training = Template.from_stack(stage.training).to_json()["Resources"]
    (policy,) = [
        r
        for lid, r in training.items()
        if r["Type"] == "AWS::IAM::Policy" and lid.startswith("LaunchFilesDeployRole")
    ]
    written, listed = set(), set()
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        if "s3:PutObject" in actions or "s3:DeleteObject" in actions:
            written |= {_joined(r).split("/", 1)[1].removesuffix("*") for r in resources}
        if "s3:ListBucket" in actions:
            listed |= {p.removesuffix("*") for p in statement["Condition"]["StringLike"]["s3:prefix"]}
    assert written == prefixes and listed == prefixes
    # the execution role: read and list each prefix (its own statements, beside the role's code/*)
    foundation = Template.from_stack(stage.foundation).to_json()["Resources"]
    read, listed = set(), set()
    for r in foundation.values():
        if r["Type"] != "AWS::IAM::Policy":
            continue
        for statement in r["Properties"]["PolicyDocument"]["Statement"]:
            resources = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            if statement["Action"] == "s3:GetObject":  # CDK merges the statements of one action
                jobs = [_joined(r) for r in resources if "/code/jobs/" in _joined(r)]
                read |= {r.split("/", 1)[1].removesuffix("*") for r in jobs}
            prefix = statement.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
            if statement["Action"] == "s3:ListBucket" and prefix and prefix[0].startswith("code/jobs/"):
                listed |= {p.removesuffix("*") for p in prefix}
    assert read == prefixes and listed == prefixes


def test_templates_pass_cfn_lint_and_checkov(built):
    from tests.iam.judge import checkov
    from tests.iam.reasons import BUCKET_DEPLOYMENT_CHECKOV, CHECKOV

    _, out, _ = built
    templates = sorted(str(p) for p in out.glob("assembly-*/*.template.json"))
    code, output = cfn_lint(templates)
    assert code == 0, output
    found = Counter((f["check_id"], f["resource"]) for f in checkov(out))
    unexplained = sorted(k for k in found if k not in {**CHECKOV, **BUCKET_DEPLOYMENT_CHECKOV})
    assert unexplained == [], unexplained
