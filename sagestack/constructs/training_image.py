"""TrainingImage: where a job's container comes from (a DLC, a Dockerfile asset, or ECR)."""

from __future__ import annotations

import re

from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

_ECR_URI = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)")


class TrainingImage:
    """An image a SageMaker job can pull. Use the static factories."""

    def __init__(
        self,
        image_uri: str,
        repository_arns: list[str],
        repository: ecr.IRepository | None = None,
        asset_hash: str | None = None,
    ):
        self.image_uri = image_uri
        self.asset_hash = asset_hash
        self._repository_arns = repository_arns
        self._repository = repository

    @staticmethod
    def from_dlc(image_uri: str) -> TrainingImage:
        """An AWS Deep Learning Container by its resolved URI (see sagestack.catalog.dlc_image_uri)."""
        return TrainingImage(image_uri, [repository_arn_of(image_uri)])

    @staticmethod
    def from_ecr(repository: ecr.IRepository, tag: str = "latest") -> TrainingImage:
        return TrainingImage(repository.repository_uri_for_tag(tag), [], repository)

    @staticmethod
    def from_asset(
        scope: Construct,
        id: str,
        *,
        directory: str,
        build_args: dict[str, str] | None = None,
        target: str | None = None,
    ) -> TrainingImage:
        """Built from a Dockerfile and published by `cdk deploy` (Docker is needed only to publish)."""
        asset = ecr_assets.DockerImageAsset(
            scope,
            id,
            directory=directory,
            build_args=build_args or None,
            target=target,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        return TrainingImage(asset.image_uri, [], asset.repository, asset_hash=asset.asset_hash)

    def grant_pull(self, grantee: iam.IGrantable) -> None:
        if self._repository is not None:
            self._repository.grant_pull(grantee)
        if self._repository_arns:
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                    ],
                    resources=self._repository_arns,
                )
            )
            grantee.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"])
            )


def repository_arn_of(image_uri: str) -> str:
    m = _ECR_URI.match(image_uri)
    if not m:
        raise ValueError(f"not an ECR image URI: {image_uri}")
    account, region, repo = m.groups()
    partition = "aws-cn" if ".amazonaws.com.cn/" in image_uri else "aws"
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repo}"
