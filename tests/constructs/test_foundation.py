"""FoundationStack: template assertions on the synthesized example app (all three environments)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

pytestmark = pytest.mark.synth

STATEFUL = ("AWS::KMS::Key", "AWS::S3::Bucket", "AWS::ECR::Repository", "AWS::SageMaker::ModelPackageGroup")


def test_key_rotates(example_app):
    example_app.template("dev").has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_artifact_bucket_is_encrypted_versioned_private_and_logged(example_app):
    t = example_app.template("prod")
    t.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {
                        "BucketKeyEnabled": True,
                        "ServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "aws:kms",
                            "KMSMasterKeyID": {"Fn::GetAtt": [Match.string_like_regexp("^Key"), "Arn"]},
                        },
                    }
                ]
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LoggingConfiguration": {
                "DestinationBucketName": {"Ref": Match.string_like_regexp("^ArtifactsAccessLogs")},
                "LogFilePrefix": "artifacts/",
            },
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": "expire-replaced-checkpoints",
                        "Prefix": "checkpoints/",
                        "Status": "Enabled",
                        "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                    },
                    {
                        "Id": "abort-incomplete-uploads",
                        "Status": "Enabled",
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                    },
                ]
            },
        },
    )


def test_every_bucket_refuses_plain_http(example_app):
    t = example_app.template("dev")
    policies = t.find_resources("AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )


def test_repository_scans_on_push_with_immutable_tags_and_lifecycle(example_app):
    t = example_app.template("staging")
    t.has_resource_properties(
        "AWS::ECR::Repository",
        {
            "RepositoryName": "digits-staging-training",
            "ImageScanningConfiguration": {"ScanOnPush": True},
            "ImageTagMutability": "IMMUTABLE",
            "EncryptionConfiguration": {"EncryptionType": "KMS", "KmsKey": Match.any_value()},
            "LifecyclePolicy": {"LifecyclePolicyText": Match.string_like_regexp("untagged")},
        },
    )


def test_model_package_group_is_named_for_the_environment(example_app):
    example_app.template("prod").has_resource_properties(
        "AWS::SageMaker::ModelPackageGroup", {"ModelPackageGroupName": "digits-prod"}
    )


@pytest.mark.parametrize(("env", "policy"), [("dev", "Delete"), ("staging", "Retain"), ("prod", "Retain")])
def test_stateful_resources_are_retained_outside_dev(example_app, env, policy):
    t = example_app.template(env).to_json()
    stateful = {k: v for k, v in t["Resources"].items() if v["Type"] in STATEFUL}
    assert len(stateful) == 5  # key, two buckets, repository, model package group
    assert {v.get("DeletionPolicy") for v in stateful.values()} == {policy}


def test_stateful_logical_ids_are_stable(example_app):
    # Renaming any of these replaces the resource and loses its data: they are API.
    ids = sorted(
        k for k, v in example_app.template("prod").to_json()["Resources"].items() if v["Type"] in STATEFUL
    )
    assert ids == [
        "Artifacts80C0BB10",
        "ArtifactsAccessLogs4D97777C",
        "Key961B73FD",
        "ModelRegistryB238A970",
        "Repository22E53BBD",
    ]


def _role_statements(t) -> list[dict]:
    """The execution role's statements (the foundation also holds the MLflow server's role)."""
    (policy,) = [
        p
        for p in t.find_resources("AWS::IAM::Policy").values()
        if any("ExecutionRole" in r.get("Ref", "") for r in p["Properties"]["Roles"])
    ]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def test_execution_role_is_assumed_by_sagemaker_only(example_app):
    example_app.template("dev").has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {
                        "Action": "sts:AssumeRole",
                        "Effect": "Allow",
                        "Principal": {"Service": "sagemaker.amazonaws.com"},
                    }
                ]
            }
        },
    )


def test_execution_role_touches_objects_only_under_project_prefixes(example_app):
    statements = _role_statements(example_app.template("prod"))
    actions = [
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert not [a for a in actions if a.endswith("*")], "no wildcard actions"
    (objects,) = [s for s in statements if "s3:PutObject" in s["Action"]]
    rendered = json.dumps(objects["Resource"])
    for prefix in ("checkpoints", "models", "code", "data", "output"):
        assert f"/{prefix}/*" in rendered
    assert '"/*"' not in rendered  # never the whole bucket
    listings = [
        s["Condition"]["StringLike"]["s3:prefix"] for s in statements if s["Action"] == "s3:ListBucket"
    ]
    # the project's prefixes, and the example's drivers job's launch files (content-addressed)
    assert len(listings) == 2 and "checkpoints/*" in listings[0]
    assert listings[1] == [f"code/jobs/{listings[1][0].split('/')[2]}/*"]


def _resolved(resource: object, account: str) -> str:
    if isinstance(resource, str):
        return resource
    assert isinstance(resource, dict) and "Fn::Join" in resource, resource
    pseudo = {"AWS::AccountId": account, "AWS::Region": "us-east-1", "AWS::Partition": "aws"}
    return "".join(p if isinstance(p, str) else pseudo[p["Ref"]] for p in resource["Fn::Join"][1])


# The log groups SageMaker writes a job's or an endpoint's container output to (AWS's CloudWatch
# documentation for SageMaker; sagemaker-core's session_helper reads /aws/sagemaker/Endpoints/<name>):
# jobs share a group per kind, an endpoint and an inference component have a group of their own.
LOG_GROUPS_WRITTEN = (
    "/aws/sagemaker/TrainingJobs",
    "/aws/sagemaker/ProcessingJobs",
    "/aws/sagemaker/TransformJobs",
    "/aws/sagemaker/CompilationJobs",
    "/aws/sagemaker/Endpoints/digits-prod-digits",
    "/aws/sagemaker/InferenceComponents/digits-prod-chat-chat-1a2b3c",
)


def test_execution_role_writes_every_kind_of_sagemaker_log_group(example_app):
    """The role may create each group SageMaker writes to, and its streams, and put their events:
    without an endpoint's own group, its container output is lost, silently (the grant named
    /aws/sagemaker/Endpoints, which is no endpoint's group)."""
    from fnmatch import fnmatchcase

    account = "111111111111"
    writes = [
        (set(s["Action"]), [_resolved(r, account) for r in s["Resource"]])
        for s in _role_statements(example_app.template("prod"))
        if {"logs:CreateLogStream", "logs:PutLogEvents"} <= set(s["Action"])
    ]

    def allowed(action: str, arn: str) -> bool:
        return any(action in acts and any(fnmatchcase(arn, r) for r in rs) for acts, rs in writes)

    prefix = f"arn:aws:logs:us-east-1:{account}:log-group:"
    for group in LOG_GROUPS_WRITTEN:
        assert allowed("logs:CreateLogGroup", prefix + group), group
        for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
            assert allowed(action, f"{prefix}{group}:log-stream:AllTraffic/i-0123456789abcdef0"), group
    # and nothing beyond SageMaker's own groups
    assert not allowed("logs:PutLogEvents", f"{prefix}/aws/lambda/other:log-stream:x")
    assert not allowed("logs:PutLogEvents", f"{prefix}/aws/sagemaker/Other:log-stream:x")


def test_execution_role_pulls_the_dlc_repository_it_uses(example_app):
    rendered = json.dumps(_role_statements(example_app.template("dev")))
    assert "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training" in rendered


def test_dockerfile_image_is_an_asset_not_a_build(example_app):
    docker = example_app.assets("dev")["dockerImages"]
    assert len(docker) == 2  # train-efa and train-ngc
    for asset in docker.values():
        assert asset["source"]["directory"].startswith("../asset.")  # staged at synth, built only on publish
        assert asset["source"]["platform"] == "linux/amd64"


def test_environment_without_account_is_account_agnostic(example_app):
    from aws_cdk import Token

    dev, prod = example_app.stages["dev"].foundation, example_app.stages["prod"].foundation
    assert Token.is_unresolved(dev.account) and dev.region == "us-east-1"
    assert prod.account == "111111111111"
    assert prod.termination_protection is True and dev.termination_protection is False


def test_stacks_are_named_and_tagged_per_environment(example_app):
    stack = example_app.stages["prod"].foundation
    assert stack.stack_name == "digits-prod-foundation"
    tags = {
        t["Key"]: t["Value"]
        for t in example_app.template("prod").to_json()["Resources"]["Artifacts80C0BB10"]["Properties"][
            "Tags"
        ]
    }
    assert (
        tags["sagestack:environment"] == "prod" and tags["team"] == "ml-platform" and tags["stage"] == "prod"
    )


def test_mlflow_tracking_server_stores_artifacts_in_the_project_bucket(example_app):
    """tracking.mlflow: a managed tracking server per environment, its role limited to the bucket's
    mlflow/ prefix, and the execution role allowed to log to that server only."""
    import json

    t = example_app.template("prod")
    ((server_id, server),) = t.find_resources("AWS::SageMaker::MlflowTrackingServer").items()
    props = server["Properties"]
    assert props["TrackingServerName"] == "digits-prod-mlflow" and props["TrackingServerSize"] == "Small"
    assert json.dumps(props["ArtifactStoreUri"]).startswith('{"Fn::Join": ["", ["s3://"')
    assert json.dumps(props["ArtifactStoreUri"]).endswith('"/mlflow"]]}')
    policies = t.find_resources("AWS::IAM::Policy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    logging = [s for s in statements if any(str(a).startswith("sagemaker-mlflow:") for a in s["Action"])]
    assert logging, "the execution role may log to the tracking server"
    for s in logging:
        assert s["Resource"] == {"Fn::GetAtt": [server_id, "TrackingServerArn"]}
        assert "sagemaker-mlflow:LogBatch" in s["Action"] and "sagemaker-mlflow:*" not in s["Action"]
    server_role = props["RoleArn"]["Fn::GetAtt"][0]
    (server_policy,) = [p for p in policies.values() if {"Ref": server_role} in p["Properties"]["Roles"]]
    objects = [
        s["Resource"]
        for s in server_policy["Properties"]["PolicyDocument"]["Statement"]
        if "s3:PutObject" in s["Action"]
    ]
    assert objects and all("/mlflow/*" in json.dumps(r) for r in objects)
