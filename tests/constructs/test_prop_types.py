"""Props are checked against their types at the call, as jsii checks aws-cdk-lib's: each public
construct, factory and options class, given a prop of the wrong type, raises one TypeError that names
the prop, what it expects and what was given (every wrong prop at once), before the construct does
anything with it. The right types still synthesize: test_library.py builds the same constructs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import REPO

REGION = "us-east-1"
IMAGE_URI = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/digits:1"
ROLE_ARN = "arn:aws:iam::123456789012:role/digits"


@pytest.fixture(scope="module")
def ctx() -> dict[str, Any]:
    """One stack with a valid value for every required prop (the check runs before the construct's
    body, so a value of the right type is all a case needs; a TrainingPipeline for TuningPipeline)."""
    from aws_cdk import App, Duration, Environment, Stack
    from aws_cdk import aws_kms as kms

    from sagestack.app.builder import cdk_json_context
    from sagestack.constructs import (
        ArtifactBucket,
        ExecutionRole,
        InferenceEndpoint,
        JobPipeline,
        ModelPackageGroup,
        Names,
        TrainingImage,
        TrainingPipeline,
    )

    app = App(context=cdk_json_context(REPO))
    stack = Stack(app, "Typed", env=Environment(region=REGION))
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    role = ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)
    names = Names("digits", "dev")
    base = {"names": names, "execution_role": role, "artifacts": artifacts, "encryption_key": key}
    image = TrainingImage.from_registry(IMAGE_URI)
    training = TrainingPipeline(
        stack,
        "Classifier",
        image=image,
        code=str(REPO / "training_src"),
        instance_types=["ml.m5.xlarge"],
        max_runtime=Duration.hours(1),
        **base,
    )
    return {
        "stack": stack,
        "key": key,
        "artifacts": artifacts,
        "role": role,
        "names": names,
        "base": base,
        "image": image,
        "training": training,
        "endpoint": InferenceEndpoint.from_endpoint_name(stack, "Imported", "digits-dev-digits"),
        "pipeline": JobPipeline.from_state_machine_arn(
            stack, "Machine", f"arn:aws:states:{REGION}:123456789012:stateMachine:digits"
        ),
        "registry": ModelPackageGroup.from_model_package_group_name(stack, "Group", "digits-dev"),
    }


def _construct(name: str, /, **valid: Any) -> Callable[[dict[str, Any], dict[str, Any]], Any]:
    """A call of construct `name` in the stack with `valid` (values or ctx keys) and the case's props."""

    def call(ctx: dict[str, Any], props: dict[str, Any]) -> Any:
        import sagestack.constructs as lib

        given = {k: ctx[v] if isinstance(v, str) and v in ctx else v for k, v in valid.items()}
        if given.pop("base", None):
            given = {**ctx["base"], **given}
        return getattr(lib, name)(
            ctx["stack"], f"{name}{len(ctx['stack'].node.children)}", **{**given, **props}
        )

    return call


def _plain(path: str, /, **valid: Any) -> Callable[[dict[str, Any], dict[str, Any]], Any]:
    """A call of an options class or static factory ('Class' or 'Class.factory')."""

    def call(ctx: dict[str, Any], props: dict[str, Any]) -> Any:
        import sagestack.constructs as lib

        owner, _, factory = path.partition(".")
        target = getattr(lib, owner)
        given = {k: ctx[v] if isinstance(v, str) and v in ctx else v for k, v in valid.items()}
        if factory:
            target = getattr(target, factory)
            if "scope" in given:
                given["scope"] = ctx["stack"]
        return target(**{**given, **props})

    return call


TRAINING = _construct("TrainingPipeline", base=True, image="image", code=str(REPO / "training_src"))
ENDPOINT = _construct("InferenceEndpoint", endpoint_name="digits-dev-x", execution_role="role")
# (what is called, the wrong props, the message after "Owner 'id': " / "Owner: ")
CASES: list[tuple[str, Callable[..., Any], dict[str, Any], str]] = [
    (
        "TrainingPipeline",
        TRAINING,
        {"max_runtime": 7200, "instance_types": "ml.m5.xlarge"},
        "max_runtime: expected Duration (e.g. Duration.hours(2)), got int 7200; instance_types: expected "
        "a list of instance types, got the string 'ml.m5.xlarge' (did you mean ['ml.m5.xlarge']?)",
    ),
    (
        "TrainingPipeline",
        TRAINING,
        {"instance_types": ["ml.m5.xlarge"], "volume_size": 30, "spot": "yes", "hyperparameters": "epochs=3"},
        "volume_size: expected Size (e.g. Size.gibibytes(30)), got int 30; spot: expected bool, got the "
        "string 'yes'; hyperparameters: expected a mapping of str to any value, got the string 'epochs=3'",
    ),
    (
        "TrainingPipeline",
        _construct("TrainingPipeline", base=True, code="training_src", instance_types=["ml.m5.xlarge"]),
        {"image": IMAGE_URI, "encryption_key": "alias/digits"},
        f"image: expected TrainingImage, got the string '{IMAGE_URI}'; "
        "encryption_key: expected kms.IKey, got the string 'alias/digits'",
    ),
    (
        "TuningPipeline",
        _construct("TuningPipeline", training="training"),
        {"max_jobs": "20", "ranges": {"lr": [0.001, 0.1]}},
        "ranges: expected a mapping of str to a mapping of str to any value, got dict "
        "{'lr': [0.001, 0.1]}; max_jobs: expected int, got the string '20'",
    ),
    (
        "TuningPipeline",
        _construct("TuningPipeline"),
        {"training": "Classifier"},
        "training: expected TrainingPipeline, got the string 'Classifier'",
    ),
    (
        "InferenceEndpoint",
        ENDPOINT,
        {"execution_role": ROLE_ARN, "initial_instance_count": "2"},
        f"execution_role: expected iam.IRole or iam.IGrantable, got the string '{ROLE_ARN}'; "
        "initial_instance_count: expected int, got the string '2'",
    ),
    (
        "InferenceEndpoint",
        ENDPOINT,
        {"autoscaling": {"max_capacity": 4}, "provision_timeout": 600},
        "provision_timeout: expected Duration (e.g. Duration.hours(2)), got int 600; "
        "autoscaling: expected AutoScaling, got dict {'max_capacity': 4}",
    ),
    (
        "TransformPipeline",
        _construct("TransformPipeline", base=True, model_package="arn:package"),
        {"instance_types": "ml.m5.xlarge", "instance_count": 2.5},
        "instance_types: expected a list of instance types, got the string 'ml.m5.xlarge' (did you mean "
        "['ml.m5.xlarge']?); instance_count: expected int, got float 2.5",
    ),
    (
        "ModelMonitor",
        _construct("ModelMonitor", base=True, endpoint="endpoint", endpoint_key="digits"),
        {"drift_threshold": "0.1", "max_runtime": 3600, "alarm_features": "age"},
        "max_runtime: expected Duration (e.g. Duration.hours(2)), got int 3600; alarm_features: "
        "expected a list of str, got the string 'age' (did you mean ['age']?); drift_threshold: "
        "expected float, got the string '0.1'",
    ),
    (
        "ModelMonitor",
        _construct("ModelMonitor", base=True, endpoint_key="digits"),
        {"endpoint": "digits-dev-digits"},
        "endpoint: expected InferenceEndpointBase, got the string 'digits-dev-digits'",
    ),
    (
        "ArtifactBucket",
        _construct("ArtifactBucket"),
        {"encryption_key": "alias/digits", "removal_policy": "retain", "noncurrent_checkpoint_versions": 30},
        "encryption_key: expected kms.IKey, got the string 'alias/digits'; removal_policy: expected "
        "RemovalPolicy, got the string 'retain'; noncurrent_checkpoint_versions: expected Duration "
        "(e.g. Duration.hours(2)), got int 30",
    ),
    (
        "ArtifactBucket.from_bucket_attributes",
        _plain("ArtifactBucket.from_bucket_attributes", scope="stack", id="Imported2"),
        {"bucket_name": 123},
        "bucket_name: expected str, got int 123",
    ),
    (
        "ExecutionRole",
        _construct("ExecutionRole", encryption_key="key"),
        {"artifacts": "digits-bucket", "vpc_access": 1},
        "artifacts: expected ArtifactBucketBase, got the string 'digits-bucket'; "
        "vpc_access: expected bool, got int 1",
    ),
    (
        "ExecutionRole.from_role_arn",
        _plain("ExecutionRole.from_role_arn", scope="stack", id="Imported3"),
        {"role_arn": None},
        "role_arn: expected str, got None",
    ),
    (
        "ModelPackageGroup",
        _construct("ModelPackageGroup", group_name="digits-typed"),
        {"removal_policy": "retain"},
        "removal_policy: expected RemovalPolicy, got the string 'retain'",
    ),
    (
        "PromotionReaderRole",
        _construct(
            "PromotionReaderRole",
            role_name="digits-dev-promotion-reader",
            model_registry="registry",
            artifacts="artifacts",
            encryption_key="key",
        ),
        {"reader_accounts": "111122223333"},
        "reader_accounts: expected a list of str, got the string '111122223333' "
        "(did you mean ['111122223333']?)",
    ),
    (
        "PromoterPolicy",
        _construct("PromoterPolicy", policy_name="digits-prod-promoter", model_registry="registry"),
        {"source_reader_role_arn": None, "artifacts": "digits-bucket", "encryption_key": "alias/x"},
        "source_reader_role_arn: expected str, got None; artifacts: expected ArtifactBucketBase, got "
        "the string 'digits-bucket'; encryption_key: expected kms.IKey, got the string 'alias/x'",
    ),
    (
        "RetrainingSchedule",
        _construct("RetrainingSchedule", pipeline="pipeline", expression="rate(7 days)"),
        {"flexible_window": 15, "enabled": "false"},
        "flexible_window: expected Duration (e.g. Duration.hours(2)), got int 15; "
        "enabled: expected bool, got the string 'false'",
    ),
    (
        "RetrainingSchedule",
        _construct("RetrainingSchedule", expression="rate(7 days)", pipeline="training"),
        {"timezone": "Europe/Paris"},
        "",  # a TrainingPipeline is a JobPipelineBase: accepted (see the test)
    ),
    (
        "PackageApprovalTrigger",
        _construct("PackageApprovalTrigger", pipeline="pipeline", model_package_group_name="digits-dev"),
        {"retry_attempts": "3", "dead_letter_queue": "arn:aws:sqs:us-east-1:123456789012:dlq"},
        "retry_attempts: expected int, got the string '3'; "
        "dead_letter_queue: expected sqs.IQueue, got the string 'arn:aws:sqs:us-east-1:123456789012:dlq'",
    ),
    (
        "MlflowTrackingServer",
        _construct("MlflowTrackingServer", name="digits", artifacts="artifacts", encryption_key="key"),
        {"automatic_model_registration": "true"},
        "automatic_model_registration: expected bool, got the string 'true'",
    ),
    (
        "HyperPodCluster",
        _construct(
            "HyperPodCluster",
            names="names",
            key="research",
            lifecycle_dir="cluster_src",
            artifacts="artifacts",
            encryption_key="key",
        ),
        {"instance_groups": {"workers": {"instance_type": "ml.g5.8xlarge"}}},
        "instance_groups: expected a mapping of str to ClusterInstanceGroup, got dict "
        "{'workers': {'instance_type': 'ml.g5.8xlarge'}}",
    ),
    (
        "OptimizationPipeline",
        _construct(
            "OptimizationPipeline",
            base=True,
            endpoint="chat",
            registry="registry",
            instance_types=["ml.g5.12xlarge"],
        ),
        {"llm": {"container": "djl-lmi"}, "accelerators": "4"},
        "llm: expected LlmSpec, got dict {'container': 'djl-lmi'}; "
        "accelerators: expected int, got the string '4'",
    ),
    (
        "TrainingImage.from_dlc",
        _plain(
            "TrainingImage.from_dlc", framework="pytorch", version="2.5", py_version="py311", region=REGION
        ),
        {"instance_types": "ml.g5.xlarge"},
        "instance_types: expected a list of instance types, got the string 'ml.g5.xlarge' "
        "(did you mean ['ml.g5.xlarge']?)",
    ),
    (
        "TrainingImage.from_ecr",
        _plain("TrainingImage.from_ecr"),
        {"repository": "digits"},
        "repository: expected ecr.IRepository, got the string 'digits'",
    ),
    (
        "TrainingImage.from_uris",
        _plain("TrainingImage.from_uris"),
        {"uris": [IMAGE_URI]},
        f"uris: expected a mapping of str to str, got list ['{IMAGE_URI}']",
    ),
    (
        "ImageDigests.pin",
        _plain("ImageDigests.pin", scope="stack"),
        {"digests": [IMAGE_URI]},
        f"digests: expected a mapping of str to str, got list ['{IMAGE_URI}']",
    ),
    (
        "ServerlessConfig",
        _plain("ServerlessConfig"),
        {"memory_size": 2048, "max_concurrency": "5"},
        "memory_size: expected Size (e.g. Size.gibibytes(30)), got int 2048; "
        "max_concurrency: expected int, got the string '5'",
    ),
    (
        "AutoScaling",
        _plain("AutoScaling"),
        {"scale_in_cooldown": 300},
        "scale_in_cooldown: expected Duration (e.g. Duration.hours(2)), got int 300",
    ),
    (
        "Rollout",
        _plain("Rollout"),
        {"traffic": 10, "wait": "5m"},
        "traffic: expected str, got int 10; wait: expected Duration (e.g. Duration.hours(2)), "
        "got the string '5m'",
    ),
    (
        "DataCapture",
        _plain("DataCapture"),
        {"artifacts": "digits-bucket"},
        "artifacts: expected ArtifactBucketBase, got the string 'digits-bucket'",
    ),
    (
        "InstancePools",
        _plain("InstancePools"),
        {"instance_types": "ml.g5.xlarge"},
        "instance_types: expected a list of instance types, got the string 'ml.g5.xlarge' "
        "(did you mean ['ml.g5.xlarge']?)",
    ),
    (
        "ShadowVariant",
        _plain("ShadowVariant", model_package="arn:package"),
        {"instance_type": ["ml.c5.xlarge"]},
        "instance_type: expected str, got list ['ml.c5.xlarge']",
    ),
    (
        "InferenceComponent",
        _plain("InferenceComponent", name="digits"),
        {"memory": 1024, "copies": "2"},
        "memory: expected Size (e.g. Size.gibibytes(30)), got int 1024; copies: expected int, "
        "got the string '2'",
    ),
    (
        "AsyncInference",
        _plain("AsyncInference", artifacts="artifacts"),
        {"notify": "no"},
        "notify: expected bool, got the string 'no'",
    ),
    (
        "VpcPlacement",
        _plain("VpcPlacement", security_group_ids=("sg-1",)),
        {"subnet_ids": "subnet-1"},
        "subnet_ids: expected a list of str, got the string 'subnet-1' (did you mean ['subnet-1']?)",
    ),
    (
        "Batching",
        _plain("Batching"),
        {"max_batch_size": "8", "max_delay": 5},
        "max_batch_size: expected int, got the string '8'; max_delay: expected Duration "
        "(e.g. Duration.hours(2)), got int 5",
    ),
    (
        "LlmModel",
        _plain("LlmModel"),
        {"weights_key": "alias/weights", "startup_timeout": 900},
        "startup_timeout: expected Duration (e.g. Duration.hours(2)), got int 900; "
        "weights_key: expected kms.IKey, got the string 'alias/weights'",
    ),
    (
        "ClusterInstanceGroup",
        _plain("ClusterInstanceGroup", instance_type="ml.g5.8xlarge"),
        {"volume_size": 500, "partitions": "gpu"},
        "volume_size: expected Size (e.g. Size.gibibytes(30)), got int 500; partitions: "
        "expected a list of str, got the string 'gpu' (did you mean ['gpu']?)",
    ),
    (
        "ClusterFileSystem",
        _plain("ClusterFileSystem"),
        {"storage": 1200},
        "storage: expected Size (e.g. Size.gibibytes(30)), got int 1200",
    ),
    (
        "ModelRegistration",
        _plain("ModelRegistration", endpoint="digits"),
        {"compile": "ml_c5", "serverless": "yes"},
        "compile: expected a mapping of str to any value, got the string 'ml_c5'; "
        "serverless: expected bool, got the string 'yes'",
    ),
]


@pytest.mark.parametrize(
    ("owner", "call", "props", "message"), CASES, ids=[f"{c[0]}-{'-'.join(c[2])}" for c in CASES]
)
def test_a_prop_of_the_wrong_type_is_named_at_the_call(ctx, owner, call, props, message):
    if not message:
        call(ctx, props)  # the right type (a subclass, an implementation) is accepted
        return
    with pytest.raises(TypeError) as raised:
        call(ctx, props)
    text = str(raised.value)
    prefix, _, problems = text.partition(": ")
    assert prefix.split(" ")[0] == owner
    assert problems == message


def test_a_cdk_token_passes_where_its_type_does(ctx):
    """A string token is a str and a number token stands for an int, as in aws-cdk-lib."""
    from aws_cdk import Size, Token

    from sagestack.constructs import Rollout, ServerlessConfig
    from sagestack.constructs.prop_types import problem

    assert problem("step_percent", Token.as_number({"Ref": "Step"}), int) is None
    assert problem("traffic", Token.as_string({"Ref": "Traffic"}), str) is None
    Rollout(traffic=Token.as_string({"Ref": "Traffic"}), step_percent=Token.as_number({"Ref": "Step"}))
    assert problem("max_concurrency", 2.5, int) == "max_concurrency: expected int, got float 2.5"
    ServerlessConfig(memory_size=Size.gibibytes(2))


def test_an_imported_cdk_interface_passes_by_its_members(ctx):
    """kms.Key.from_key_arn returns jsii's proxy of IKey, not a kms.Key: it is still an IKey."""
    from aws_cdk import aws_kms as kms

    from sagestack.constructs import ArtifactBucket

    imported = kms.Key.from_key_arn(
        ctx["stack"],
        "ImportedKey",
        f"arn:aws:kms:{REGION}:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    )
    assert ArtifactBucket(ctx["stack"], "WithImportedKey", encryption_key=imported).bucket is not None


def test_a_missing_or_misspelt_prop_is_named_with_the_others(ctx):
    """What Python refuses one at a time (a required prop not given, an unknown keyword) is named
    in the same TypeError as the wrong types, with the prop's type or the nearest name."""
    from sagestack.constructs import ArtifactBucket, ExecutionRole, ServerlessConfig

    with pytest.raises(TypeError) as raised:
        ArtifactBucket(ctx["stack"], "NoKey")
    assert str(raised.value) == "ArtifactBucket 'NoKey': encryption_key: required, expected kms.IKey"
    with pytest.raises(TypeError) as raised:
        ExecutionRole(ctx["stack"], "Misspelt", artifact=ctx["artifacts"], encryption_key="alias/digits")
    assert str(raised.value) == (
        "ExecutionRole 'Misspelt': unknown prop 'artifact' (did you mean 'artifacts'?); artifacts: "
        "required, expected ArtifactBucketBase; encryption_key: expected kms.IKey, got the string "
        "'alias/digits'"
    )
    with pytest.raises(TypeError) as raised:
        ServerlessConfig()  # type: ignore[call-arg]
    assert (
        str(raised.value)
        == "ServerlessConfig: memory_size: required, expected Size (e.g. Size.gibibytes(30))"
    )
