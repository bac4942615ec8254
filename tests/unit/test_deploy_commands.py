"""`sagestack deploy`, `diff` and `destroy` against a moto server: the real CDK CLI bootstraps and
deploys a copy of the example project's `qa` environment (`cdk deploy --method direct`, as the e2e
tier does), the spec changes, `diff` says what the change does to what runs, `destroy` lists what
it keeps and refuses prod and stacks it did not create. Where a test needs the CLI's argv or exit
code, a recording stand-in `cdk` takes the project's node_modules/.bin place. Screens at 80 columns,
no word cut in two."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.cfn_schemas import TABLE, create_only_table, text
from tests.support.moto_server import ACCOUNT, REGION, MotoServer

CDK = REPO / "node_modules" / ".bin"
PINNED = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:model-package/digits-qa/1"
# What moto can create (tests/e2e/test_deploy_and_run.py says why each line is here).
QA = f"""\
retain_data: false
images:
  train-efa: {{dockerfile: null, dlc: {{framework: pytorch, version: "2.5", py_version: py311}}}}
  train-ngc: {{dockerfile: null, dlc: {{framework: pytorch, version: "2.5", py_version: py311}}}}
jobs: {{classifier-ngc: {{launcher: toolkit}}}}
tracking: {{mlflow: {{server: "arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-tracking-server/shared"}}}}
endpoints: {{digits: {{model_package: "{PINNED}"}}}}
"""
TAGS = [{"Key": "sagestack:project", "Value": "digits"}, {"Key": "sagestack:environment", "Value": "qa"}]


def _sagestack(
    root: Path, env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagestack.cli", args[0], "--root", str(root), *args[1:]],
        env={**env, "COLUMNS": "80"},
        cwd=root,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=600,
    )


def _aws_env(url: str, bins: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_EC2_METADATA_DISABLED="true",
        CDK_DISABLE_VERSION_CHECK="1",
        PYTHONPATH=str(REPO),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    return env


def _whole_words(text: str) -> None:
    """Every line at most 80 columns (a longer one only when it is a single word)."""
    for line in text.splitlines():
        assert len(line) <= 80 or " " not in line.strip(), line


@pytest.fixture(scope="module")
def moto():
    from tests.e2e.test_deploy_and_run import _bridge_emulator_defects

    with pytest.MonkeyPatch.context() as patch:
        _bridge_emulator_defects(patch)
        server = MotoServer()
        server.start()
        yield server
        server.stop()


@pytest.fixture(scope="module")
def qa(moto, tmp_path_factory) -> Path:
    """The example project with a `qa` environment, deployed by `sagestack deploy`."""
    root = tmp_path_factory.mktemp("deploy") / "digits"
    root.mkdir()
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, root / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(
            REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.quotas.json")
        )
    (root / "config/envs/qa.yaml").write_text(QA)
    (root / "node_modules").symlink_to(REPO / "node_modules")
    sm = moto.client("sagemaker")
    sm.create_model_package_group(ModelPackageGroupName="digits-qa")
    sm.create_model_package(
        ModelPackageGroupName="digits-qa",
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [
                {
                    "Image": "785573368785.dkr.ecr.us-east-1.amazonaws.com/sagemaker-inference-pytorch:2.0-cpu-py3",
                    "ModelDataUrl": "s3://bucket/models/compiled/digits/model-ml_c5.tar.gz",
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
        },
    )
    env = _aws_env(moto.url)
    boot = subprocess.run(
        [str(CDK / "cdk"), "bootstrap", f"aws://{ACCOUNT}/{REGION}", "--no-notices"],
        cwd=root, env={**env, "PATH": f"{CDK}{os.pathsep}{env['PATH']}"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert boot.returncode == 0, boot.stderr[-3000:]
    done = _sagestack(
        root, env, "deploy", "--env", "qa", "--require-approval", "never", "--", "--method", "direct"
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "→ cdk deploy --app" in done.stderr and "'qa/*'" in done.stderr
    return root


def test_the_create_only_table_is_cloudformations_own():
    """The table diff reads is the one the provider schemas cfn-lint ships say."""
    assert TABLE.read_text() == text(create_only_table()), "run `python -m tests.support.cfn_schemas`"


@pytest.mark.synth
def test_deploy_ran_the_checks_and_deployed_the_environment(moto, qa):
    cf = moto.client("cloudformation")
    stacks = {s["StackName"]: s for s in cf.describe_stacks()["Stacks"]}
    for name in ("digits-qa-foundation", "digits-qa-training", "digits-qa-serving"):
        assert stacks[name]["StackStatus"] == "CREATE_COMPLETE"
        tags = {t["Key"]: t["Value"] for t in stacks[name]["Tags"]}
        assert tags["sagestack:environment"] == "qa" and tags["sagestack:project"] == "digits"
    assert not any(n.startswith("digits-dev") for n in stacks)  # one environment only


@pytest.mark.synth
def test_diff_with_nothing_changed(moto, qa):
    out = _sagestack(qa, _aws_env(moto.url), "diff", "--env", "qa", "--fail")
    assert out.returncode == 0, out.stderr
    assert "qa: nothing to deploy" in out.stdout
    for name in ("digits-qa-foundation", "digits-qa-training", "digits-qa-serving"):
        assert f"{name} (qa/" in out.stdout and "no change" in out.stdout
    _whole_words(out.stdout)


@pytest.mark.synth
def test_diff_says_a_job_retrains_and_an_endpoint_replaces_instances(moto, qa):
    """A hyperparameter changes the job's content hash; data capture is create-only on the endpoint
    config, so the endpoint that names it is updated onto new instances."""
    overlay = qa / "config/envs/qa.yaml"
    before = overlay.read_text()
    try:
        overlay.write_text(
            before.replace("launcher: toolkit}", "launcher: toolkit}, classifier: {hyperparameters: {epochs: 7}}")
            .replace(f'model_package: "{PINNED}"', f'model_package: "{PINNED}", data_capture: {{sampling_percent: 50}}')
        )  # fmt: skip
        out = _sagestack(qa, _aws_env(moto.url), "diff", "--env", "qa", "--fail")
        as_json = _sagestack(qa, _aws_env(moto.url), "diff", "--env", "qa", "--json")
    finally:
        overlay.write_text(before)
    print(out.stdout, out.stderr[-3000:], as_json.stderr[-3000:])
    assert out.returncode == 1, out.stderr
    document = json.loads(as_json.stdout)
    flat = " ".join(out.stdout.split())
    assert "✗ retrains: pipeline 'classifier': its content hash changes" in flat
    assert "the next run trains again, as digits-qa-classifier-" in flat
    assert "✗ replaces instances: endpoint digits-qa-digits: a new endpoint config" in flat
    assert "digits-qa-foundation (qa/Foundation): no change" in flat
    _whole_words(out.stdout)
    effects = {(e["kind"], e["subject"]) for s in document["stacks"] for e in s["effects"]}
    assert ("retrains", "pipeline 'classifier'") in effects
    assert ("retrains", "pipeline 'lr-search'") in effects  # the search over the job, too
    assert ("replaces instances", "endpoint digits-qa-digits") in effects
    serving = next(s for s in document["stacks"] if s["name"] == "digits-qa-serving")
    config = next(c for c in serving["changes"] if c["type"] == "AWS::SageMaker::EndpointConfig")
    assert config["action"] == "replace" and config["replaced_because"] == ["DataCaptureConfig"]


@pytest.mark.synth
def test_diff_warns_of_a_bucket_replaced_by_a_logical_id_change(moto, qa, tmp_path, capsys):
    """The qa foundation's template as synthesized, against the same template deployed (to moto, as
    a stack of its own) with the artifact bucket under an older logical ID."""
    from sagestack.cli.lifecycle import _print_diff
    from sagestack.ops.cdk_cli import AssemblyStack
    from sagestack.ops.diff import against_deployed

    synthesized = next((qa / "cdk.out" / "assembly-qa").glob("qaFoundation*.template.json"))
    template = json.loads(synthesized.read_text())
    bucket = next(
        lid for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::S3::Bucket" and lid.startswith("Artifacts") and "AccessLogs" not in lid
    )  # fmt: skip
    # the bucket alone (moto would refuse a second copy of the stack's named resources)
    kept = {k: v for k, v in template["Resources"][bucket].items() if k != "Properties"}
    template = {"Resources": {bucket: kept}}
    synthesized = tmp_path / "new.template.json"
    synthesized.write_text(json.dumps(template))
    older = json.dumps(template).replace(bucket, "ArtifactsBucketOld")
    cf = moto.client("cloudformation")
    cf.create_stack(StackName="bucket-moved", TemplateBody=older)
    try:
        stack = AssemblyStack("qa/Foundation", "bucket-moved", {}, synthesized)
        (diffed,) = against_deployed(cf, [stack])
    finally:
        cf.delete_stack(StackName="bucket-moved")
    _print_diff("qa", [diffed])
    flat = " ".join(capsys.readouterr().out.split())
    assert f"✗ deletes data: bucket ArtifactsBucketOld: replaced (logical ID ArtifactsBucketOld → {bucket}): it is deleted with its data" in flat  # fmt: skip
    (moved,) = [c for c in diffed.changes if c.old_id == "ArtifactsBucketOld"]
    assert moved.action == "replace" and not moved.retained


PROD_STACK = {
    "Resources": {
        "Artifacts": {"Type": "AWS::S3::Bucket", "DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"},
        "Topic": {"Type": "AWS::SNS::Topic"},
    }
}
PROD_TAGS = [
    {"Key": "sagestack:project", "Value": "digits"},
    {"Key": "sagestack:environment", "Value": "prod"},
]


@pytest.mark.synth
def test_destroy_lists_what_prod_keeps_and_refuses_without_its_name_typed(moto, qa):
    cf = moto.client("cloudformation")
    cf.create_stack(StackName="digits-prod-foundation", TemplateBody=json.dumps(PROD_STACK), Tags=PROD_TAGS)
    try:
        out = _sagestack(qa, _aws_env(moto.url), "destroy", "--env", "prod")
        wrong = _sagestack(qa, _aws_env(moto.url), "destroy", "--env", "prod", "--confirm", "staging")
    finally:
        cf.delete_stack(StackName="digits-prod-foundation")
    print(out.stdout, out.stderr[-2000:])
    assert out.returncode == 1, out.stderr
    flat = " ".join(out.stdout.split())
    assert "prod: destroys digits-prod-foundation" in flat
    assert "kept after the destroy (retain_data: true)" in flat
    assert "(digits-prod-foundation/Artifacts)" in flat
    err = " ".join(out.stderr.split())
    assert (
        "not destroyed: 'prod' is a production environment (its name starts with 'prod'): no terminal" in err
    )
    assert f"`sagestack destroy --env prod --confirm prod --root {qa}`" in err
    assert wrong.returncode == 1 and "type the environment's own name (prod)" in wrong.stderr
    _whole_words(out.stdout)


@pytest.mark.synth
def test_destroy_refuses_a_stack_sagestack_did_not_create(moto, qa):
    cf = moto.client("cloudformation")
    cf.create_stack(
        StackName="digits-prod-training",
        TemplateBody=json.dumps(PROD_STACK),
        Tags=[{"Key": "team", "Value": "x"}],
    )
    cf.create_stack(StackName="digits-prod-foundation", TemplateBody=json.dumps(PROD_STACK), Tags=PROD_TAGS)
    try:
        out = _sagestack(qa, _aws_env(moto.url), "destroy", "--env", "prod", "--confirm", "prod")
        alive = {s["StackName"]: s["StackStatus"] for s in cf.describe_stacks()["Stacks"]}
    finally:
        for name in ("digits-prod-training", "digits-prod-foundation"):
            cf.delete_stack(StackName=name)
    assert out.returncode == 1, out.stderr
    flat = " ".join(out.stdout.split())
    assert "✗ digits-prod-training is deployed but sagestack did not create it (its tags: team=x;" in flat
    assert "nothing was deleted" in flat
    assert alive["digits-prod-training"] == alive["digits-prod-foundation"] == "CREATE_COMPLETE"
    assert "→ cdk destroy" not in out.stderr
    _whole_words(out.stdout)


@pytest.mark.synth
def test_destroy_deletes_the_environment_it_deployed(moto, qa):
    out = _sagestack(qa, _aws_env(moto.url), "destroy", "--env", "qa", "--confirm", "qa")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "nothing is retained" in out.stdout
    assert "→ cdk destroy --app" in out.stderr and "qa/Foundation" in out.stderr
    left = [
        s["StackName"]
        for s in moto.client("cloudformation").list_stacks(
            StackStatusFilter=["CREATE_COMPLETE", "UPDATE_COMPLETE"]
        )["StackSummaries"]
    ]
    assert not [n for n in left if n.startswith("digits-qa")]
    assert "CDKToolkit" in left  # never a stack sagestack did not create


RECORDER = """#!/bin/sh
# A stand-in for the CDK CLI: records its arguments and PATH, exits as told.
printf '%s\\n' "$@" > "$(dirname "$0")/argv"
printf '%s' "$PATH" > "$(dirname "$0")/path"
exit "${CDK_EXIT:-0}"
"""


@pytest.fixture
def recorded(tmp_path) -> Path:
    """The example project with a recording `cdk` where `npm install` puts the project's."""
    root = tmp_path / "digits"
    root.mkdir()
    for name in ("app.py", "cdk.json"):
        shutil.copy(REPO / name, root / name)
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(
            REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.quotas.json")
        )
    bins = root / "node_modules" / ".bin"
    bins.mkdir(parents=True)
    (bins / "cdk").write_text(RECORDER)
    (bins / "cdk").chmod(0o755)
    return root


@pytest.mark.synth
def test_deploy_runs_the_projects_cdk_over_the_checked_assembly_and_passes_its_exit_code(recorded):
    env = {**_aws_env("http://127.0.0.1:9"), "CDK_EXIT": "7"}  # nothing listens: no AWS call is made
    out = _sagestack(recorded, env, "deploy", "--env", "dev", "--skip-checks", "--", "--method", "direct")
    assert out.returncode == 7, out.stderr[-3000:]
    bins = recorded / "node_modules" / ".bin"
    argv = (bins / "argv").read_text().splitlines()
    assert argv == [
        "deploy", "--app", str(recorded / "cdk.out"), "--no-notices",
        "--require-approval", "broadening", "--method", "direct", "dev/*",
    ]  # fmt: skip
    assert (bins / "path").read_text().startswith(f"{bins}{os.pathsep}")  # the project's Node first
    manifests = sorted(p.parent.name for p in (recorded / "cdk.out").glob("assembly-*/manifest.json"))
    assert manifests == ["assembly-dev"]  # one environment synthesized, no delivery pipeline


@pytest.mark.synth
def test_deploy_stops_at_the_synths_checks_with_their_exit_code(recorded):
    """A quota short in the snapshot: the synth's exit 3, and the CDK CLI never runs."""
    snapshot = {"account": ACCOUNT, "region": REGION, "quotas": [
        {"QuotaName": "ml.g4dn.xlarge for training job usage", "QuotaCode": "L-1", "Value": 0.0},
        {"QuotaName": "ml.m5.xlarge for training job usage", "QuotaCode": "L-2", "Value": 0.0},
    ], "usage": {}}  # fmt: skip
    (recorded / "config/envs/dev.quotas.json").write_text(json.dumps(snapshot))
    out = _sagestack(recorded, _aws_env("http://127.0.0.1:9"), "deploy", "--env", "dev", "--skip-checks")
    assert out.returncode == 3, out.stderr[-3000:]
    assert not (recorded / "node_modules/.bin/argv").exists()


def test_the_real_cli_selects_exactly_the_environments_stacks_with_its_pattern(tmp_path):
    """The pattern deploy passes, against the real CDK CLI (`cdk ls`) over an assembly of two
    environments: each pattern selects its own stage's stacks only."""
    from sagestack.ops.cdk_cli import stack_pattern

    out = tmp_path / "cdk.out"
    for env in ("dev", "qa"):
        nested = out / f"assembly-{env}"
        nested.mkdir(parents=True)
        (nested / "S.template.json").write_text(json.dumps({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}))
        artifact = {"type": "aws:cloudformation:stack", "environment": "aws://unknown-account/unknown-region",
                    "properties": {"templateFile": "S.template.json", "stackName": f"digits-{env}-foundation"},
                    "displayName": f"{env}/Foundation"}  # fmt: skip
        (nested / "manifest.json").write_text(
            json.dumps({"version": "36.0.0", "artifacts": {f"{env}Foundation": artifact}})
        )
    (out / "manifest.json").write_text(json.dumps({"version": "36.0.0", "artifacts": {
        f"assembly-{env}": {"type": "cdk:cloud-assembly", "properties": {"directoryName": f"assembly-{env}", "displayName": env}}
        for env in ("dev", "qa")}}))  # fmt: skip
    (out / "cdk.out").write_text(json.dumps({"version": "36.0.0"}))
    listed = subprocess.run(
        [str(CDK / "cdk"), "ls", "--app", str(out), "--no-notices", stack_pattern("qa")],
        env={**os.environ, "PATH": f"{CDK}{os.pathsep}{os.environ['PATH']}", "CDK_DISABLE_VERSION_CHECK": "1"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["qa/Foundation", "(digits-qa-foundation)"]


@pytest.mark.parametrize("command", ["deploy", "diff", "destroy"])
def test_no_credentials_is_one_line_before_anything_runs(recorded, tmp_path, command):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true", PYTHONPATH=str(REPO),
    )  # fmt: skip
    out = _sagestack(recorded, env, command, "--env", "dev")
    assert out.returncode == 1
    assert out.stderr.startswith("sagestack: no AWS credentials: configure a profile"), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (recorded / "cdk.out").exists()  # nothing synthesized, nothing run


def test_a_missing_cdk_cli_says_how_to_install_it(tmp_path, monkeypatch):
    from sagestack.ops.cdk_cli import CdkCliMissing, find_cdk

    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "package.json").write_text("{}")
    with pytest.raises(CdkCliMissing, match=r"run `npm install` in the project"):
        find_cdk(tmp_path)
