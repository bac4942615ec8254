"""sagestack's CDK constructs (L2-style), usable in any CDK app without the YAML spec.

Lives under sagestack/ because a top-level package named `constructs` would shadow the library
aws-cdk-lib imports (aws/aws-cdk#19301). Import the classes from here:

    from sagestack.constructs import ArtifactBucket, ExecutionRole, TrainingImage, TrainingPipeline
"""

from sagestack.constructs.artifact_bucket import PREFIXES, ArtifactBucket, ArtifactBucketBase
from sagestack.constructs.cluster import HyperPodCluster
from sagestack.constructs.cluster_props import ClusterFileSystem, ClusterInstanceGroup
from sagestack.constructs.endpoint_async import AsyncInference
from sagestack.constructs.endpoint_autoscaling import AutoScaling
from sagestack.constructs.endpoint_components import InferenceComponent
from sagestack.constructs.endpoint_config import DataCapture, ServerlessConfig
from sagestack.constructs.endpoint_model import Batching, VpcPlacement
from sagestack.constructs.endpoint_rollout import Rollout
from sagestack.constructs.execution_role import ExecutionRole, ExecutionRoleBase
from sagestack.constructs.image_digests import ImageDigests
from sagestack.constructs.inference_endpoint import InferenceEndpoint, InferenceEndpointBase
from sagestack.constructs.job_pipeline import JobPipeline, JobPipelineBase
from sagestack.constructs.mlflow_server import MlflowTrackingServer, grant_mlflow_logging
from sagestack.constructs.model_monitor import ModelMonitor
from sagestack.constructs.model_registration import ModelRegistration
from sagestack.constructs.model_registry import ModelPackageGroup, ModelPackageGroupBase
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.repository import project_repository
from sagestack.constructs.retraining_schedule import RetrainingSchedule
from sagestack.constructs.training_image import TrainingImage, repository_arn_of
from sagestack.constructs.training_pipeline import TrainingPipeline
from sagestack.constructs.transform_pipeline import TransformPipeline
from sagestack.constructs.tuning_pipeline import TuningPipeline
from sagestack.core.names import Names

__all__ = [
    "PREFIXES",
    "ArtifactBucket",
    "ArtifactBucketBase",
    "AsyncInference",
    "AutoScaling",
    "Batching",
    "ClusterFileSystem",
    "ClusterInstanceGroup",
    "DataCapture",
    "ExecutionRole",
    "ExecutionRoleBase",
    "HyperPodCluster",
    "ImageDigests",
    "InferenceComponent",
    "InferenceEndpoint",
    "InferenceEndpointBase",
    "JobPipeline",
    "JobPipelineBase",
    "MlflowTrackingServer",
    "ModelMonitor",
    "ModelPackageGroup",
    "ModelPackageGroupBase",
    "ModelRegistration",
    "Names",
    "RetrainingSchedule",
    "Rollout",
    "ServerlessConfig",
    "TrainingImage",
    "TrainingPipeline",
    "TransformPipeline",
    "TuningPipeline",
    "VpcPlacement",
    "acknowledge",
    "grant_mlflow_logging",
    "project_repository",
    "repository_arn_of",
]
