"""A large language model on an endpoint or inference component (AWS::SageMaker::Model): an LLM
serving container (DJL LMI, TGI, vLLM, …) loading uncompressed weights from an S3 prefix
(ModelDataSource.S3DataSource, S3Prefix, CompressionType None — the container reads the files as
they are, with no model.tar.gz to download and unpack), configured by its environment; or a
registered (optimized) model package with that environment added.

The props (LlmModel) are plain values, so a CDK app uses the construct without sagestack's spec:

    LlmModel(image_uri=..., weights_uri="s3://bucket/models/chat/", environment={"OPTION_...": ...})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.endpoint_model import VpcPlacement
from sagestack.constructs.grants import grant_once
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_fields
from sagestack.constructs.training_image import TrainingImage
from sagestack.constructs.validation import validate_as_request
from sagestack.core.catalog.instances import instance_type as lookup


def has_instance_storage(instance_type: str) -> bool:
    """Whether `instance_type` has NVMe instance storage: SageMaker mounts it and provisions no EBS
    volume, so VolumeSizeInGB is not its to set (the catalog's has_instance_storage; an unknown
    type counts as having none)."""
    try:
        return lookup(instance_type).has_instance_storage
    except (KeyError, ValueError):
        return False


@typed_fields
@dataclass(frozen=True)
class LlmModel:
    """An LLM: `image_uri` (the serving container) loading `weights_uri` (an s3:// prefix of
    uncompressed files: config.json, *.safetensors, the tokenizer), configured by `environment`; or
    `model_package` (an optimized, registered model) with `environment` added to its own.

    download_timeout / startup_timeout: ModelDataDownloadTimeoutInSeconds and
    ContainerStartupHealthCheckTimeoutInSeconds (60-3600 s) of the variant or component — loading
    gigabytes of weights takes longer than SageMaker's defaults allow.
    volume_size_gb: the variant's EBS volume (1-512 GB) on types without instance storage.
    weights_key: the KMS key the weights are encrypted with (the role may decrypt with it)."""

    image_uri: str | None = None
    weights_uri: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    model_package: str | None = None
    download_timeout: Duration | None = None
    startup_timeout: Duration | None = None
    volume_size_gb: int | None = None
    weights_key: kms.IKey | None = None

    def __post_init__(self) -> None:
        if self.model_package is None and not (self.image_uri and self.weights_uri):
            raise ValueError("LlmModel: give image_uri and weights_uri, or model_package")
        if self.model_package is not None and (self.image_uri or self.weights_uri):
            raise ValueError(
                "LlmModel: a model_package carries its image and weights; drop image_uri/weights_uri"
            )
        if self.weights_uri is not None and not self.weights_uri.startswith("s3://"):
            raise ValueError(f"LlmModel: weights_uri must be an s3:// prefix, not {self.weights_uri!r}")

    @property
    def weights_prefix_uri(self) -> str | None:
        """The weights' S3 prefix, ending in '/' (an S3Prefix data source names a folder)."""
        if self.weights_uri is None:
            return None
        return self.weights_uri if self.weights_uri.endswith("/") else self.weights_uri + "/"


def llm_model(
    scope: Construct, id: str, llm: LlmModel, *, role_arn: str, vpc: VpcPlacement | None = None
) -> sagemaker.CfnModel:
    """The Model of `llm`, network-isolated (SageMaker downloads the weights; the container reaches
    nothing), with no explicit name: new weights or settings replace it."""
    Model = sagemaker.CfnModel
    environment = dict(llm.environment) or None
    if llm.model_package is not None:
        container = Model.ContainerDefinitionProperty(
            model_package_name=llm.model_package, environment=environment
        )
    else:
        container = Model.ContainerDefinitionProperty(
            image=llm.image_uri,
            model_data_source=Model.ModelDataSourceProperty(
                s3_data_source=Model.S3DataSourceProperty(
                    s3_uri=llm.weights_prefix_uri or "",
                    s3_data_type="S3Prefix",
                    compression_type="None",
                )
            ),
            environment=environment,
        )
    model = Model(
        scope,
        id,
        execution_role_arn=role_arn,
        primary_container=container,
        enable_network_isolation=True,
        vpc_config=Model.VpcConfigProperty(
            subnets=list(vpc.subnet_ids), security_group_ids=list(vpc.security_group_ids)
        )
        if vpc
        else None,
    )
    validate_as_request(model, "CreateModel", add={"ModelName": "generated-by-cloudformation"})
    return model


def s3_prefix_arns(uri: str) -> tuple[str, str, str]:
    """(bucket ARN, ARN of the objects under the prefix, the prefix) of an s3://bucket/prefix/ URI."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    bucket_arn = f"arn:{Aws.PARTITION}:s3:::{bucket}"
    return bucket_arn, f"{bucket_arn}/{prefix}*", prefix


def grant_llm(grantee: iam.IGrantable, llm: LlmModel) -> None:
    """What the role needs to serve `llm`: pull its image, read the objects under its weights
    prefix and list only that prefix (no other key of the bucket), decrypt with `weights_key`."""
    if llm.image_uri:
        TrainingImage.from_registry(llm.image_uri).grant_pull(grantee)
    if llm.weights_prefix_uri is not None:
        grant_weights_read(grantee, llm.weights_prefix_uri)
    if llm.weights_key is not None:
        llm.weights_key.grant_decrypt(grantee)


def grant_weights_read(grantee: iam.IGrantable, uri: str) -> None:
    """Read the objects under an s3://bucket/prefix/ of LLM weights and list only that prefix —
    once per principal, whoever asks (serving the weights, optimizing them)."""
    bucket_arn, objects_arn, prefix = s3_prefix_arns(uri)
    grant_once(grantee, actions.S3_OBJECTS_READ, [objects_arn])
    listing = {"StringLike": {"s3:prefix": [prefix, f"{prefix}*"]}} if prefix else None
    grant_once(grantee, actions.S3_LIST, [bucket_arn], listing)
    if isinstance(grantee, Construct):
        acknowledge(
            grantee,
            {
                f"AwsSolutions-IAM5[Resource::{nag_text(grantee, objects_arn)}]": "The objects under the "
                "model's weights prefix, which SageMaker reads file by file (to serve or to optimize "
                "them): the narrowest grant that reads a folder of files."
            },
        )


def grant_weights_key(grantee: iam.IGrantable, key_arn: str) -> iam.Grant:
    """Decrypt LLM weights encrypted with a key other than the project's (another bucket's, maybe
    another account's), through S3 only — once per principal."""
    return grant_once(
        grantee,
        actions.KMS_DECRYPT,
        [key_arn],
        {"StringEquals": {"kms:ViaService": f"s3.{Aws.REGION}.amazonaws.com"}},
    )
