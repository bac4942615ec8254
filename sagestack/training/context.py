"""What a job's request takes from outside its spec: the deployment's values (core.Deployment), and
this job's code location, image, rule evaluator image and tracking server.

The same context type carries CloudFormation tokens (the constructs), stand-ins (`plan`, `render`,
`lock`, synth validation) and local values (`sagestack local train`); `stand_in_context` builds the
latter two, so a request validated at synth and a request run locally are rendered alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sagestack.core.deployment import Deployment
from sagestack.core.names import Names


@dataclass(frozen=True)
class MlflowTarget:
    """Where a job logs its experiment: a SageMaker MLflow tracking server, and the prefix of the
    experiment names (Names.mlflow_experiment)."""

    arn: str
    experiment_prefix: str

    def experiment(self, job_key: str) -> str:
        return f"{self.experiment_prefix}-{job_key}"

    @staticmethod
    def stand_in(deployment: Deployment, names: Names, *, app: bool = False) -> MlflowTarget:
        """The tracking server (or, with `app`, the MLflow App) the foundation creates, as its ARN
        reads in the deployment's account. An App's ARN ends in an ID SageMaker assigns at creation:
        its name stands in for it."""
        kind, name = (
            ("mlflow-app", names.mlflow_app) if app else ("mlflow-tracking-server", names.tracking_server)
        )
        arn = f"arn:aws:sagemaker:{deployment.region}:{deployment.account}:{kind}/{name}"
        return MlflowTarget(arn, names.prefix)


def is_mlflow_app(arn: str) -> bool:
    """Whether an MLflow ARN names a serverless MLflow App (else a tracking server). It reads the
    ARN's resource type, which a deploy-time ARN built from tokens keeps as text."""
    return ":mlflow-app/" in arn


@dataclass(frozen=True)
class RequestContext:
    """One candidate's request context. Strings may be CloudFormation tokens."""

    deployment: Deployment
    source_s3_uri: str  # s3://…/sourcedir.tar.gz
    image_uri: str  # for this candidate
    rules_image_uri: str | None = None  # Debugger/Profiler rule evaluator for the region
    mlflow: MlflowTarget | None = None  # tracking.mlflow: the job logs to this server
    # The framework the image's container runs (an AWS DLC's: pytorch, tensorflow), None when unknown
    # (a team's own image): TensorFlow's container is given `model_dir` as the SDK's estimator does.
    framework: str | None = None
    # launcher: drivers — the job's launch files (S3Layout.launch_files): code/ and sm_drivers/ under it
    launch_files_s3_uri: str | None = None


def stand_in_context(
    deployment: Deployment,
    *,
    image_uri: str,
    rules_image: str | None = None,
    mlflow: MlflowTarget | None = None,
    framework: str | None = None,
) -> RequestContext:
    """A context whose code lies where the deployment's bucket keeps source archives: with
    `Deployment.stand_ins(...)` what validation renders with, with `Deployment.local(...)` what a
    local run renders with."""
    return RequestContext(
        deployment=deployment,
        source_s3_uri=deployment.s3.source_archive(),
        image_uri=image_uri,
        rules_image_uri=rules_image,
        mlflow=mlflow,
        framework=framework,
        launch_files_s3_uri=deployment.s3.launch_files(),
    )


def stand_in_contexts(
    deployment: Deployment,
    *,
    images: Mapping[str, str],
    rules_image: str | None = None,
    mlflow: MlflowTarget | None = None,
    framework: str | None = None,
) -> Callable[[str], RequestContext]:
    """The stand-in context of each instance candidate (`images`: instance type -> image URI)."""

    def context(instance_type: str) -> RequestContext:
        return stand_in_context(
            deployment,
            image_uri=images[instance_type],
            rules_image=rules_image,
            mlflow=mlflow,
            framework=framework,
        )

    return context
