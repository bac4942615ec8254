"""ModelMonitor: Model Monitor data quality for an endpoint that captures its data — a baseline
pipeline (the analyzer on the training data writes statistics.json and constraints.json), the
data-quality job definition and its schedule over the captured requests, the per-feature metrics
it publishes to CloudWatch, and an alarm when a watched feature drifts from the baseline."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Stack, Tags, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from sagestack.constructs import actions
from sagestack.constructs.alarm_actions import notify
from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.image_digests import ImageDigests
from sagestack.constructs.inference_endpoint import InferenceEndpoint, InferenceEndpointBase
from sagestack.constructs.job_pipeline import JobPipeline, PipelineDeployment
from sagestack.constructs.prop_types import typed_props
from sagestack.constructs.regional_images import image_in_deploy_region
from sagestack.constructs.validation import stand_in_deployment, token_deployment, validate_as_request
from sagestack.core.deployment import Deployment
from sagestack.core.names import ENDPOINT_TAG, Names
from sagestack.monitoring.models import MonitorSpec
from sagestack.monitoring.states import (
    ENDPOINT_INPUT,
    OUTPUT,
    VOLUME_GB,
    ResolvedMonitor,
    analyzer_image,
    baseline_definition,
    validate_baseline,
)

METRICS_NAMESPACE = "/aws/sagemaker/Endpoints/data-metrics"
Definition = sagemaker.CfnDataQualityJobDefinition


class ModelMonitor(Construct):
    """Props:
    endpoint: the InferenceEndpoint (with data capture) to watch; endpoint_key: its key (names; the
      sagestack:endpoint tag of the baseline job, the job definition and the schedule).
    names: project and environment (Names).
    execution_role, artifacts, encryption_key: what the analyzer runs as, reads and writes with.
    baseline_data: an S3 prefix of training data (default: s3://<bucket>/monitoring/<key>/baseline-data/).
    dataset_format: 'csv' | 'json' (JSON Lines); csv_header (True).
    schedule: a cron ScheduleExpression (default hourly); instance_type ('ml.m5.xlarge');
    max_runtime (30 minutes).
    alarm_features: features whose baseline drift raises the alarm (at most 10); drift_threshold (0.1).
    topic: the alarm's and the baseline pipeline's notifications (default: none).
    poll_interval: how often the baseline pipeline looks at its job (default: a minute).
    """

    @typed_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        endpoint: InferenceEndpointBase,
        endpoint_key: str,
        names: Names,
        execution_role: ExecutionRoleBase,
        artifacts: ArtifactBucketBase,
        encryption_key: kms.IKey,
        baseline_data: str | None = None,
        dataset_format: str = "csv",
        csv_header: bool = True,
        schedule: str = "cron(0 * ? * * *)",
        instance_type: str = "ml.m5.xlarge",
        max_runtime: Duration | None = None,
        alarm_features: Sequence[str] = (),
        drift_threshold: float = 0.1,
        topic: sns.ITopic | None = None,
        poll_interval: Duration | None = None,
        region: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        if isinstance(endpoint, InferenceEndpoint) and endpoint.config.data_capture_config is None:
            raise ValueError(f"endpoint '{endpoint.endpoint_name}': Model Monitor needs data capture")
        if len(alarm_features) > 10:
            raise ValueError("alarm_features: a CloudWatch alarm watches at most 10 metrics")
        stack = Stack.of(self)
        region = region or stack.region
        spec = MonitorSpec.model_validate(
            {
                "baseline_data": baseline_data,
                "dataset_format": dataset_format,
                "csv_header": csv_header,
                "schedule": schedule,
                "instance_type": instance_type,
                "max_runtime": int((max_runtime or Duration.minutes(30)).to_seconds()),
                "alarm_features": list(alarm_features),
                "drift_threshold": drift_threshold,
            }
        )
        self.plan = ResolvedMonitor.of(names, endpoint_key, spec)
        tags = names.request_tags({ENDPOINT_TAG: endpoint_key})  # its jobs bill for the endpoint
        stand_ins = stand_in_deployment(self, region=region, tags=tags)
        # In an environment-agnostic stack the image is the deploy region's, read from a mapping.
        image = (
            image_in_deploy_region(stack, "model-monitor", analyzer_image)
            if Token.is_unresolved(region)
            else analyzer_image(region)
        )
        validate_baseline(self.plan, stand_ins, image=analyzer_image(stand_ins.region))
        deployment = token_deployment(
            self,
            role_arn=execution_role.role_arn,
            bucket=artifacts.bucket_name,
            kms_key_id=encryption_key.key_arn,
            region=region,
            tags=tags,
        )
        # 1. The baseline: run once after the model is deployed, and again when the training data moves.
        self.baseline = self._baseline(deployment, image, names, topic, encryption_key, poll_interval)
        execution_role.grant_pass_role(self.baseline.role)
        # 2. The job definition and the schedule that runs it over the captured requests.
        name = names.monitoring_schedule(endpoint_key)
        self.job_definition = self._job_definition(deployment, image, name, endpoint.endpoint_name)
        if isinstance(endpoint, InferenceEndpoint):
            self.job_definition.node.add_dependency(endpoint.endpoint)
        self.schedule = self._schedule(name, endpoint.endpoint_name)
        # 3. Drift of the watched features: one alarm over their metrics.
        self.alarm = self._drift_alarm(endpoint.endpoint_name, topic) if spec.alarm_features else None
        self._endpoint_name = endpoint.endpoint_name
        # what runs the analysis for this endpoint, tagged with it as its baseline job is (cost)
        Tags.of(self).add(
            ENDPOINT_TAG,
            endpoint_key,
            include_resource_types=[
                "AWS::SageMaker::MonitoringSchedule",
                "AWS::SageMaker::DataQualityJobDefinition",
            ],
        )

    def _baseline(
        self,
        deployment: Deployment,
        image: str,
        names: Names,
        topic: sns.ITopic | None,
        encryption_key: kms.IKey,
        poll_interval: Duration | None,
    ) -> JobPipeline:
        """The state machine that runs the analyzer over the baseline data, once per execution."""
        key = self.plan.endpoint
        pipeline = PipelineDeployment(
            role=None,  # a new one
            log_group=None,  # a new one, encrypted with the key
            topic=topic,
            encryption_key=encryption_key,
            state_machine_name=names.baseline_state_machine(key),
            poll_interval=poll_interval,
            backoff=None,  # one processing job: nothing to back off from
            quota_codes=None,  # no quota check
        )
        baseline = JobPipeline(
            self,
            "Baseline",
            definition=baseline_definition(self.plan, deployment, pipeline.settings(), image=image),
            names=names,
            entry=f"baseline-{key}",
            description=f"the '{key}' Model Monitor baseline",
            **pipeline.construct_props(),
        )
        baseline.grant_sagemaker(
            actions.PROCESSING_JOBS_RUN,
            "processing-job",
            names.processing_job_pattern,
            "Baseline processing jobs whose names start with this environment's prefix (one per execution).",
        )
        return baseline

    def _job_definition(
        self, deployment: Deployment, image: str, name: str, endpoint_name: str
    ) -> Definition:
        """The data-quality job: the analyzer over the captured requests, against the baseline."""
        plan, bucket, key_arn = self.plan, deployment.bucket, deployment.kms_key_id
        definition = Definition(
            self,
            "JobDefinition",
            job_definition_name=name,
            role_arn=deployment.role_arn,
            data_quality_app_specification=Definition.DataQualityAppSpecificationProperty(
                image_uri=ImageDigests.apply(self, image),
                environment={"publish_cloudwatch_metrics": "Enabled"},
            ),
            data_quality_baseline_config=Definition.DataQualityBaselineConfigProperty(
                constraints_resource=Definition.ConstraintsResourceProperty(
                    s3_uri=f"{plan.baseline_uri(bucket)}/constraints.json"
                ),
                statistics_resource=Definition.StatisticsResourceProperty(
                    s3_uri=f"{plan.baseline_uri(bucket)}/statistics.json"
                ),
            ),
            data_quality_job_input=Definition.DataQualityJobInputProperty(
                endpoint_input=Definition.EndpointInputProperty(
                    endpoint_name=endpoint_name,
                    local_path=ENDPOINT_INPUT,
                    s3_input_mode="File",
                    s3_data_distribution_type="FullyReplicated",
                )
            ),
            data_quality_job_output_config=Definition.MonitoringOutputConfigProperty(
                monitoring_outputs=[
                    Definition.MonitoringOutputProperty(
                        s3_output=Definition.S3OutputProperty(
                            s3_uri=plan.reports_uri(bucket), local_path=OUTPUT, s3_upload_mode="Continuous"
                        )
                    )
                ],
                kms_key_id=key_arn,
            ),
            job_resources=Definition.MonitoringResourcesProperty(
                cluster_config=Definition.ClusterConfigProperty(
                    instance_count=1,
                    instance_type=plan.spec.instance_type,
                    volume_size_in_gb=VOLUME_GB,
                    volume_kms_key_id=key_arn,
                )
            ),
            stopping_condition=Definition.StoppingConditionProperty(
                max_runtime_in_seconds=plan.spec.max_runtime
            ),
        )
        validate_as_request(definition, "CreateDataQualityJobDefinition", drop=("EndpointName",))
        return definition

    def _schedule(self, name: str, endpoint_name: str) -> sagemaker.CfnMonitoringSchedule:
        schedule = sagemaker.CfnMonitoringSchedule(
            self,
            "Schedule",
            monitoring_schedule_name=name,
            endpoint_name=endpoint_name,
            monitoring_schedule_config=sagemaker.CfnMonitoringSchedule.MonitoringScheduleConfigProperty(
                monitoring_job_definition_name=self.job_definition.job_definition_name,
                monitoring_type="DataQuality",
                schedule_config=sagemaker.CfnMonitoringSchedule.ScheduleConfigProperty(
                    schedule_expression=self.plan.spec.schedule
                ),
            ),
        )
        schedule.add_dependency(self.job_definition)
        validate_as_request(
            schedule,
            "CreateMonitoringSchedule",
            drop=(
                "EndpointName",
                "FailureReason",
                "LastMonitoringExecutionSummary",
                "MonitoringScheduleStatus",
            ),
        )
        return schedule

    def _drift_alarm(self, endpoint_name: str, topic: sns.ITopic | None) -> cloudwatch.Alarm:
        spec = self.plan.spec
        metrics = {
            f"f{i}": self.metric_feature_drift(feature) for i, feature in enumerate(spec.alarm_features)
        }
        alarm = cloudwatch.Alarm(
            self,
            "Drift",
            alarm_name=f"{endpoint_name}-drift",
            alarm_description=f"{endpoint_name}: {', '.join(spec.alarm_features)} drifted from the "
            f"baseline by more than {spec.drift_threshold}",
            metric=cloudwatch.MathExpression(
                expression=f"MAX([{', '.join(metrics)}])" if len(metrics) > 1 else "f0",
                using_metrics=metrics,
                period=Duration.hours(1),
                label="largest baseline drift",
            ),
            threshold=spec.drift_threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if topic is not None:
            notify(alarm, topic)
        return alarm

    def metric_feature_drift(self, feature: str) -> cloudwatch.Metric:
        """feature_baseline_drift_<feature>: the distance of the captured data from the baseline."""
        return cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=f"feature_baseline_drift_{feature}",
            dimensions_map={
                "Endpoint": self.plan.endpoint_name,
                "MonitoringSchedule": self.schedule.monitoring_schedule_name,
            },
            statistic="Maximum",
            period=Duration.hours(1),
        )

    def grant_start_baseline(self, grantee: iam.IGrantable) -> iam.Grant:
        return self.baseline.grant_start_execution(grantee)
