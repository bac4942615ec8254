"""Every IAM policy statement of a synthesized cloud assembly, with CloudFormation's intrinsics
resolved to ARN-shaped strings (a fixed partition, region and account where the template leaves
them to the deployment), so that IAM's own service-authorization data can judge each one.

Kinds: identity (AWS::IAM::Policy / ManagedPolicy, a Role's inline Policies), trust (a Role's
AssumeRolePolicyDocument) and resource (bucket, key, topic, queue, repository and model package
group policies).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.cfn import resolve

PARTITION = "aws"
ACCOUNT = "123456789012"  # where a template leaves the account to the deployment

# A resource's ARN (GetAtt …Arn, or Ref where the reference is the ARN), by its type.
ARN_OF_TYPE = {
    "AWS::S3::Bucket": "arn:{p}:s3:::{name}",
    "AWS::KMS::Key": "arn:{p}:kms:{r}:{a}:key/{name}",
    "AWS::IAM::Role": "arn:{p}:iam::{a}:role/{name}",
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{name}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{name}",
    "AWS::ECR::Repository": "arn:{p}:ecr:{r}:{a}:repository/{name}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{name}:*",
    "AWS::StepFunctions::StateMachine": "arn:{p}:states:{r}:{a}:stateMachine:{name}",
    "AWS::SageMaker::MlflowTrackingServer": "arn:{p}:sagemaker:{r}:{a}:mlflow-tracking-server/{name}",
    "AWS::SageMaker::MlflowApp": "arn:{p}:sagemaker:{r}:{a}:mlflow-app/{name}",
    "AWS::SageMaker::ModelPackageGroup": "arn:{p}:sagemaker:{r}:{a}:model-package-group/{name}",
    "AWS::SageMaker::Endpoint": "arn:{p}:sagemaker:{r}:{a}:endpoint/{name}",
    "AWS::SageMaker::Cluster": "arn:{p}:sagemaker:{r}:{a}:cluster/{name}",
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{name}",
    "AWS::CodeBuild::Project": "arn:{p}:codebuild:{r}:{a}:project/{name}",
    "AWS::CodePipeline::Pipeline": "arn:{p}:codepipeline:{r}:{a}:{name}",
    "AWS::Scheduler::Schedule": "arn:{p}:scheduler:{r}:{a}:schedule/default/{name}",
    "AWS::Events::Rule": "arn:{p}:events:{r}:{a}:rule/{name}",
    "AWS::EKS::Cluster": "arn:{p}:eks:{r}:{a}:cluster/{name}",
    "AWS::APS::Workspace": "arn:{p}:aps:{r}:{a}:workspace/{name}",  # name: a stand-in for its ID
}
# What Ref returns where it is the ARN (else the name).
REF_IS_ARN = {"AWS::SNS::Topic", "AWS::StepFunctions::StateMachine", "AWS::IAM::ManagedPolicy"}
# The physical-name property of a type, where a template gives one.
NAME_PROPERTY = {
    "AWS::S3::Bucket": "BucketName",
    "AWS::IAM::Role": "RoleName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::ECR::Repository": "RepositoryName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::SageMaker::MlflowTrackingServer": "TrackingServerName",
    "AWS::SageMaker::MlflowApp": "Name",
    "AWS::SageMaker::ModelPackageGroup": "ModelPackageGroupName",
    "AWS::SageMaker::Endpoint": "EndpointName",
    "AWS::SageMaker::Cluster": "ClusterName",
    "AWS::EKS::Cluster": "Name",
}
# The resource policy types (their statements name their resources; a key's and a repository's
# policies, whose "*" means the resource itself, are read from the key and the repository).
RESOURCE_POLICIES = {"AWS::S3::BucketPolicy", "AWS::SNS::TopicPolicy", "AWS::SQS::QueuePolicy"}


@dataclass
class Statement:
    kind: str  # identity | trust | resource
    where: str  # <assembly>/<stack>/<logical id>
    statement: dict[str, Any]  # resolved
    attached: str | None = None  # a resource policy's own resource, which its "*" means

    def listed(self, key: str) -> list[Any]:
        value = self.statement.get(key, [])
        return value if isinstance(value, list) else [value]


@dataclass
class Policy:
    kind: str
    where: str
    document: dict[str, Any]
    attached: str | None = None  # a resource policy's own resource, which its "*" means


class Template:
    """One stack's template and how its intrinsics resolve."""

    def __init__(self, path: Path, exports: dict[str, Any]) -> None:
        self.path = path
        self.body = json.loads(path.read_text())
        self.resources: dict[str, Any] = self.body.get("Resources", {})
        self.exports = exports
        self.region = "us-east-1"
        self.account = ACCOUNT
        env = self._environment()
        if env:
            self.account, self.region = env

    def _environment(self) -> tuple[str, str] | None:
        manifest = json.loads((self.path.parent / "manifest.json").read_text())
        for artifact in manifest.get("artifacts", {}).values():
            if artifact.get("properties", {}).get("templateFile") == self.path.name:
                _, account, region = artifact["environment"].split("/")[-3:]
                return (
                    account if account != "unknown-account" else ACCOUNT,
                    region if region != "unknown-region" else "us-east-1",
                )
        return None

    def name_of(self, lid: str) -> str:
        res = self.resources[lid]
        prop = NAME_PROPERTY.get(res["Type"])
        given = res.get("Properties", {}).get(prop) if prop else None
        return str(self.resolve(given)) if given is not None else lid.lower()

    def arn_of(self, lid: str) -> str:
        res = self.resources[lid]
        fmt = ARN_OF_TYPE.get(res["Type"])
        if fmt is None:
            raise KeyError(f"{self.path.name}: no ARN shape for {lid} ({res['Type']}): add it to ARN_OF_TYPE")
        return fmt.format(p=PARTITION, r=self.region, a=self.account, name=self.name_of(lid))

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.path.stem,
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{self.region}:{self.account}:stack/"
            f"{self.path.stem}/00000000-0000-0000-0000-000000000000",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.body.get("Parameters", {}):
            return f"param-{name.lower()}"
        typ = self.resources[name]["Type"]
        return self.arn_of(name) if typ in REF_IS_ARN else self.name_of(name)

    def get_att(self, lid: str, attribute: str) -> str:
        if attribute in ("Arn", "TrackingServerArn", "ModelPackageGroupArn", "ClusterArn", "EndpointArn"):
            return self.arn_of(lid)
        if attribute in ("RoleId", "KeyId"):
            return f"{lid.lower()}-id"
        if attribute == "QueueUrl":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.name_of(lid)}"
        if attribute in ("QueueName", "MlflowAppId"):  # an App's ID: its name stands in for it
            return self.name_of(lid)
        raise KeyError(f"{self.path.name}: GetAtt {lid}.{attribute} has no resolution here")

    def import_value(self, name: str) -> Any:
        return self.exports[name]

    def resolve(self, node: Any) -> Any:
        return resolve(node, self.ref, self.get_att, self.import_value)


def templates(outdir: Path) -> list[Path]:
    """Every stack template of an assembly, nested stage assemblies included."""
    return sorted(outdir.glob("**/*.template.json"))


def _exports(paths: list[Path]) -> dict[str, Any]:
    """Export name -> value over the assembly (two passes: an output may itself import)."""
    exports: dict[str, Any] = {}
    for _ in range(2):
        for path in paths:
            t = Template(path, exports)
            for out in t.body.get("Outputs", {}).values():
                if "Export" in out:
                    try:
                        exports[str(t.resolve(out["Export"]["Name"]))] = t.resolve(out["Value"])
                    except KeyError:
                        continue
    return exports


def policies(outdir: Path, assembly: str) -> Iterator[Policy]:
    """Each policy document of the assembly, resolved."""
    paths = templates(outdir)
    exports = _exports(paths)
    for path in paths:
        t = Template(path, exports)
        for lid, res in t.resources.items():
            where = f"{assembly}/{path.relative_to(outdir).parent}/{path.stem}/{lid}"
            props = res.get("Properties", {})
            typ = res["Type"]
            if typ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                yield Policy("identity", where, t.resolve(props["PolicyDocument"]))
            elif typ == "AWS::IAM::Role":
                yield Policy("trust", where, t.resolve(props["AssumeRolePolicyDocument"]))
                for inline in props.get("Policies", []):
                    yield Policy(
                        "identity", f"{where}/{inline['PolicyName']}", t.resolve(inline["PolicyDocument"])
                    )
            elif typ in RESOURCE_POLICIES:
                yield Policy("resource", where, t.resolve(props["PolicyDocument"]))
            elif typ == "AWS::KMS::Key":
                yield Policy("resource", where, t.resolve(props["KeyPolicy"]), t.arn_of(lid))
            elif typ == "AWS::SageMaker::ModelPackageGroup" and "ModelPackageGroupPolicy" in props:
                yield Policy("resource", where, t.resolve(props["ModelPackageGroupPolicy"]), t.arn_of(lid))
            elif typ == "AWS::ECR::Repository" and "RepositoryPolicyText" in props:
                yield Policy("resource", where, t.resolve(props["RepositoryPolicyText"]), t.arn_of(lid))


def statements(outdir: Path, assembly: str) -> Iterator[Statement]:
    for policy in policies(outdir, assembly):
        for s in policy.document["Statement"]:
            yield Statement(policy.kind, policy.where, s, policy.attached)
