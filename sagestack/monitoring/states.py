"""Model Monitor data quality for one endpoint: the baseline job (CreateProcessingJob with AWS's
model-monitor analyzer, as the SageMaker SDK's DefaultModelMonitor.suggest_baseline sends it), the
state machine that runs it, and where baseline, reports and captured data live in the bucket.

The analyzer reads its settings from the environment: dataset_format ({"csv": {"header": …}} or
{"json": {"lines": true}}), dataset_source (the local input folder), output_path (where
statistics.json and constraints.json go) and publish_cloudwatch_metrics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sagestack.core import states as asl
from sagestack.core.catalog.service_model import validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.core.states import PipelineSettings
from sagestack.monitoring.models import MonitorSpec

INPUT = "/opt/ml/processing/input/baseline_dataset_input"
ENDPOINT_INPUT = "/opt/ml/processing/input/endpoint"
OUTPUT = "/opt/ml/processing/output"
VOLUME_GB = 20
PROCESSING_NAME_PREFIX_MAX = 30  # + '-' + 32 hex digits = 63


def analyzer_image(region: str) -> str:
    """AWS's Model Monitor analyzer for `region` (sagemaker-core's image config)."""
    from sagemaker.core import image_uris

    return str(image_uris.retrieve("model-monitor", region))


@dataclass(frozen=True)
class ResolvedMonitor:
    endpoint: str  # the endpoint's key
    endpoint_name: str
    spec: MonitorSpec
    prefix: str  # baseline jobs are '<prefix>-<md5>'

    @staticmethod
    def of(names: Names, endpoint: str, spec: MonitorSpec) -> ResolvedMonitor:
        prefix = f"{names.endpoint(endpoint)}-baseline"[:PROCESSING_NAME_PREFIX_MAX].rstrip("-")
        return ResolvedMonitor(endpoint, names.endpoint(endpoint), spec, prefix)

    def baseline_data(self, bucket: str) -> str:
        return self.spec.baseline_data or S3Layout(bucket).baseline_data(self.endpoint)

    def baseline_uri(self, bucket: str) -> str:
        return S3Layout(bucket).baseline(self.endpoint)

    def reports_uri(self, bucket: str) -> str:
        return S3Layout(bucket).reports(self.endpoint)

    @property
    def dataset_format(self) -> str:
        if self.spec.dataset_format == "csv":
            return json.dumps({"csv": {"header": self.spec.csv_header, "output_columns_position": "START"}})
        return json.dumps({"json": {"lines": True}})


def baseline_request(m: ResolvedMonitor, deployment: Deployment, *, name: str, image: str) -> dict[str, Any]:
    """CreateProcessingJob: the analyzer over the baseline data, writing statistics and constraints."""
    bucket, kms_key_id = deployment.bucket, deployment.kms_key_id
    return {
        "ProcessingJobName": name,
        "RoleArn": deployment.role_arn,
        "AppSpecification": {"ImageUri": image},
        "Environment": {
            "dataset_format": m.dataset_format,
            "dataset_source": INPUT,
            "output_path": OUTPUT,
            "publish_cloudwatch_metrics": "Disabled",
        },
        "ProcessingInputs": [
            {
                "InputName": "baseline_dataset_input",
                "S3Input": {
                    "S3Uri": m.baseline_data(bucket),
                    "LocalPath": INPUT,
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                    "S3DataDistributionType": "FullyReplicated",
                },
            }
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "monitoring_output",
                    "S3Output": {
                        "S3Uri": m.baseline_uri(bucket),
                        "LocalPath": OUTPUT,
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ],
            "KmsKeyId": kms_key_id,
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": 1,
                "InstanceType": m.spec.instance_type,
                "VolumeSizeInGB": VOLUME_GB,
                "VolumeKmsKeyId": kms_key_id,
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": m.spec.max_runtime},
        # the environment's tags: the pipeline's role may create, follow and stop only jobs carrying them
        **({"Tags": [{"Key": k, "Value": v} for k, v in deployment.tags]} if deployment.tags else {}),
    }


def validate_baseline(m: ResolvedMonitor, deployment: Deployment, *, image: str) -> None:
    validate_request(
        "CreateProcessingJob", baseline_request(m, deployment, name=f"{m.prefix}-{'0' * 32}", image=image)
    )


def baseline_definition(
    m: ResolvedMonitor, deployment: Deployment, settings: PipelineSettings, *, image: str
) -> dict[str, Any]:
    """Compute the baseline: one processing job per execution, followed to its end."""
    bucket = deployment.bucket
    request = baseline_request(m, deployment, name="stand-in", image=image)
    request.pop("ProcessingJobName")
    request["ProcessingJobName.$"] = "$.job.name"
    states: dict[str, Any] = {
        "Name baseline": {
            "Type": "Pass",
            "Parameters": {
                "name.$": f"States.Format('{m.prefix}-{{}}', States.Hash($$.Execution.Id, 'MD5'))"
            },
            "ResultPath": "$.job",
            "Next": "Compute baseline",
        },
        "Compute baseline": asl.task(
            "sagemaker:createProcessingJob",
            request,
            comment=f"CreateProcessingJob: Model Monitor's analyzer on {m.baseline_data(bucket)}",
            result_path="$.created",
            nxt="Wait baseline",
            catch_=asl.catch("Notify baseline failed"),
        ),
        **asl.poll(
            asl.PollStates("Wait baseline", "Describe baseline", "Baseline status?"),
            asl.Describe(
                "sagemaker:describeProcessingJob",
                {"ProcessingJobName.$": "$.job.name"},
                result_path="$.baseline",
                result_selector={"Status.$": "$.ProcessingJobStatus"},
            ),
            status_path="$.baseline.Status",
            seconds=settings.poll_seconds,
            done="Notify baseline ready",
            failed="Notify baseline failed",
        ),
        "Notify baseline ready": asl.notify(
            settings,
            f"sagestack: baseline for {m.endpoint_name} ready"[:100],
            {"Message": f"statistics.json and constraints.json are under {m.baseline_uri(bucket)}/"},
            "Baseline ready",
        ),
        "Baseline ready": {"Type": "Succeed"},
        "Notify baseline failed": asl.notify(
            settings,
            f"sagestack: baseline for {m.endpoint_name} failed"[:100],
            {"Message": f"The Model Monitor baseline job for {m.endpoint_name} failed."},
            "Baseline failed",
        ),
        "Baseline failed": {
            "Type": "Fail",
            "Error": "BaselineFailed",
            "Cause": "The baseline processing job failed or was refused; the execution's history holds the reason.",
        },
    }
    return {
        "Comment": f"sagestack: Model Monitor data-quality baseline for endpoint {m.endpoint_name}",
        "StartAt": "Name baseline",
        "States": states,
    }
