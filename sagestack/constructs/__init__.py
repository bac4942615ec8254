"""sagestack's CDK constructs (L2-style). Lives under sagestack/ because a top-level package
named `constructs` would shadow the library aws-cdk-lib imports (aws/aws-cdk#19301)."""

from sagestack.constructs.checkpoint_bucket import PREFIXES, CheckpointBucket
from sagestack.constructs.execution_role import ExecutionRole
from sagestack.constructs.model_registry import ModelPackageGroup
from sagestack.constructs.nag import acknowledge
from sagestack.constructs.repository import project_repository
from sagestack.constructs.training_image import TrainingImage, repository_arn_of

__all__ = [
    "PREFIXES",
    "CheckpointBucket",
    "ExecutionRole",
    "ModelPackageGroup",
    "TrainingImage",
    "acknowledge",
    "project_repository",
    "repository_arn_of",
]
