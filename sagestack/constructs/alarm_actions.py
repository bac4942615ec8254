"""Alarms that tell someone: every CloudWatch alarm sagestack creates notifies its environment's
topic, and the topic lets CloudWatch deliver there. The topics are encrypted with the project key, so
CloudWatch needs both sns:Publish on the topic and the key (SNS developer guide, "Enable
compatibility between event sources from AWS services and encrypted topics"); both are granted for
this account's alarms in this Region only (aws:SourceAccount / aws:SourceArn)."""

from __future__ import annotations

import weakref

from aws_cdk import Aws
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns

from sagestack.constructs import actions
from sagestack.constructs.grants import first_time

CLOUDWATCH = "cloudwatch.amazonaws.com"


def notify(alarm: cloudwatch.Alarm, topic: sns.ITopic) -> None:
    """The alarm notifies `topic` when it goes off (ALARM), and CloudWatch may publish there."""
    allow_alarms(topic)
    # One action per topic, shared by its alarms: SnsAction only binds as the topic's ARN.
    action = _ACTIONS.get(topic)
    if action is None:
        action = _ACTIONS[topic] = cw_actions.SnsAction(topic)
    alarm.add_alarm_action(action)


_ACTIONS: weakref.WeakKeyDictionary[sns.ITopic, cw_actions.SnsAction] = weakref.WeakKeyDictionary()


def allow_alarms(topic: sns.ITopic) -> None:
    """CloudWatch alarms of this account and Region may publish to `topic` and, when it is encrypted,
    use its key to do so (once per topic and key)."""
    if not first_time(topic, "cloudwatch alarms"):
        return
    principal = iam.ServicePrincipal(CLOUDWATCH)
    conditions = {
        "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
        "ArnLike": {"aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"},
    }
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[principal],
            actions=list(actions.SNS_PUBLISH),
            resources=[topic.topic_arn],
            conditions=conditions,
        )
    )
    key = topic.master_key
    if key is not None and first_time(key, "cloudwatch alarms"):
        key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[principal],
                actions=list(actions.KMS_FOR_ALARMS),
                resources=["*"],
                conditions=conditions,
            )
        )
