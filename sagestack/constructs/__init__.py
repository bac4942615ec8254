"""sagestack's CDK constructs (L2-style), usable in any CDK app without the YAML spec.

Lives under sagestack/ because a top-level package named `constructs` would shadow the library
aws-cdk-lib imports (aws/aws-cdk#19301). Import the classes from here:

    from sagestack.constructs import ArtifactBucket, ExecutionRole, TrainingImage, TrainingPipeline
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sagestack.constructs.approval_trigger import PackageApprovalTrigger
    from sagestack.constructs.artifact_bucket import PREFIXES, ArtifactBucket, ArtifactBucketBase
    from sagestack.constructs.cluster import HyperPodCluster
    from sagestack.constructs.cluster_props import ClusterFileSystem, ClusterInstanceGroup
    from sagestack.constructs.endpoint_async import AsyncInference
    from sagestack.constructs.endpoint_autoscaling import AutoScaling
    from sagestack.constructs.endpoint_components import InferenceComponent
    from sagestack.constructs.endpoint_config import (
        DataCapture,
        InstancePools,
        ServerlessConfig,
        ShadowVariant,
    )
    from sagestack.constructs.endpoint_llm import LlmModel
    from sagestack.constructs.endpoint_model import Batching, VpcPlacement
    from sagestack.constructs.endpoint_rollout import Rollout
    from sagestack.constructs.execution_role import ExecutionRole, ExecutionRoleBase
    from sagestack.constructs.image_digests import ImageDigests
    from sagestack.constructs.inference_endpoint import InferenceEndpoint, InferenceEndpointBase
    from sagestack.constructs.job_pipeline import JobPipeline, JobPipelineBase
    from sagestack.constructs.llm_optimization import OptimizationPipeline
    from sagestack.constructs.mlflow_server import MlflowApp, MlflowTrackingServer, grant_mlflow_logging
    from sagestack.constructs.model_monitor import ModelMonitor
    from sagestack.constructs.model_registration import ModelRegistration
    from sagestack.constructs.model_registry import ModelPackageGroup, ModelPackageGroupBase
    from sagestack.constructs.nag import acknowledge
    from sagestack.constructs.promotion import PromoterPolicy, PromotionReaderRole
    from sagestack.constructs.repository import project_repository
    from sagestack.constructs.retraining_schedule import RetrainingSchedule
    from sagestack.constructs.training_image import TrainingImage, repository_arn_of
    from sagestack.constructs.training_job_props import TrainingJobProps
    from sagestack.constructs.training_pipeline import TrainingPipeline
    from sagestack.constructs.transform_pipeline import TransformPipeline
    from sagestack.constructs.tuning_pipeline import TuningPipeline
    from sagestack.core.names import Names

# Where each public name lives. Loaded on first use (PEP 562): an app that builds only a bucket
# and a role does not load Step Functions, EC2 or FSx (aws-cdk-lib's Python modules cost tenths
# of a second each to import).
_WHERE = {
    "ArtifactBucket": "sagestack.constructs.artifact_bucket",
    "ArtifactBucketBase": "sagestack.constructs.artifact_bucket",
    "AsyncInference": "sagestack.constructs.endpoint_async",
    "AutoScaling": "sagestack.constructs.endpoint_autoscaling",
    "Batching": "sagestack.constructs.endpoint_model",
    "ClusterFileSystem": "sagestack.constructs.cluster_props",
    "ClusterInstanceGroup": "sagestack.constructs.cluster_props",
    "DataCapture": "sagestack.constructs.endpoint_config",
    "ExecutionRole": "sagestack.constructs.execution_role",
    "ExecutionRoleBase": "sagestack.constructs.execution_role",
    "HyperPodCluster": "sagestack.constructs.cluster",
    "ImageDigests": "sagestack.constructs.image_digests",
    "InferenceComponent": "sagestack.constructs.endpoint_components",
    "InferenceEndpoint": "sagestack.constructs.inference_endpoint",
    "InferenceEndpointBase": "sagestack.constructs.inference_endpoint",
    "InstancePools": "sagestack.constructs.endpoint_config",
    "JobPipeline": "sagestack.constructs.job_pipeline",
    "JobPipelineBase": "sagestack.constructs.job_pipeline",
    "LlmModel": "sagestack.constructs.endpoint_llm",
    "MlflowApp": "sagestack.constructs.mlflow_server",
    "MlflowTrackingServer": "sagestack.constructs.mlflow_server",
    "ModelMonitor": "sagestack.constructs.model_monitor",
    "ModelPackageGroup": "sagestack.constructs.model_registry",
    "ModelPackageGroupBase": "sagestack.constructs.model_registry",
    "ModelRegistration": "sagestack.constructs.model_registration",
    "Names": "sagestack.core.names",
    "PackageApprovalTrigger": "sagestack.constructs.approval_trigger",
    "PromoterPolicy": "sagestack.constructs.promotion",
    "OptimizationPipeline": "sagestack.constructs.llm_optimization",
    "PromotionReaderRole": "sagestack.constructs.promotion",
    "PREFIXES": "sagestack.constructs.artifact_bucket",
    "RetrainingSchedule": "sagestack.constructs.retraining_schedule",
    "Rollout": "sagestack.constructs.endpoint_rollout",
    "ServerlessConfig": "sagestack.constructs.endpoint_config",
    "ShadowVariant": "sagestack.constructs.endpoint_config",
    "TrainingImage": "sagestack.constructs.training_image",
    "TrainingJobProps": "sagestack.constructs.training_job_props",
    "TrainingPipeline": "sagestack.constructs.training_pipeline",
    "TransformPipeline": "sagestack.constructs.transform_pipeline",
    "TuningPipeline": "sagestack.constructs.tuning_pipeline",
    "VpcPlacement": "sagestack.constructs.endpoint_model",
    "acknowledge": "sagestack.constructs.nag",
    "grant_mlflow_logging": "sagestack.constructs.mlflow_server",
    "project_repository": "sagestack.constructs.repository",
    "repository_arn_of": "sagestack.constructs.training_image",
}


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


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
    "InstancePools",
    "JobPipeline",
    "JobPipelineBase",
    "LlmModel",
    "MlflowApp",
    "MlflowTrackingServer",
    "ModelMonitor",
    "ModelPackageGroup",
    "ModelPackageGroupBase",
    "ModelRegistration",
    "Names",
    "OptimizationPipeline",
    "PackageApprovalTrigger",
    "PromoterPolicy",
    "PromotionReaderRole",
    "RetrainingSchedule",
    "Rollout",
    "ServerlessConfig",
    "ShadowVariant",
    "TrainingImage",
    "TrainingJobProps",
    "TrainingPipeline",
    "TransformPipeline",
    "TuningPipeline",
    "VpcPlacement",
    "acknowledge",
    "grant_mlflow_logging",
    "project_repository",
    "repository_arn_of",
]
