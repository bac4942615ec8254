"""TrainingPipeline: one training job's Step Functions state machine, its failure alarm, and
optionally an execution started by `cdk deploy` when the job's content hash changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import custom_resources as cr
from constructs import Construct

from sagestack.constructs.nag import acknowledge
from sagestack.plan.pipeline import training_pipeline
from sagestack.plan.states import PipelineSettings
from sagestack.plan.training import TrainingJobPlan


class TrainingPipeline(Construct):
    """Props:
    plan: the job's resolved requests (values may be tokens: role, bucket, key, code location).
    role: the state machine's role (shared by a stack's pipelines; its permissions are the caller's).
    log_group: where executions log (level ALL).
    topic: success/failure notifications and the alarm's action (default: none).
    state_machine_name: default: generated.
    poll_interval / backoff: Describe polling and the wait before the next candidate (default 60 s / 120 s).
    quota_codes: quota name -> code, for the run-time quota check (default: none; checks are skipped
      with a note in the execution).
    run_on_deploy: start an execution from `cdk deploy` when the job's hash changed (default False).
    extend: a function that adds states after training (compile, register), given the definition and
      the pipeline's settings (default: none).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        plan: TrainingJobPlan | None = None,
        definition: dict[str, Any] | None = None,
        description: str | None = None,
        role: iam.IRole,
        log_group: logs.ILogGroup,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: dict[str, str] | None = None,
        run_on_deploy: bool = False,
        extend: Callable[[dict[str, Any], PipelineSettings], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(scope, id)
        settings = PipelineSettings(
            poll_seconds=int((poll_interval or Duration.seconds(60)).to_seconds()),
            backoff_seconds=int((backoff or Duration.seconds(120)).to_seconds()),
            topic_arn=topic.topic_arn if topic else None,
            quota_codes=quota_codes,
        )
        if (plan is None) == (definition is None):
            raise ValueError("give either a training job plan or a ready definition")
        self.definition = definition if definition is not None else training_pipeline(plan, settings)  # type: ignore[arg-type]
        if extend is not None:
            self.definition = extend(self.definition, settings)
        self.plan = plan
        label = description or (f"the '{plan.key}' training pipeline" if plan else "the pipeline")
        self.state_machine = sfn.StateMachine(
            self,
            "Resource",
            state_machine_name=state_machine_name,
            definition_body=sfn.DefinitionBody.from_string(Stack.of(self).to_json_string(self.definition)),
            role=role,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            tracing_enabled=True,
            comment=self.definition["Comment"],
        )
        self._drop_redundant_role_dependency(role)
        self.alarm = cloudwatch.Alarm(
            self,
            "Failures",
            alarm_description=f"An execution of {label} failed",
            metric=self.state_machine.metric_failed(period=Duration.minutes(5), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if topic is not None:
            self.alarm.add_alarm_action(cw_actions.SnsAction(topic))
        if run_on_deploy and plan is not None:
            self._start_on_deploy()

    def _drop_redundant_role_dependency(self, role: iam.IRole) -> None:
        """CDK makes the state machine depend on the role it already references by GetAtt (cfn-lint
        W3005); keep only the dependency on the role's policy, which the reference does not imply."""
        policy = role.node.try_find_child("DefaultPolicy")
        cfn = self.state_machine.node.default_child
        if policy is None or cfn is None:
            return
        stack = Stack.of(self)
        cfn.add_override("DependsOn", [stack.get_logical_id(policy.node.default_child)])  # type: ignore[union-attr,attr-defined,arg-type]

    def _start_on_deploy(self) -> None:
        """An execution named after the content hash: an unchanged job is never started twice
        (ExecutionAlreadyExists is ignored), a changed one starts once per deploy."""
        assert self.plan is not None
        call = cr.AwsSdkCall(
            service="SFN",
            action="startExecution",
            parameters={
                "stateMachineArn": self.state_machine.state_machine_arn,
                "name": f"deploy-{self.plan.digest}",
                "input": "{}",
            },
            physical_resource_id=cr.PhysicalResourceId.of(f"{self.plan.key}-{self.plan.digest}"),
            ignore_error_codes_matching="ExecutionAlreadyExists",
        )
        starter = cr.AwsCustomResource(
            self,
            "StartOnDeploy",
            on_create=call,
            on_update=call,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(
                        actions=["states:StartExecution"], resources=[self.state_machine.state_machine_arn]
                    )
                ]
            ),
            install_latest_aws_sdk=False,
        )
        self.starter = starter
        stack = Stack.of(self)
        provider = stack.node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")
        if provider is not None:
            acknowledge(
                provider,
                {
                    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaBasicExecutionRole]": "CDK's AwsCustomResource provider writes only its own "
                    "CloudWatch logs with the AWS-managed basic execution policy.",
                    "AwsSolutions-L1": "The runtime is chosen by aws-cdk-lib's AwsCustomResource and moves "
                    "with it; the function only calls states:StartExecution.",
                },
            )
