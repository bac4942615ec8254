"""`sagestack promote --from staging --to prod` across two accounts on one moto server (moto keeps
resources per account; AssumeRole into another account's role acts in it): staging (222222222222)
registers packages for a compiled endpoint, an uncompiled one, a transform and an optimized LLM in
its one group, as its pipelines do (the register requests rendered by endpoints/request.py and
llm/optimization_job.py), artifacts in its bucket. Promotion runs with prod's credentials (via
staging's reader role), copies the entry's own package into prod's bucket and registry, verified,
and pins prod's own package; prod then creates its model from it."""

from __future__ import annotations

import hashlib

import boto3
import pytest
import requests
from typer.testing import CliRunner

from sagestack.core.names import Names
from sagestack.ops.promote import PromotionError, promote
from tests.support.accounts import Account, account
from tests.support.moto_server import running_moto

STAGING, PROD = "222222222222", "111111111111"
SPEC = """\
project: digits
region: us-east-1
promotion: [dev, staging, prod]
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  classifier:
    image: train
    source_dir: training_src
    entry_point: train.py
    instance_type: ml.m5.xlarge
endpoints:
  digits:
    model: {from: classifier}
    compile: {target_device: ml_c5, framework: PYTORCH, framework_version: "2.0", input_shapes: {input0: [1, 1, 8, 8]}}
    instance_type: ml.c5.xlarge
  plain:
    model: {from: classifier}
    instance_type: ml.c5.xlarge
  chat:
    instance_type: ml.g5.2xlarge
    llm:
      container: djl-lmi
      weights: {s3: models/chat/}
      parameters: 1.0e9
      dtype: fp16
      max_total_tokens: 4096
      optimize: {quantization: awq}
transforms:
  score:
    model: {from: classifier}
    instance_type: [ml.m5.xlarge]
"""
STAGING_ENV = f'account: "{STAGING}"\n'
PROD_ENV = f'account: "{PROD}"\nrequire_approved_models: true\n'
ENTRIES = ("digits", "plain", "score", "chat")


@pytest.fixture(scope="module")
def server():
    with running_moto() as s:
        yield s


@pytest.fixture
def world(server, project, monkeypatch):
    """Staging's registrations (digits first, so the others lie newer in the group) and bucket,
    its reader role trusting prod, prod's bucket and group; the caller holds prod's credentials."""
    server.reset()
    proj = project.spec(SPEC).env("dev").env("staging", STAGING_ENV).env("prod", PROD_ENV)
    staging, prod = account(server, STAGING), account(server, PROD)
    staging_bucket = staging.foundation("digits", "staging")
    prod_bucket = prod.foundation("digits", "prod")
    staging.reader_role("digits", "staging", trusted=PROD)
    packages = _register(proj, staging, staging_bucket)
    prod.use(monkeypatch)
    return proj, staging, prod, prod_bucket, packages


def _register(proj, staging: Account, bucket: str) -> dict[str, tuple[str, dict[str, bytes]]]:
    """entry -> (its Approved package ARN, {relative name: bytes}), registered by the requests
    staging's pipelines send, pointing at objects in staging's bucket."""
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment

    rendered = render_environment(resolve_environment(proj.load("staging")), proj.root)
    requests_ = {
        "digits": rendered.endpoints["digits"]["CreateModelPackage"],
        "plain": rendered.endpoints["plain"]["CreateModelPackage"],
        "score": rendered.transforms["score"]["CreateModelPackage"],
        "chat": rendered.optimizations["chat"]["CreateModelPackage"],
    }
    s3, sm = staging.client("s3"), staging.client("sagemaker")
    out = {}
    for entry, request in requests_.items():
        assert request["ModelPackageGroupName"] == Names("digits", "staging").model_package_group
        container = request["InferenceSpecification"]["Containers"][0]
        if entry == "chat":  # the optimization job's output: uncompressed files under a prefix
            prefix = "optimized/chat/job-1/"
            files = {"config.json": b'{"q": "awq"}', "model.safetensors": b"w" * 4096}
            container["ModelDataSource"]["S3DataSource"]["S3Uri"] = f"s3://{bucket}/{prefix}"
        else:
            prefix = (
                f"output/classifier/{entry}-job/output/" if entry != "digits" else "models/compiled/digits/"
            )
            files = {"model.tar.gz": f"{entry} weights".encode()}
            container["ModelDataUrl"] = f"s3://{bucket}/{prefix}model.tar.gz"
        for name, body in files.items():
            s3.put_object(Bucket=bucket, Key=prefix + name, Body=body)
        arn = sm.create_model_package(**request)["ModelPackageArn"]
        # approved after review (moto's UpdateModelPackage drops the metadata it is not given again)
        sm.update_model_package(
            ModelPackageArn=arn,
            ModelApprovalStatus="Approved",
            CustomerMetadataProperties=request["CustomerMetadataProperties"],
        )
        out[entry] = (arn, files)
    return out


def _objects(prod: Account, uri: str) -> dict[str, bytes]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    s3 = prod.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    return {k[len(prefix) :]: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_entry_is_copied_into_prod_and_prod_pins_its_own_package(world, entry):
    proj, _, prod, prod_bucket, packages = world
    source_arn, files = packages[entry]
    result = promote(proj.root, entry, "staging", "prod")

    arn = result.package_arn
    assert arn.startswith(f"arn:aws:sagemaker:us-east-1:{PROD}:model-package/digits-prod/"), arn
    assert result.status == "Approved" and result.copied is not None and not result.copied.reused
    pinned = proj.load("prod").spec
    serving = pinned.transforms[entry] if entry == "score" else pinned.endpoints[entry]
    assert serving.model_package == arn
    sm = prod.client("sagemaker")
    d = sm.describe_model_package(ModelPackageName=arn)
    meta = d["CustomerMetadataProperties"]
    # the entry's own package (not the newer ones of the other entries), with its lineage
    assert meta["sagestack:promoted-from"] == source_arn
    assert meta[f"sagestack:{'transform' if entry == 'score' else 'endpoint'}"] == entry
    assert meta["sagestack:environment"] == "staging"
    digest = hashlib.sha256(
        "".join(sorted(f"{k}\t{hashlib.sha256(v).hexdigest()}\n" for k, v in files.items())).encode()
    ).hexdigest()[:16]
    assert meta["sagestack:promoted-digest"] == digest
    prefix = f"s3://{prod_bucket}/models/promoted/{entry}/{digest}/"
    container = d["InferenceSpecification"]["Containers"][0]
    served = (
        container["ModelDataSource"]["S3DataSource"]["S3Uri"]
        if entry == "chat"
        else container["ModelDataUrl"]
    )
    assert served == (prefix if entry == "chat" else prefix + "model.tar.gz")
    assert _objects(prod, prefix) == files  # byte for byte, in prod's bucket
    # prod's deploy creates its model from what was promoted, in prod's account
    sm.create_model(
        ModelName=f"digits-prod-{entry}",
        PrimaryContainer={"ModelPackageName": arn},
        ExecutionRoleArn=f"arn:aws:iam::{PROD}:role/digits-prod-execution",
    )
    model = sm.describe_model(ModelName=f"digits-prod-{entry}")
    assert model["ModelArn"].split(":")[4] == PROD
    assert model["PrimaryContainer"]["ModelPackageName"] == arn

    # again: the copy is found, nothing is registered twice, the pin stands
    again = promote(proj.root, entry, "staging", "prod")
    assert again.copied is not None and again.copied.reused and not again.changed
    group = sm.list_model_packages(ModelPackageGroupName="digits-prod")["ModelPackageSummaryList"]
    assert [s["ModelPackageArn"] for s in group] == [arn]


def test_the_cli_says_what_it_copied_and_what_to_review(world):
    from sagestack.cli import app

    proj, _, _, prod_bucket, _ = world
    root = ["--root", str(proj.root)]
    result = CliRunner().invoke(app, ["promote", "score", "--from", "staging", "--to", "prod", *root])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "copied into prod's account: 1 object(s), 13 bytes, verified by digest" in text
    assert (
        f"registered in prod's group as arn:aws:sagemaker:us-east-1:{PROD}:model-package/digits-prod/1"
        in text
    )
    assert f"under s3://{prod_bucket}/models/promoted/score/" in text
    assert "✓ promoted score: staging → prod (Approved)" in text
    prose = [line for line in result.output.splitlines() if "s3://" not in line and "arn:" not in line]
    assert all(len(line) <= 80 for line in prose), result.output  # a URI or ARN is never broken
    again = CliRunner().invoke(app, ["promote", "score", "--from", "staging", "--to", "prod", *root])
    assert again.exit_code == 0 and "prod holds a copy of it already" in again.output, again.output
    assert "nothing to change" in again.output


def test_lineage_reads_the_promoted_package(world):
    from sagestack.ops.lineage import walk_package

    proj, _, prod, _, packages = world
    arn = promote(proj.root, "plain", "staging", "prod").package_arn
    steps = walk_package(prod.client("sagemaker"), arn, proj.root).steps
    facts = dict(steps[0].facts)
    assert facts["promoted from"] == packages["plain"][0]
    assert facts["job"] == "classifier" and facts["environment"] == "staging"
    assert facts["model data"].startswith("s3://") and "/models/promoted/plain/" in facts["model data"]


def test_a_package_of_another_entry_or_kind_exits_2_with_the_reason(world):
    from sagestack.cli import app

    proj, _, _, _, packages = world
    score = packages["score"][0]
    result = CliRunner().invoke(
        app,
        [
            "promote",
            "digits",
            "--from",
            "staging",
            "--to",
            "prod",
            "--package",
            score,
            "--root",
            str(proj.root),
        ],
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"package {score} was registered for transform 'score'" in text
    assert "'digits' is a real-time endpoint" in text
    assert f"its newest Approved package is {packages['digits'][0]}" in text
    assert "Traceback" not in result.output
    # an LLM's package for a classic endpoint: refused by kind too
    chat = packages["chat"][0]
    with pytest.raises(
        PromotionError, match=r"registered for an LLM endpoint 'chat'; 'plain' is a real-time"
    ):
        promote(proj.root, "plain", "staging", "prod", package_arn=chat)


def test_an_entry_with_no_approved_package_exits_2_naming_it_and_the_group(world):
    from sagestack.cli import app

    proj, staging, _, _, packages = world
    staging.client("sagemaker").update_model_package(
        ModelPackageArn=packages["plain"][0], ModelApprovalStatus="Rejected"
    )
    result = CliRunner().invoke(
        app, ["promote", "plain", "--from", "staging", "--to", "prod", "--root", str(proj.root)]
    )
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    group = f"arn:aws:sagemaker:us-east-1:{STAGING}:model-package-group/digits-staging"
    assert f"model package group {group} has no Approved package registered for 'plain'" in text


def test_staging_credentials_are_refused_naming_what_prod_needs(world, monkeypatch):
    proj, staging, _, _, _ = world
    staging.use(monkeypatch)
    with pytest.raises(PromotionError) as e:
        promote(proj.root, "digits", "staging", "prod")
    text = str(e.value)
    assert f"these credentials act in account {STAGING}, not prod's ({PROD})" in text
    assert "managed policy digits-prod-promoter" in text
    assert f"sts:AssumeRole on arn:aws:iam::{STAGING}:role/digits-staging-promotion-reader" in text


def test_no_credentials_are_refused_naming_the_policy(world, monkeypatch, tmp_path):
    proj = world[0]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    with pytest.raises(PromotionError, match=r"^no AWS credentials found\. .*digits-prod-promoter") as e:
        promote(proj.root, "digits", "staging", "prod")
    assert "sagemaker:CreateModelPackage" in str(e.value)


def test_an_assume_role_refusal_names_the_role_and_the_policy(world, server, monkeypatch):
    """moto enforces IAM here: a prod user without the promoter policy may not assume the role."""
    proj, _, prod, _, _ = world
    iam = prod.client("iam")
    iam.create_user(UserName="ci")
    key = iam.create_access_key(UserName="ci")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    requests.post(f"{server.url}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    try:
        with pytest.raises(PromotionError) as e:
            promote(proj.root, "digits", "staging", "prod")
    finally:
        requests.post(f"{server.url}/moto-api/reset-auth", data=b"inf", timeout=10).raise_for_status()
    text = str(e.value)
    assert text.startswith(
        f"not allowed to assume arn:aws:iam::{STAGING}:role/digits-staging-promotion-reader"
    )
    assert "AccessDenied" in text and "managed policy digits-prod-promoter" in text
    assert f"trusts account {PROD}" in text


def test_a_direction_promotion_does_not_give_is_refused(world):
    proj = world[0]
    proj.spec(SPEC.replace("promotion: [dev, staging, prod]", "promotion: [dev, prod, staging]"))
    with pytest.raises(
        PromotionError, match=r"'prod' promotes from 'dev' \(promotion: \[dev, prod, staging\]\)"
    ):
        promote(proj.root, "digits", "staging", "prod")
    from sagestack.cli import app

    args = ["promote", "digits", "--from", "staging", "--to", "prod", "--root", str(proj.root)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    # the list is printed as written, not read as console markup
    assert "(promotion: [dev, prod, staging])" in " ".join(result.output.split())


def test_a_copy_that_does_not_read_back_is_not_registered(world, monkeypatch):
    """The copy is re-read from prod's bucket and hashed: bytes changed on the way are refused,
    and nothing is registered or pinned."""
    from sagestack.ops import promote_copy

    proj, _, prod, _, _ = world
    real = promote_copy.aws_client

    def client(service, region):
        c = real(service, region)
        if service == "s3":
            upload = c.upload_file

            def changed_on_the_way(path, bucket, key):
                with open(path, "ab") as f:
                    f.write(b"!")
                upload(path, bucket, key)

            c.upload_file = changed_on_the_way
        return c

    monkeypatch.setattr(promote_copy, "aws_client", client)
    with pytest.raises(PromotionError, match=r"does not read back as s3://.*nothing was registered"):
        promote(proj.root, "plain", "staging", "prod")
    sm = prod.client("sagemaker")
    assert sm.list_model_packages(ModelPackageGroupName="digits-prod")["ModelPackageSummaryList"] == []
    assert proj.load("prod").spec.endpoints["plain"].model_package is None


def test_an_image_in_the_source_accounts_registry_is_refused(world):
    proj, staging, _, _, packages = world
    sm = staging.client("sagemaker")
    d = sm.describe_model_package(ModelPackageName=packages["plain"][0])
    spec = d["InferenceSpecification"]
    spec["Containers"][0]["Image"] = f"{STAGING}.dkr.ecr.us-east-1.amazonaws.com/digits-staging-serving:1"
    own = sm.create_model_package(
        ModelPackageGroupName="digits-staging",
        ModelApprovalStatus="Approved",
        InferenceSpecification=spec,
        CustomerMetadataProperties=d["CustomerMetadataProperties"],
    )["ModelPackageArn"]
    with pytest.raises(PromotionError, match=r"an image in staging's own registry: prod would depend on"):
        promote(proj.root, "plain", "staging", "prod", package_arn=own)


def test_across_accounts_offline_and_without_promotion_are_refused(world):
    proj = world[0]
    with pytest.raises(PromotionError, match=r"different accounts: the package is copied .* drop --offline"):
        promote(proj.root, "digits", "staging", "prod", offline=True)
    proj.spec(SPEC.replace("promotion: [dev, staging, prod]\n", ""))
    with pytest.raises(
        PromotionError, match=r"follows `promotion:` in config/sagestack.yaml, which is not set"
    ):
        promote(proj.root, "digits", "staging", "prod")
