"""JobPipeline: a Step Functions state machine that runs SageMaker work (train, tune, transform or
optimize; then compile and register), its failure alarm, its role, its logs — the base of
TrainingPipeline, TuningPipeline, TransformPipeline and OptimizationPipeline, and Model Monitor's
baseline pipeline; and PipelineDeployment, the deployment settings each of them forwards in one piece."""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aws_cdk import Aws, CfnElement, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.alarm_actions import notify
from sagestack.constructs.grants import first_time
from sagestack.constructs.image_digests import ImageDigests
from sagestack.constructs.log_encryption import allow_log_group_encryption
from sagestack.constructs.nag import acknowledge, nag_text
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.read_once import attribute, dropped, five_minutes, path_of, seconds, stack_of
from sagestack.constructs.trust import states_principal
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings


class JobPipelineBase(Construct):
    """Grants and metrics of a pipeline, created here or imported (`JobPipeline.from_state_machine_arn`)."""

    state_machine: sfn.IStateMachine

    @property
    def state_machine_arn(self) -> str:
        return self.state_machine.state_machine_arn

    def grant_start_execution(self, grantee: iam.IGrantable) -> iam.Grant:
        """Start executions (a scheduler, a CI role, a person's role)."""
        return self.state_machine.grant_start_execution(grantee)

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """List and describe executions (a dashboard, `sagestack status`)."""
        return self.state_machine.grant_read(grantee)

    def metric_failed_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        """Executions that failed, summed per `period` (default 5 minutes). The failure alarm uses it."""
        return self.state_machine.metric_failed(period=period or five_minutes(), statistic="Sum")

    def metric_succeeded_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.state_machine.metric_succeeded(period=period or five_minutes(), statistic="Sum")

    def metric_started_executions(self, *, period: Duration | None = None) -> cloudwatch.Metric:
        return self.state_machine.metric_started(period=period or five_minutes(), statistic="Sum")


class _ImportedJobPipeline(JobPipelineBase):
    def __init__(self, scope: Construct, id: str, arn: str) -> None:
        super().__init__(scope, id)
        self.state_machine = sfn.StateMachine.from_state_machine_arn(self, "Resource", arn)


def definition_string(definition: dict[str, Any]) -> str:
    """The definition as JSON text, written here rather than by Stack.to_json_string: sending a large
    document through jsii cost more than the rest of a pipeline together (bench/synth.py). Its tokens
    are CDK's string tokens, each standing where a string goes (ARNs, names), which CloudFormation's
    Fn::Join fills in; a token of another kind cannot be written so and is refused."""
    text = json.dumps(definition, separators=(",", ":"))
    if _NON_STRING_TOKEN.search(text):
        raise ValueError("a state machine definition holds a number or list token; write it as a string")
    return text


# How CDK encodes number tokens (a float near -1.888e+289) and list tokens ("#{Token[...]}").
_NON_STRING_TOKEN = re.compile(r"-1\.888[0-9]*e\+289|#\{Token\[")


@dataclass(frozen=True, kw_only=True)
class PipelineDeployment:
    """The deployment settings every pipeline construct takes, each as a prop of the same name, and
    forwards in this one piece: to JobPipeline (`construct_props`) and to its states (`settings`).
    No field has a default, so a construct cannot leave one out unseen: one whose states have no use
    for a setting says what it passes instead, and names it in its class's `settings_unused`."""

    role: iam.IRole | None  # default: a new one
    log_group: logs.ILogGroup | None  # default: a new one, kept 30 days, encrypted with encryption_key
    topic: sns.ITopic | None  # notifications and the failure alarm's action; default: none
    encryption_key: kms.IKey | None  # encrypts a log group the pipeline creates; default: CloudWatch's
    state_machine_name: str | None  # the construct's default name filled in (Names.*_state_machine)
    poll_interval: Duration | None  # between two Describe calls; default: 60 seconds
    backoff: Duration | None  # before the next candidate after a capacity error; default: 120 seconds
    quota_codes: Mapping[str, str] | None  # quota name -> code; default: found by name at run time

    def construct_props(self) -> dict[str, Any]:
        """JobPipeline's props of these settings."""
        return {
            "role": self.role,
            "log_group": self.log_group,
            "topic": self.topic,
            "encryption_key": self.encryption_key,
            "state_machine_name": self.state_machine_name,
        }

    def settings(self) -> PipelineSettings:
        """What the states read: the poll and back-off waits, the topic, the quota codes."""
        return PipelineSettings(
            # the environment's pipelines share these objects: each read through jsii once
            poll_seconds=int(seconds(self.poll_interval)) if self.poll_interval else 60,
            backoff_seconds=int(seconds(self.backoff)) if self.backoff else 120,
            topic_arn=attribute(self.topic, "topic_arn") if self.topic else None,
            quota_codes=dict(self.quota_codes) if self.quota_codes else None,
        )


# A role's default policy and its logical ID, looked up once per role (many pipelines share one).
_ROLE_POLICIES: weakref.WeakKeyDictionary[iam.IRole, tuple[Stack, str] | None] = weakref.WeakKeyDictionary()


class JobPipeline(JobPipelineBase):
    """A state machine for a ready Amazon States Language definition. Its subclasses
    (TrainingPipeline, TuningPipeline, TransformPipeline, OptimizationPipeline) build the definition
    from their props and forward their PipelineDeployment here; use this class directly only for a
    definition of your own (as ModelMonitor does for its baseline).

    Props:
      definition: the ASL document (a dict; values may be CDK tokens).
      names: the project and environment (Names): scopes the role's grants to their resources.
      entry: the job's or search's key (names a log group this construct creates; default: the id).
      description: what the pipeline runs, for the alarm (default: "the pipeline").
      role: the state machine's role (default: a new one; stacks with many pipelines share one).
      log_group: where executions log at level ALL (default: a new one, kept 30 days, encrypted
        with encryption_key when given).
      topic: success/failure notifications and the alarm's action (default: none).
      encryption_key: encrypts a log group this construct creates (default: CloudWatch's own).
      state_machine_name: default: generated by CloudFormation.
    """

    # The PipelineDeployment settings a subclass's states have no use for, each with the reason (it
    # may still accept the prop, for a caller that passes the same settings to every pipeline).
    settings_unused: ClassVar[Mapping[str, str]] = {}

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        definition: dict[str, Any],
        names: Names,
        entry: str | None = None,
        description: str | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        encryption_key: kms.IKey | None = None,
        state_machine_name: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.names = names
        self.topic = topic
        self.encryption_key = encryption_key
        self.role = role or iam.Role(
            self,
            "Role",
            assumed_by=states_principal(self),
            description=f"Step Functions pipeline of sagestack {names.prefix}",
        )
        self.log_group = log_group or self._log_group(names.entry_log_group(entry or id), encryption_key)
        if topic is not None and first_time(self.role, "publish", path_of(topic)):
            topic.grant_publish(self.role)
        # A locked environment names its images by digest (ImageDigests.pin on the stage).
        definition = ImageDigests.apply_below(scope, definition)
        self.definition = definition
        label = description or "the pipeline"
        self.state_machine = sfn.StateMachine(
            self,
            "Resource",
            state_machine_name=state_machine_name,
            definition_body=sfn.DefinitionBody.from_string(definition_string(definition)),
            role=self.role,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
            tracing_enabled=True,
            comment=definition["Comment"],
        )
        self._drop_redundant_role_dependency(scope)
        self.alarm = cloudwatch.Alarm(
            self,
            "Failures",
            alarm_description=f"An execution of {label} failed",
            metric=self.metric_failed_executions(),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if topic is not None:
            notify(self.alarm, topic)
        self._acknowledge_role()

    def _log_group(self, name: str, key: kms.IKey | None) -> logs.LogGroup:
        """The pipeline's own log group, kept a month; with a key, the key's policy lets CloudWatch
        Logs use it for this group only (an imported key's policy is yours to change)."""
        group = logs.LogGroup(
            self, "Logs", log_group_name=name, retention=logs.RetentionDays.ONE_MONTH, encryption_key=key
        )
        if key is not None:
            allow_log_group_encryption(key, name)
        return group

    @staticmethod
    @typed_props
    def from_state_machine_arn(scope: Construct, id: str, state_machine_arn: str) -> JobPipelineBase:
        """A pipeline deployed elsewhere (another app or stack): grant starting it, watch its metrics."""
        return _ImportedJobPipeline(scope, id, state_machine_arn)

    def _drop_redundant_role_dependency(self, scope: Construct) -> None:
        """CDK makes the state machine depend on the role it already references by GetAtt (cfn-lint
        W3005); keep only the dependency on the role's policy, which the reference does not imply."""
        if self.role not in _ROLE_POLICIES:  # one look-up per role, not per pipeline (calls into jsii)
            policy = self.role.node.try_find_child("DefaultPolicy")
            _ROLE_POLICIES[self.role] = (
                None
                if policy is None
                else (Stack.of(policy), Stack.of(policy).get_logical_id(policy.node.default_child))  # type: ignore[arg-type]
            )
        found = _ROLE_POLICIES[self.role]
        cfn = self.state_machine.node.default_child
        self._depends_on: list[str] | None = None
        if found is None or cfn is None or found[0] is not stack_of(scope):  # self's stack, read once
            return  # a role in another stack: CloudFormation orders the stacks instead
        self._depends_on = [found[1]]
        cfn.add_override("DependsOn", self._depends_on)  # type: ignore[attr-defined]

    def wait_for(self, resource: CfnElement) -> None:
        """Create the state machine only once `resource` (of this stack) exists: e.g. the files the
        jobs it starts read."""
        if self._depends_on is None:
            self.state_machine.node.add_dependency(resource)
            return
        self._depends_on.append(Stack.of(self).get_logical_id(resource))
        cfn = self.state_machine.node.default_child
        cfn.add_override("DependsOn", sorted(self._depends_on))  # type: ignore[union-attr]

    def _acknowledge_role(self) -> None:
        """What CDK itself grants a state machine's role for logging, tracing and the topic."""
        if not isinstance(self.role, iam.Role):
            return
        findings = {
            "AwsSolutions-IAM5[Resource::*]": "Step Functions log delivery, X-Ray tracing (CDK adds them for "
            "LogOptions and tracing) and servicequotas:ListServiceQuotas (read-only, to find a quota by its "
            "name) have no resource-level permissions.",
        }
        if self.topic is not None and attribute(self.topic, "master_key") is not None:
            findings.update(
                {
                    "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "CDK's publish grant for the topic's "
                    "KMS key: data keys of the project key only.",
                    "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": "CDK's grant for the topic's KMS key: the "
                    "project key only.",
                }
            )
        if first_time(self.role, "acknowledge", findings):
            acknowledge(self.role, findings)

    # ------------------------------------------------------------------ grants the subclasses use

    def _grant(
        self,
        granted: tuple[str, ...],
        arn: str,
        reason: str,
        string_equals: Mapping[str, Any] | None = None,
    ) -> iam.Grant:
        """Grant the pipeline's role `granted` on `arn`, a wildcard ARN whose cdk-nag finding is
        acknowledged here, with its reason (a role the caller gave keeps the caller's findings)."""
        if not first_time(self.role, "grant", granted, arn, string_equals):
            return dropped(self.role, f"{', '.join(granted)} (granted already)")
        grant = iam.Grant.add_to_principal(
            grantee=self.role,
            actions=list(granted),
            resource_arns=[arn],
            conditions={"StringEquals": dict(string_equals)} if string_equals else None,
        )
        if isinstance(self.role, iam.Role):
            acknowledge(self.role, {f"AwsSolutions-IAM5[Resource::{nag_text(self, arn)}]": reason})
        return grant

    def grant_sagemaker(self, what: tuple[str, ...], resource: str, pattern: str, reason: str) -> iam.Grant:
        """Let the pipeline's role run SageMaker work of one kind whose names match `pattern`, each
        action also held to this environment's tags (Names.tags), which every request of it carries:
        no name pattern tells environments apart, since names may hold '-' (`digits-dev-*` is also
        environment `dev-eu`'s, and project `digits-dev`'s environment `eu`), and tuning jobs' 32
        characters hold no environment at all. Create and AddTags by the tags in the request (AddTags
        only while creating: sagemaker:TaggingAction), Describe and Stop by the resource's own."""
        if not first_time(self.role, "sagemaker", what, resource, pattern):
            return dropped(self.role, f"{', '.join(what)} (granted already)")
        arn = Stack.of(self).format_arn(service="sagemaker", resource=resource, resource_name=pattern)
        creates = tuple(a for a in what if a.split(":")[1].startswith("Create"))
        tags = sorted(self.names.tags.items())
        requested = {f"aws:RequestTag/{k}": v for k, v in tags}
        existing = {f"aws:ResourceTag/{k}": v for k, v in tags}
        add_tags = {**requested, "sagemaker:TaggingAction": [a.split(":")[1] for a in creates]}
        rest = tuple(a for a in what if a not in creates and a != "sagemaker:AddTags")
        grants = [
            self._grant(granted, arn, reason, conditions)
            for granted, conditions in (
                (creates, requested),
                (("sagemaker:AddTags",) if "sagemaker:AddTags" in what else (), add_tags),
                (rest, existing),
            )
            if granted
        ]
        for grant in grants[1:]:
            grants[0] = grants[0].combine(grant)
        return grants[0]

    def _grant_quota_reads(self, region: str) -> iam.Grant:
        """GetServiceQuota for SageMaker's quotas in `region`, and ListServiceQuotas to find a quota
        by its name when no snapshot names its code (the run-time quota check)."""
        if not first_time(self.role, "quota reads", region):
            return dropped(self.role, "quota reads (granted already)")
        return self._grant(
            actions.QUOTAS_READ,
            f"arn:{Aws.PARTITION}:servicequotas:{region}:{Aws.ACCOUNT_ID}:sagemaker/*",
            "Reading SageMaker's service quotas (read-only); quota codes are opaque and chosen per candidate.",
        ).combine(
            self._grant(
                actions.QUOTAS_LIST,
                "*",
                "Step Functions log delivery, X-Ray tracing and servicequotas:ListServiceQuotas (read-only, "
                "to find a quota by its name) have no resource-level permissions.",
            )
        )
