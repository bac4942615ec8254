"""The delivery pipeline (CDK Pipelines): its source, synth step, one stage per environment in
order with prod behind a manual approval, the cross-account deploy roles; cdk-nag and cfn-lint
clean; the spec rules; and `sagestack check`'s bootstrap-trust line against a moto server."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sagestack.cli import app
from tests.support.cfn import cfn_lint

pytestmark = pytest.mark.synth

CONNECTION = "arn:aws:codeconnections:us-east-1:333333333333:connection/0a1b2c3d-4e5f"
DELIVERY = f"""
delivery:
  account: "333333333333"
  source: {{connection: {CONNECTION}, repository: example-org/digits, branch: release}}
  environments: [dev, staging, prod]
"""


@pytest.fixture(scope="module")
def delivered(tmp_path_factory):
    import shutil

    from tests.conftest import REPO, Project
    from tests.support.cdk_app import BuiltApp

    root = tmp_path_factory.mktemp("proj") / "p"
    Project(root)  # training_src/ and config/ folders
    shutil.rmtree(root / "config")
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "containers", root / "containers")
    spec = root / "config/sagestack.yaml"
    spec.write_text(spec.read_text() + DELIVERY)
    out = tmp_path_factory.mktemp("out")
    built = BuiltApp(root, out, None)  # every environment: the pipeline deploys them all
    built.root = root  # type: ignore[attr-defined]
    built.out = out  # type: ignore[attr-defined]
    return built


def _pipeline(built) -> dict:
    template = json.loads((built.out / "Delivery.template.json").read_text())
    (pipeline,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    return pipeline["Properties"]


def test_stages_deploy_each_environment_in_order_and_prod_waits_for_approval(delivered):
    props = _pipeline(delivered)
    assert props["Name"] == "digits-delivery" and props["PipelineType"] == "V2"
    names = [s["Name"] for s in props["Stages"]]
    assert names[:2] == ["Source", "Build"] and names[-3:] == ["dev", "staging", "prod"]
    stages = {s["Name"]: s["Actions"] for s in props["Stages"]}
    (source,) = stages["Source"]
    assert source["ActionTypeId"]["Provider"] == "CodeStarSourceConnection"
    assert source["Configuration"]["ConnectionArn"] == CONNECTION
    assert source["Configuration"]["FullRepositoryId"] == "example-org/digits"
    assert source["Configuration"]["BranchName"] == "release"
    # prod: the approval runs first, every deploy after it
    prod = sorted(stages["prod"], key=lambda a: a["RunOrder"])
    assert prod[0]["ActionTypeId"]["Category"] == "Approval"
    assert all(a["RunOrder"] > prod[0]["RunOrder"] for a in prod[1:])
    assert {a["Configuration"]["StackName"] for a in prod[1:]} >= {
        "digits-prod-foundation",
        "digits-prod-serving",
    }
    assert not any(a["ActionTypeId"]["Category"] == "Approval" for a in stages["dev"] + stages["staging"])
    # each stage deploys with its own account's bootstrap role (cross-account)
    for env, account in (("staging", "222222222222"), ("prod", "111111111111")):
        roles = {
            json.dumps(a.get("RoleArn")) for a in stages[env] if a["ActionTypeId"]["Category"] == "Deploy"
        }
        assert roles and all(
            f"iam::{account}:role/cdk-hnb659fds-deploy-role-{account}" in r for r in roles
        ), roles


def test_the_synth_step_runs_the_fast_tests_then_a_locked_synth(delivered):
    template = json.loads((delivered.out / "Delivery.template.json").read_text())
    projects = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::CodeBuild::Project"
    ]
    specs = [json.loads(p["Source"]["BuildSpec"]) for p in projects if "BuildSpec" in p.get("Source", {})]
    (synth,) = [s for s in specs if any("cdk synth" in c for c in s["phases"]["build"]["commands"])]
    commands = synth["phases"]["build"]["commands"]
    assert "not synth and not e2e and not train" in commands[0]
    assert commands[-1] == "npx cdk synth --quiet -c sagestack:locked=true"
    assert any("pip install" in c for c in synth["phases"]["install"]["commands"])
    assert synth["artifacts"]["base-directory"] == "cdk.out"


def test_the_pipeline_s_artifact_bucket_is_versioned_and_logged_to_its_own_log_bucket(delivered):
    template = json.loads((delivered.out / "Delivery.template.json").read_text())
    buckets = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"}
    (pipeline_id,) = [k for k in buckets if k.startswith("PipelineArtifactsBucket")]
    artifacts = buckets[pipeline_id]["Properties"]
    assert artifacts["VersioningConfiguration"] == {"Status": "Enabled"}
    logging = artifacts["LoggingConfiguration"]
    log_id = logging["DestinationBucketName"]["Ref"]
    assert log_id in buckets and log_id != pipeline_id and logging["LogFilePrefix"] == "pipeline-artifacts/"
    logs = buckets[log_id]["Properties"]
    assert logs["VersioningConfiguration"] == {"Status": "Enabled"}
    assert logs["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    # S3 log delivery may write there, for this source bucket only (the bucket policy, not an ACL)
    (policy,) = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": log_id}
    ]
    (delivery,) = [s for s in policy if s.get("Principal") == {"Service": "logging.s3.amazonaws.com"}]
    assert delivery["Action"] == "s3:PutObject"
    assert delivery["Condition"]["ArnLike"]["aws:SourceArn"] == {"Fn::GetAtt": [pipeline_id, "Arn"]}


def test_the_delivery_template_passes_cfn_lint(delivered):
    code, output = cfn_lint([str(delivered.out / "Delivery.template.json")])
    assert code == 0, output


def test_a_synth_of_some_environments_leaves_the_pipeline_out(delivered, tmp_path):
    from aws_cdk import App

    from sagestack.app.builder import build_app

    app_ = App(
        outdir=str(tmp_path / "o"), context={"sagestack:environments": "dev", "sagestack:quotas": "off"}
    )
    build_app(app_, delivered.root, nag=False)
    assert app_.node.try_find_child("Delivery") is None


def test_delivery_rules(project):
    project.spec(
        """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier: {image: train, instance_type: ml.m5.xlarge}
delivery:
  account: "333333333333"
  source: {bucket: my-sources, key: digits.zip}
  environments: [dev, stagin, prod, dev]
  approval: [production]
"""
    ).env("dev").env("staging").env("prod")
    errors = project.errors()
    text = "\n".join(errors)
    assert (
        "delivery.environments[1]: no environment 'stagin' (config/envs/stagin.yaml); did you mean 'staging'?"
        in text
    )
    assert "delivery.environments[3]: 'dev' is deployed twice" in text
    assert "delivery.approval[0]: 'production' is not one of the environments the pipeline deploys" in text
    assert all("config/sagestack.yaml:" in e for e in errors if "delivery" in e)
    spec = project.root / "config/sagestack.yaml"
    spec.write_text(
        spec.read_text().replace("[dev, stagin, prod, dev]", "[dev, prod]").replace("[production]", "[]")
    )
    warnings = [w.format() for w in project.load().warnings]
    assert any("'prod' deploys without a manual approval; add it to delivery.approval" in w for w in warnings)
    bad_source = spec.read_text().replace(
        "{bucket: my-sources, key: digits.zip}", "{connection: arn:aws:s3:::x}"
    )
    spec.write_text(bad_source)
    (source,) = [e for e in project.errors() if "delivery.source" in e]
    assert "is not a CodeConnections ARN" in source


def test_check_says_whether_the_bootstrap_trusts_the_delivery_account(delivered, monkeypatch, tmp_path):
    import shutil

    from tests.support.moto_server import ACCOUNT, running_moto

    root = tmp_path / "p"
    shutil.copytree(delivered.root, root)
    # prod in moto's account, so the credentials check passes
    prod = root / "config/envs/prod.yaml"
    # (its pin too: prod serves only its own account's packages, rule pin-own-account)
    prod.write_text(prod.read_text().replace("111111111111", ACCOUNT))
    bootstrap = {
        "Parameters": {"TrustedAccounts": {"Type": "CommaDelimitedList", "Default": ""}},
        "Resources": {
            "Version": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "/cdk-bootstrap/hnb659fds/version", "Type": "String", "Value": "27"},
            }
        },
    }
    with running_moto() as moto:
        monkeypatch.setenv("AWS_ENDPOINT_URL", moto.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        cfn = moto.client("cloudformation")

        def check() -> str:
            result = CliRunner().invoke(
                app, ["check", "--env", "prod", "--root", str(root)], env={"COLUMNS": "400"}
            )
            return next(line for line in result.output.splitlines() if "delivery trust" in line)

        cfn.create_stack(
            StackName="CDKToolkit",
            TemplateBody=json.dumps(bootstrap),
            Parameters=[{"ParameterKey": "TrustedAccounts", "ParameterValue": "444444444444"}],
        )
        line = check()
        assert line.startswith("✗") and "does not trust the delivery account 333333333333" in line
        assert "it trusts 444444444444" in line
        assert f"cdk bootstrap aws://{ACCOUNT}/us-east-1 --trust 333333333333" in line
        cfn.update_stack(
            StackName="CDKToolkit",
            TemplateBody=json.dumps(bootstrap),
            Parameters=[{"ParameterKey": "TrustedAccounts", "ParameterValue": "444444444444,333333333333"}],
        )
        line = check()
        assert line.startswith("✓") and "trusts the delivery account 333333333333" in line
