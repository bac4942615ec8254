"""TrainingImage: where a job's container comes from — an AWS Deep Learning Container, an image by
URI, a repository of this app, or a Dockerfile built and published by `cdk deploy`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.prop_types import typed_props
from sagestack.core.catalog.images import dlc_framework, dlc_image_uri, smp_image_uri
from sagestack.core.sourcedir import dockerfile_fingerprint

_ECR_URI = re.compile(r"^(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)")


class TrainingImage:
    """An image a SageMaker job can pull. Use the static factories.

    An image may differ per instance type (a DLC has CPU, GPU and Neuron builds): `uri_for(t)` is the
    URI a job on instance type t runs; `identity_for(t)` is what the image is, for a job's content hash
    (a concrete URI, or `dockerfile:<sha256 of the build folder>` for an asset); `validation_uri_for`
    is a concrete URI of the same shape for request validation when the real one is a token.
    """

    def __init__(
        self,
        *,
        uris: Mapping[str, str] | None = None,
        default_uri: str | None = None,
        repository_arns: Sequence[str] = (),
        repository: ecr.IRepository | None = None,
        identity: str | None = None,
        fingerprint: str | None = None,
        framework: str | None = None,
    ) -> None:
        self._uris = dict(uris or {})
        self._default = default_uri
        self._repository_arns = sorted(set(repository_arns))
        self._repository = repository
        self._identity = identity
        self.fingerprint = fingerprint  # the build folder's sha256, for a Dockerfile asset
        # What the container runs when it is an AWS DLC (pytorch, tensorflow); None when unknown.
        self.framework = framework or next(
            (f for f in map(dlc_framework, [*self._uris.values(), default_uri or ""]) if f), None
        )

    # ------------------------------------------------------------------ factories

    @staticmethod
    @typed_props
    def from_registry(uri: str) -> TrainingImage:
        """Any ECR image by URI (a DLC resolved elsewhere, another account's image …), the same on
        every instance type."""
        return TrainingImage(default_uri=uri, repository_arns=[repository_arn_of(uri)], identity=uri)

    @staticmethod
    @typed_props
    def from_dlc(
        framework: str,
        version: str,
        py_version: str,
        *,
        region: str,
        instance_types: Sequence[str],
        smp: bool = False,
    ) -> TrainingImage:
        """An AWS Deep Learning Container, resolved now per instance type from sagemaker-core's image
        configs (CPU, GPU and Neuron builds differ). smp=True: the SageMaker model parallel (v2)
        container of the same PyTorch version. ValueError names what is not available."""

        uris = {
            t: (
                smp_image_uri(version, py_version, region=region, instance_type=t)
                if smp
                else dlc_image_uri(framework, version, py_version, region=region, instance_type=t)
            )
            for t in instance_types
        }
        return TrainingImage(
            uris=uris,
            repository_arns=[repository_arn_of(u) for u in uris.values()],
            framework="pytorch" if smp else framework,
        )

    @staticmethod
    @typed_props
    def from_uris(uris: Mapping[str, str]) -> TrainingImage:
        """One URI per instance type, e.g. DLC URIs resolved by the plan."""
        return TrainingImage(uris=uris, repository_arns=[repository_arn_of(u) for u in uris.values()])

    @staticmethod
    @typed_props
    def from_ecr(repository: ecr.IRepository, tag: str = "latest") -> TrainingImage:
        """A tag of a repository (this app's or imported with Repository.from_repository_name)."""
        return TrainingImage(
            default_uri=repository.repository_uri_for_tag(tag),
            repository=repository,
            identity=f"ecr:{repository.node.path}:{tag}",
        )

    @staticmethod
    @typed_props
    def from_asset(
        scope: Construct,
        id: str,
        *,
        directory: str,
        build_args: Mapping[str, str] | None = None,
        target: str | None = None,
    ) -> TrainingImage:
        """Built from a Dockerfile and published by `cdk deploy` (Docker is needed only to publish,
        never to synthesize). The job's content hash covers every file of the folder."""

        asset = ecr_assets.DockerImageAsset(
            scope,
            id,
            directory=directory,
            build_args=dict(build_args) if build_args else None,
            target=target,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        fingerprint = dockerfile_fingerprint(Path(directory), dict(build_args or {}), target)
        return TrainingImage(
            default_uri=asset.image_uri,
            repository=asset.repository,
            identity=f"dockerfile:{fingerprint}",
            fingerprint=fingerprint,
        )

    # ------------------------------------------------------------------ per instance type

    def uri_for(self, instance_type: str) -> str:
        if instance_type in self._uris:
            return self._uris[instance_type]
        if self._default is None:
            known = ", ".join(sorted(self._uris)) or "none"
            raise ValueError(f"this image was resolved for {known}, not {instance_type}")
        return self._default

    def identity_for(self, instance_type: str) -> str:
        return self._identity or self.uri_for(instance_type)

    def validation_uri_for(self, instance_type: str, *, account: str, region: str) -> str:
        """A concrete URI for validating a request whose real URI is only known at deploy."""
        if self.fingerprint is not None:
            return f"{account}.dkr.ecr.{region}.amazonaws.com/cdk-assets:{self.fingerprint[:64]}"
        if self._repository is not None and self._identity and self._identity.startswith("ecr:"):
            return f"{account}.dkr.ecr.{region}.amazonaws.com/sagestack-validation:{self._identity.rsplit(':', 1)[1]}"
        return self.uri_for(instance_type)

    @property
    def all_uris(self) -> list[str]:
        return sorted(set(self._uris.values()) | ({self._default} if self._default else set()))

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        """Pull this image (and, for an ECR image by URI, get the registry token, which has no
        resource-level permission)."""
        grants: list[iam.Grant] = []
        if self._repository is not None:
            grants.append(self._repository.grant_pull(grantee))
        if self._repository_arns:
            grants.append(
                iam.Grant.add_to_principal(
                    grantee=grantee, actions=list(actions.ECR_PULL), resource_arns=self._repository_arns
                )
            )
            grants.append(
                iam.Grant.add_to_principal(
                    grantee=grantee, actions=list(actions.ECR_AUTH), resource_arns=["*"]
                )
            )
        grant = grants[0]
        for g in grants[1:]:
            grant = grant.combine(g)
        return grant


def repository_arn_of(image_uri: str) -> str:
    """The repository ARN of an ECR image URI (ValueError if it is not one)."""
    m = _ECR_URI.match(image_uri)
    if not m:
        raise ValueError(f"not an ECR image URI: {image_uri}")
    account, region, repo = m.groups()
    partition = "aws-cn" if ".amazonaws.com.cn/" in image_uri else "aws"
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repo}"
