"""TransformPipeline: a batch transform with a pinned model package — make a model of it, check the
transform quota of each candidate instance type, run CreateTransformJob on the first with room,
follow it. `sagestack run TRANSFORM --env E` starts it; the execution input may name another package
({"ModelPackageArn": …}) or input prefix ({"Input": "s3://…/"})."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import stand_in_deployment, token_deployment
from sagestack.core.names import Names
from sagestack.transforms.models import TransformSpec
from sagestack.transforms.request import ResolvedTransform, validate_transform
from sagestack.transforms.states import standalone_definition


class TransformPipeline(JobPipeline):
    """Props:
    names: project and environment (Names).
    transform: the transform's key (default: the construct id): names its models, jobs and outputs
      (s3://<bucket>/transform/<key>/output/<job>/).
    model_package: the model package ARN to score with (the environment's pin).
    instance_types: candidates in order of preference; instance_count (1).
    execution_role, artifacts, encryption_key: as TrainingPipeline (the job reads the input and writes
      the output in the artifact bucket, encrypted with the key).
    options: any other key of a `transforms:` entry (input, content_type, accept, split_type,
      batch_strategy, max_payload_mb, max_concurrent_transforms, assemble_with, join_source,
      input_filter, output_filter, invocation_timeout, invocation_retries, environment).
    role, log_group, topic, state_machine_name (default Names.transform_state_machine), poll_interval,
    quota_codes, tags: as TrainingPipeline.
    """

    settings_unused = {
        "backoff": "a capacity error moves to the next instance candidate at once: nothing backs off"
    }

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        model_package: str,
        instance_types: Sequence[str],
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        transform: str | None = None,
        instance_count: int = 1,
        options: Mapping[str, Any] | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        key = transform or id
        spec = TransformSpec.model_validate(
            {
                **dict(options or {}),
                "model_package": model_package,
                "instance_type": list(instance_types),
                "instance_count": instance_count,
            }
        )
        plan = ResolvedTransform.of(names, key, spec)
        stack = Stack.of(scope)
        tag_pairs = names.request_tags(tags)
        validate_transform(plan, stand_in_deployment(scope, tags=tag_pairs))
        deployment = token_deployment(
            scope,
            role_arn=execution_role.role_arn,
            bucket=artifacts.bucket_name,
            kms_key_id=encryption_key.key_arn,
            tags=tag_pairs,
        )
        pipeline = PipelineDeployment(
            role=role,
            log_group=log_group,
            topic=topic,
            encryption_key=encryption_key,
            state_machine_name=state_machine_name or names.transform_state_machine(key),
            poll_interval=poll_interval,
            backoff=None,  # settings_unused
            quota_codes=quota_codes,
        )
        super().__init__(
            scope,
            id,
            definition=standalone_definition(plan, deployment, pipeline.settings()),
            names=names,
            entry=f"transform-{key}",
            description=f"the '{key}' batch transform",
            **pipeline.construct_props(),
        )
        self.key = key
        self.plan = plan
        grant_transform_steps(self)
        # CreateModel from a package asks the caller for DescribeModelPackage on it: exactly the pin.
        iam.Grant.add_to_principal(
            grantee=self.role, actions=list(actions.MODEL_PACKAGE_DESCRIBE), resource_arns=[model_package]
        )
        execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(stack.region)


def grant_transform_steps(pipeline: JobPipeline) -> None:
    """The pipeline's role may make models and run transform jobs of this environment only."""
    pipeline.grant_sagemaker(
        actions.MODELS_CREATE,
        "model",
        pipeline.names.transform_job_pattern,
        "Models whose names start with this environment's prefix (content-addressed by package, so only "
        "the prefix is known at synth).",
    )
    pipeline.grant_sagemaker(
        actions.TRANSFORM_JOBS_RUN,
        "transform-job",
        pipeline.names.transform_job_pattern,
        "Transform jobs whose names start with this environment's prefix (one per execution).",
    )
