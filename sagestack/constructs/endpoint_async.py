"""Asynchronous inference on an endpoint: where results and failures land, and the SNS topics that
say which requests succeeded and which failed (published to as the execution role)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.prop_types import typed_fields


@typed_fields
@dataclass(frozen=True)
class AsyncInference:
    """Asynchronous inference: requests queue; results land under the artifact bucket's
    async/<endpoint>/output/, failures under async/<endpoint>/failures/ (encrypted with the bucket's
    key); SNS topics (encrypted with it too) say which succeeded and which failed."""

    artifacts: ArtifactBucketBase
    max_concurrent_invocations_per_instance: int | None = None
    notify: bool = True
    include_response_in_notification: bool = False
    folder: str | None = None  # under async/ (default: the endpoint's name)


@dataclass(frozen=True)
class AsyncTopics:
    success: sns.Topic
    error: sns.Topic


def async_topics(
    scope: Construct,
    a: AsyncInference,
    *,
    endpoint_name: str,
    key: kms.IKey | None,
    role: iam.IRole | iam.IGrantable,
) -> AsyncTopics | None:
    """The topics the config's AsyncInferenceConfig notifies (made in `scope`) when asked; the
    config itself is rendered with the endpoint's (endpoints/config_request.py)."""
    return _topics(scope, endpoint_name, key, role) if a.notify else None


def _topics(
    scope: Construct, endpoint_name: str, key: kms.IKey | None, role: iam.IRole | iam.IGrantable
) -> AsyncTopics:
    topics = AsyncTopics(
        success=_topic(scope, "SuccessTopic", f"{endpoint_name}: async requests that succeeded", key),
        error=_topic(scope, "ErrorTopic", f"{endpoint_name}: async requests that failed", key),
    )
    # SageMaker publishes as the execution role. The grant is a policy of this construct's own
    # (the role may live in another stack, which must not depend on this one).
    publish = iam.Policy(
        scope,
        "PublishPolicy",
        statements=[
            iam.PolicyStatement(
                actions=["sns:Publish"], resources=[topics.success.topic_arn, topics.error.topic_arn]
            )
        ],
    )
    publish.attach_to_role(getattr(role, "role", role))  # type: ignore[arg-type]
    if key is not None:
        publish.add_statements(
            iam.PolicyStatement(actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=[key.key_arn])
        )
        acknowledge(
            publish,
            {
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "Publishing to the encrypted "
                "topics: data keys of the project key only."
            },
        )
    return topics


def _topic(scope: Construct, id: str, display_name: str, key: kms.IKey | None) -> sns.Topic:
    topic = sns.Topic(scope, id, display_name=display_name, master_key=key, enforce_ssl=True)
    if key is None:
        acknowledge(topic, {"AwsSolutions-SNS2": "No encryption_key was given to the endpoint."})
    return topic
