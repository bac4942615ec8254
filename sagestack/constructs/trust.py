"""Service principals that may assume a sagestack role only for this account's own resources: the
confused-deputy guard AWS recommends (aws:SourceAccount and aws:SourceArn in the trust policy).

- SageMaker sends both keys when it assumes an execution role for a training, processing, transform
  or compilation job and for hosting; its documented SourceArn for hosting is
  'arn:<partition>:sagemaker:<region>:<account>:*' (SageMaker developer guide, "Cross-service
  confused deputy prevention"), which also covers every job kind, so one pattern serves a role that
  all of them share.
- Step Functions sends the state machine's ARN: 'stateMachine:*' of this account and region (a
  pipeline's name may be chosen by CloudFormation, and the role exists before its machines).
- EventBridge sends the rule's ARN: 'rule/*' of this account and region (the rule names the role
  as its target's, so the role cannot name the rule back).
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct


def _guarded(scope: Construct, service: str, source_arn: str) -> iam.ServicePrincipal:
    return iam.ServicePrincipal(
        service,
        conditions={
            "StringEquals": {"aws:SourceAccount": Stack.of(scope).account},
            "ArnLike": {"aws:SourceArn": source_arn},
        },
    )


def sagemaker_principal(scope: Construct) -> iam.ServicePrincipal:
    """sagemaker.amazonaws.com, for this account's SageMaker resources in the stack's region."""
    stack = Stack.of(scope)
    return _guarded(
        scope,
        "sagemaker.amazonaws.com",
        stack.format_arn(service="sagemaker", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME),
    )


def states_principal(scope: Construct) -> iam.ServicePrincipal:
    """states.amazonaws.com, for this account's state machines in the stack's region."""
    stack = Stack.of(scope)
    return _guarded(
        scope,
        "states.amazonaws.com",
        stack.format_arn(
            service="states",
            resource="stateMachine",
            resource_name="*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        ),
    )


def events_principal(scope: Construct) -> iam.ServicePrincipal:
    """events.amazonaws.com, for this account's EventBridge rules in the stack's region."""
    stack = Stack.of(scope)
    return _guarded(
        scope,
        "events.amazonaws.com",
        stack.format_arn(
            service="events", resource="rule", resource_name="*", arn_format=ArnFormat.SLASH_RESOURCE_NAME
        ),
    )
