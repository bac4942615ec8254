"""OptimizationPipeline: an LLM's optimization job as a pipeline — check the quota of the instance
type it optimizes for, run CreateOptimizationJob (quantization, compilation, sharding, speculative
decoding), follow it, register what it wrote as a model package for review. `sagestack run
<endpoint> --env E` starts it; the job's name is the spec's content hash, so a second run of an
unchanged spec follows the job that exists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.endpoint_llm import grant_weights_read
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.model_registry import ModelPackageGroupBase
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.validation import stand_in_deployment, token_deployment
from sagestack.core.model import VpcSpec
from sagestack.core.names import Names
from sagestack.llm.models import LlmSpec
from sagestack.llm.optimization_job import ResolvedOptimization, validate_optimization
from sagestack.llm.optimization_states import optimization_definition


class OptimizationPipeline(JobPipeline):
    """Props:
    names: project and environment (Names).
    endpoint, component: whose LLM this is (names the job 'prefix-endpoint[-component]-<hash>',
      its output s3://<bucket>/optimized/<endpoint>/<job>/ and its state machine).
    llm: the LLM's spec, `optimize:` set (LlmSpec).
    instance_types: the endpoint's pools (the package supports them; the first is the default target).
    accelerators: a component's devices per copy; vpc: the endpoint's VpcSpec, if any.
    execution_role, artifacts, encryption_key, registry: the job reads the weights and writes
      optimized/ as the execution role; the package is registered in `registry`.
    role, log_group, topic, state_machine_name, poll_interval, backoff, quota_codes, tags: as
      TransformPipeline.
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        names: Names,
        endpoint: str,
        llm: LlmSpec,
        instance_types: Sequence[str],
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        registry: ModelPackageGroupBase,
        component: str | None = None,
        accelerators: int | None = None,
        vpc: VpcSpec | None = None,
        role: iam.IRole | None = None,
        log_group: logs.ILogGroup | None = None,
        topic: sns.ITopic | None = None,
        state_machine_name: str | None = None,
        poll_interval: Duration | None = None,
        backoff: Duration | None = None,
        quota_codes: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        if llm.optimize is None:
            raise ValueError(
                f"OptimizationPipeline {id}: llm.optimize is not set: there is nothing to optimize"
            )
        plan = ResolvedOptimization(endpoint, component, llm, tuple(instance_types), accelerators, vpc, names)
        stack = Stack.of(scope)
        tag_pairs = names.request_tags(tags)
        group = registry.group_name
        validate_optimization(plan, stand_in_deployment(scope, tags=tag_pairs), env=names.env, group=group)
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
            state_machine_name=state_machine_name or plan.state_machine,
            poll_interval=poll_interval,
            backoff=backoff,
            quota_codes=quota_codes,
        )
        settings = pipeline.settings()
        super().__init__(
            scope,
            id,
            definition=optimization_definition(plan, deployment, settings, env=names.env, group=group),
            names=names,
            entry=f"optimize-{plan.key}",
            description=f"the optimization of '{plan.label}''s LLM",
            **pipeline.construct_props(),
        )
        self.plan = plan
        self.grant_sagemaker(
            actions.OPTIMIZATION_JOBS_RUN,
            "optimization-job",
            names.optimization_job_pattern,
            "Optimization jobs whose names start with this environment's prefix (content-addressed: the "
            "hash is known at synth, the prefix scopes every spec's job).",
        )
        registry.grant_register(self.role)
        execution_role.grant_pass_role(self.role)
        self._grant_quota_reads(stack.region)
        if llm.weights.s3.startswith("s3://"):  # the project bucket's prefixes are the role's already
            grant_weights_read(execution_role.role, llm.weights.s3)
