#!/usr/bin/env python3
"""A CDK app built from sagestack's constructs alone — no YAML spec, no sagestack stacks.

One stack: the project key, the artifact bucket, the execution role, a Deep Learning Container, a
training pipeline that trains on one of two instance types, compiles the model for ml_c5 and
registers it, and the endpoint that serves a registered version. A consumer role may start the
pipeline and invoke the endpoint; an alarm watches the endpoint's latency.

    cd examples/cdk_app && cdk synth        (or: python app.py, which writes cdk.out)
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Duration, Environment, RemovalPolicy, Size, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from cdk_nag import AwsSolutionsChecks
from constructs import Construct

from sagestack.constructs import (
    ArtifactBucket,
    AutoScaling,
    DataCapture,
    ExecutionRole,
    InferenceEndpoint,
    ModelPackageGroup,
    ModelRegistration,
    Names,
    Rollout,
    TrainingImage,
    TrainingPipeline,
)

REGION = "us-east-1"
CANDIDATES = ["ml.g5.2xlarge", "ml.g4dn.2xlarge"]
# The repository's own training code (train.py, inference.py); point `code` at yours.
CODE = Path(__file__).resolve().parents[2] / "training_src"
# The version the endpoint serves: a package the pipeline registered, approved and pinned here.
MODEL_PACKAGE = f"arn:aws:sagemaker:{REGION}:111111111111:model-package/digits-example/1"


class DigitsStack(Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        names = Names("digits", "example")
        key = kms.Key(self, "Key", enable_key_rotation=True, removal_policy=RemovalPolicy.DESTROY)
        artifacts = ArtifactBucket(
            self, "Artifacts", encryption_key=key, removal_policy=RemovalPolicy.DESTROY
        )
        role = ExecutionRole(self, "ExecutionRole", artifacts=artifacts, encryption_key=key)
        image = TrainingImage.from_dlc("pytorch", "2.5", "py311", region=REGION, instance_types=CANDIDATES)
        image.grant_pull(role)
        registry = ModelPackageGroup(
            self, "Registry", group_name=names.model_package_group, removal_policy=RemovalPolicy.DESTROY
        )

        training = TrainingPipeline(
            self,
            "Classifier",
            names=names,
            job="classifier",
            image=image,
            code=str(CODE),
            instance_types=CANDIDATES,
            execution_role=role,
            artifacts=artifacts,
            encryption_key=key,
            hyperparameters={"epochs": 10, "lr": 0.001},
            max_runtime=Duration.hours(2),
            volume_size=Size.gibibytes(50),
            spot=True,
            max_wait=Duration.hours(4),
            metric_definitions={"val_accuracy": "val_accuracy=([0-9.]+)"},
            options={"checkpoint": {"every_steps": 200}, "tensorboard": True},
            registry=registry,
            registrations=[
                ModelRegistration(
                    "digits",
                    compile={
                        "target_device": "ml_c5",
                        "framework": "PYTORCH",
                        "framework_version": "2.0",
                        "input_shapes": {"input0": [1, 1, 8, 8]},
                    },
                    instance_type="ml.c5.xlarge",
                )
            ],
        )

        endpoint = InferenceEndpoint(
            self,
            "Endpoint",
            endpoint_name=names.endpoint("digits"),
            model_package=MODEL_PACKAGE,
            execution_role=role,
            encryption_key=key,
            instance_type="ml.c5.xlarge",
            autoscaling=AutoScaling(min_capacity=1, max_capacity=4),
            data_capture=DataCapture(artifacts=artifacts, sampling_percentage=20),
            rollout=Rollout(max_latency=Duration.millis(200)),
        )

        # Someone else's role may start the pipeline and call the endpoint — nothing more.
        consumer = iam.Role(self, "Consumer", assumed_by=iam.AccountRootPrincipal())
        training.grant_start_execution(consumer)
        endpoint.grant_invoke(consumer)
        cloudwatch.Alarm(
            self,
            "Slow",
            metric=endpoint.metric_model_latency(period=Duration.minutes(5)),
            threshold=500_000,  # microseconds
            evaluation_periods=3,
        )


app = App()
DigitsStack(app, "DigitsExample", env=Environment(region=REGION))
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
