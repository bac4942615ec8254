"""Several AWS accounts on one moto server: moto keeps resources per account, and the credentials
STS AssumeRole returns for a role in another account act in that account."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from sagestack.core.names import Names
from tests.support.moto_server import REGION, MotoServer


@dataclass(frozen=True)
class Account:
    server: MotoServer
    id: str
    keys: dict[str, str]  # aws_access_key_id, aws_secret_access_key, aws_session_token

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.server.url, region_name=REGION, **self.keys)

    def use(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make these the credentials boto3 finds (what `sagestack promote` runs with)."""
        # boto3's default session keeps the credentials it found first: start a new one
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
        monkeypatch.setenv("AWS_ENDPOINT_URL", self.server.url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", self.keys["aws_access_key_id"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", self.keys["aws_secret_access_key"])
        monkeypatch.setenv("AWS_SESSION_TOKEN", self.keys["aws_session_token"])

    def foundation(self, project: str, env: str) -> str:
        """What the environment's FoundationStack holds for promotion, by the names it synthesizes:
        the stack with its ArtifactsBucketName output (the bucket) and the model package group."""
        bucket = self.foundation_stack(project, env)
        self.client("sagemaker").create_model_package_group(
            ModelPackageGroupName=Names(project, env).model_package_group
        )
        return bucket

    def foundation_stack(self, project: str, env: str) -> str:
        """The FoundationStack's bucket and its ArtifactsBucketName output (no group)."""
        name = Names(project, env).stack("foundation")
        template = {
            "Resources": {"Artifacts": {"Type": "AWS::S3::Bucket"}},
            "Outputs": {"ArtifactsBucketName": {"Value": {"Ref": "Artifacts"}}},
        }
        cfn = self.client("cloudformation")
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
        outputs = cfn.describe_stacks(StackName=name)["Stacks"][0]["Outputs"]
        return str(outputs[0]["OutputValue"])

    def reader_role(self, project: str, env: str, trusted: str) -> str:
        """The environment's promotion reader role, trusting `trusted`'s account."""
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{trusted}:root"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = self.client("iam").create_role(
            RoleName=Names(project, env).promotion_reader_role, AssumeRolePolicyDocument=json.dumps(trust)
        )
        return str(role["Role"]["Arn"])


def account(server: MotoServer, account_id: str, role: str = "deployer") -> Account:
    """Credentials acting in `account_id` (AssumeRole into a role there)."""
    c = server.client("sts").assume_role(
        RoleArn=f"arn:aws:iam::{account_id}:role/{role}", RoleSessionName="sagestack-test"
    )["Credentials"]
    return Account(
        server,
        account_id,
        {
            "aws_access_key_id": c["AccessKeyId"],
            "aws_secret_access_key": c["SecretAccessKey"],
            "aws_session_token": c["SessionToken"],
        },
    )
