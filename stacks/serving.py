"""ServingStack: the endpoints of one environment, each serving the model package its config pins.

Promotion changes the pin (`sagestack promote`), reviewed in git; `cdk deploy` then replaces the
model and endpoint config and moves the endpoint to them by a blue/green update."""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from sagestack.constructs.inference_endpoint import CaptureTarget, InferenceEndpoint
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.training_image import repository_arn_of
from sagestack.plan import EnvironmentPlan
from sagestack.plan.serving import EndpointPlan, resolve_endpoint
from stacks.foundation import FoundationStack


def served_endpoints(plan: EnvironmentPlan) -> list[EndpointPlan]:
    """Endpoints this environment deploys: those with a pinned model package."""
    return [resolve_endpoint(plan, k) for k, ep in plan.spec.endpoints.items() if ep.model_package]


class ServingStack(Stack):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: EnvironmentPlan,
        foundation: FoundationStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        role = foundation.execution_role.role
        self.endpoints: dict[str, InferenceEndpoint] = {}
        for ep in served_endpoints(plan):
            assert ep.spec.model_package is not None
            capture = None
            if ep.spec.data_capture is not None:
                capture = CaptureTarget(
                    s3_uri=foundation.artifacts.s3_uri("capture", ep.key), kms_key_id=foundation.key.key_arn
                )
            endpoint = InferenceEndpoint(
                self,
                f"Endpoint-{ep.key}",
                endpoint_name=ep.endpoint_name,
                spec=ep.spec,
                model_package_arn=ep.spec.model_package,
                execution_role_arn=foundation.execution_role.role_arn,
                kms_key_id=foundation.key.key_arn,
                capture=capture,
            )
            self.endpoints[ep.key] = endpoint
            CfnOutput(self, f"EndpointName{ep.key.replace('-', '').replace('_', '')}", value=ep.endpoint_name)
            self._grant_package(plan, role, ep)

    def _grant_package(self, plan: EnvironmentPlan, role: iam.IRole, ep: EndpointPlan) -> None:
        """The execution role pulls the package's image and reads its model; a package promoted from
        another account keeps its model in that account's bucket and key."""
        assert ep.spec.model_package is not None
        source_account = ep.spec.model_package.split(":")[4]
        if ep.image_uri:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=[
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                        "ecr:BatchCheckLayerAvailability",
                    ],
                    resources=[repository_arn_of(ep.image_uri)],
                )
            )
        if source_account != plan.account:
            objects = f"arn:{Aws.PARTITION}:s3:::*/models/*"
            keys = f"arn:{Aws.PARTITION}:kms:{plan.region}:{source_account}:key/*"
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[objects],
                    conditions={"StringEquals": {"s3:ResourceAccount": source_account}},
                )
            )
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["kms:Decrypt"],
                    resources=[keys],
                    conditions={"StringLike": {"kms:ViaService": f"s3.{plan.region}.amazonaws.com"}},
                )
            )
            acknowledge(
                role,
                {
                    f"AwsSolutions-IAM5[Resource::{nag_text(role, objects)}]": "Model "
                    f"objects of a package promoted from account {source_account}: its bucket's name is not known "
                    "here, so the statement is limited to that account (s3:ResourceAccount) and its models/ prefix.",
                    f"AwsSolutions-IAM5[Resource::{nag_text(role, keys)}]": "The "
                    "source account's key that encrypts the promoted model, used only through S3 (kms:ViaService).",
                },
            )
