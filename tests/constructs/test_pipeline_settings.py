"""Every pipeline construct forwards the same deployment settings (PipelineDeployment) through one
place. Each subclass of JobPipeline, found by walking the class tree (a new one is covered without
being listed), takes every setting as a prop of that name, or names it in `settings_unused` with the
reason; and each one it uses reaches the template: the role, the log group (or the one it makes,
encrypted with the key), the topic, the state machine's name, the poll and back-off waits, the quota
codes. One it accepts and does not use changes nothing."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.synth

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311-ubuntu22.04-sagemaker"
PACKAGE = "arn:aws:sagemaker:us-east-1:111122223333:model-package/digits-dev/1"
GIVEN_ROLE = "arn:aws:iam::111122223333:role/given-pipeline-role"


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def pipeline_classes() -> list[type]:
    """Every subclass of JobPipeline in sagestack.constructs (each module imported first)."""
    import sagestack.constructs as package
    from sagestack.constructs.job_pipeline import JobPipeline

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return sorted(set(_subclasses(JobPipeline)), key=lambda c: c.__name__)


def _stack():  # type: ignore[no-untyped-def]
    from aws_cdk import App, Environment, Stack
    from aws_cdk import aws_kms as kms

    from sagestack.app.builder import cdk_json_context
    from sagestack.constructs import ArtifactBucket, ExecutionRole, Names

    app = App(context=cdk_json_context(REPO))
    stack = Stack(app, "Settings", env=Environment(region="us-east-1"))  # an LLM's image is per region
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    artifacts = ArtifactBucket(stack, "Artifacts", encryption_key=key)
    role = ExecutionRole(stack, "Role", artifacts=artifacts, encryption_key=key)
    base = {"names": Names("digits", "dev"), "execution_role": role, "artifacts": artifacts}
    return stack, key, base


def _training(stack, key, base, **settings):  # type: ignore[no-untyped-def]
    from aws_cdk import Duration

    from sagestack.constructs import TrainingImage, TrainingPipeline

    return TrainingPipeline(
        stack,
        "Classifier",
        image=TrainingImage.from_registry(IMAGE),
        code=str(REPO / "training_src"),
        instance_types=["ml.m5.xlarge"],
        max_runtime=Duration.hours(1),
        metric_definitions={"val_accuracy": "val_accuracy=([0-9.]+)"},
        **base,
        **settings,
    )


def _tuning(stack, key, base, **settings):  # type: ignore[no-untyped-def]
    from sagestack.constructs import TuningPipeline

    return TuningPipeline(
        stack,
        "Search",
        training=_training(stack, key, base, encryption_key=key),
        objective_metric="val_accuracy",
        objective_type="Maximize",
        ranges={"lr": {"continuous": [1e-4, 1e-1]}},
        max_jobs=4,
        **settings,
    )


def _transform(stack, key, base, **settings):  # type: ignore[no-untyped-def]
    from sagestack.constructs import TransformPipeline

    return TransformPipeline(
        stack, "Score", model_package=PACKAGE, instance_types=["ml.m5.xlarge"], **base, **settings
    )


def _optimization(stack, key, base, **settings):  # type: ignore[no-untyped-def]
    from sagestack.constructs import ModelPackageGroup, OptimizationPipeline
    from sagestack.llm.models import LlmSpec

    llm = LlmSpec.model_validate(
        {
            "container": "djl-lmi",
            "weights": {"s3": "models/chat/"},
            "parameters": 1.0e9,
            "optimize": {"quantization": "awq"},
        }
    )
    registry = ModelPackageGroup(stack, "Registry", group_name=base["names"].model_package_group)
    return OptimizationPipeline(
        stack,
        "Optimize",
        endpoint="chat",
        llm=llm,
        instance_types=["ml.g5.2xlarge"],
        registry=registry,
        **base,
        **settings,
    )


def _recommendation(stack, key, base, **settings):  # type: ignore[no-untyped-def]
    from sagestack.constructs import ModelPackageGroup
    from sagestack.constructs.recommendation import RecommendationPipeline
    from sagestack.endpoints.models import EndpointSpec
    from sagestack.endpoints.recommend import resolve_recommendations

    endpoint = EndpointSpec.model_validate(
        {
            "model_package": PACKAGE,
            "instance_type": "ml.c5.xlarge",
            "slo": {"p95_ms": 20, "candidates": ["ml.c5.large", "ml.c5.xlarge"]},
        }
    )
    (recommendation,) = resolve_recommendations(base["names"], {"digits": endpoint})
    registry = ModelPackageGroup(stack, "Registry", group_name=base["names"].model_package_group)
    return RecommendationPipeline(
        stack,
        "Recommend",
        recommendation=recommendation,
        execution_role=base["execution_role"],
        artifacts=base["artifacts"],
        registry=registry,
        **{"encryption_key": key, **settings},
    )


# How to build each pipeline construct with the given settings, `key` only for what else needs one
# (a TuningPipeline's training). The walk finds the classes; a new
# one fails test_every_pipeline_construct_has_a_builder until it is given one here).
BUILDERS: dict[str, Callable[..., Any]] = {
    "TrainingPipeline": _training,
    "TuningPipeline": _tuning,
    "TransformPipeline": _transform,
    "OptimizationPipeline": _optimization,
    "RecommendationPipeline": _recommendation,
}


def _fields() -> list[str]:
    from sagestack.constructs.job_pipeline import PipelineDeployment

    return [f.name for f in dataclasses.fields(PipelineDeployment)]


def test_every_pipeline_construct_has_a_builder():
    assert sorted(c.__name__ for c in pipeline_classes()) == sorted(BUILDERS)


@pytest.mark.parametrize("cls", pipeline_classes(), ids=lambda c: c.__name__)
def test_each_pipeline_construct_takes_every_deployment_setting(cls):
    """Each setting is a prop of the construct, or one it declares unused (with why)."""
    props = inspect.signature(cls.__init__).parameters
    unused = dict(cls.settings_unused)
    assert set(unused) <= set(_fields())
    assert all(reason for reason in unused.values())
    missing = [f for f in _fields() if f not in props and f not in unused]
    assert not missing, f"{cls.__name__} takes no {missing}: take them, or say why in settings_unused"


def _resources(stack, pipeline):  # type: ignore[no-untyped-def]
    from aws_cdk.assertions import Template

    resources = Template.from_stack(stack).to_json()["Resources"]
    machine = resources[stack.get_logical_id(pipeline.state_machine.node.default_child)]
    return resources, machine["Properties"]


def _waits(definition: dict) -> set[int]:
    return {s["Seconds"] for s in definition["States"].values() if s["Type"] == "Wait"}


@pytest.mark.parametrize("cls", pipeline_classes(), ids=lambda c: c.__name__)
def test_each_pipeline_construct_forwards_every_setting_it_takes(cls):
    from aws_cdk import Duration
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_logs as logs
    from aws_cdk import aws_sns as sns

    props = inspect.signature(cls.__init__).parameters
    used = [f for f in _fields() if f not in cls.settings_unused]
    # Nothing given but the key: the pipeline makes its log group, encrypted with the key.
    stack, key, base = _stack()
    bare = BUILDERS[cls.__name__](
        stack, key, base, **({"encryption_key": key} if "encryption_key" in used else {})
    )
    resources, _ = _resources(stack, bare)
    group = bare.node.find_child("Logs")
    encryption = resources[stack.get_logical_id(group.node.default_child)]["Properties"].get("KmsKeyId")
    key_arn = {"Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]}
    assert (encryption == key_arn) == ("encryption_key" in used)
    assert 60 in _waits(bare.definition)
    quotas = re.findall(r"Find quota '([^']+)' by name", json.dumps(bare.definition))
    assert quotas, "every pipeline checks a quota"

    # Every setting given: each one it uses reaches the template; one it accepts unused changes nothing.
    stack, key, base = _stack()
    given = {
        "role": iam.Role.from_role_arn(stack, "GivenRole", GIVEN_ROLE, mutable=False),
        "log_group": logs.LogGroup(stack, "GivenLogs"),
        "topic": sns.Topic(stack, "GivenTopic"),
        "encryption_key": key,
        "state_machine_name": "given-state-machine",
        "poll_interval": Duration.seconds(7),
        "backoff": Duration.seconds(11),
        "quota_codes": {name: "L-GIVEN001" for name in quotas},
    }
    assert sorted(given) == sorted(_fields())
    pipeline = BUILDERS[cls.__name__](stack, key, base, **{k: v for k, v in given.items() if k in props})
    for setting, shown in _effects(stack, pipeline, given).items():
        assert shown == (setting in used), f"{cls.__name__}: {setting} " + (
            "does not reach the template" if shown is False else "is unused, yet shows"
        )


def _effects(stack, pipeline, given) -> dict[str, bool]:  # type: ignore[no-untyped-def]
    """Whether each given setting shows in the template (the key: in the bare pipeline's log group)."""
    _, machine = _resources(stack, pipeline)
    text = json.dumps(pipeline.definition)
    waits = _waits(pipeline.definition)
    (destination,) = machine["LoggingConfiguration"]["Destinations"]
    logs_at = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    return {
        "role": machine["RoleArn"] == GIVEN_ROLE,
        "log_group": logs_at == stack.get_logical_id(given["log_group"].node.default_child)
        and pipeline.node.try_find_child("Logs") is None,
        "topic": given["topic"].topic_arn in text,
        "state_machine_name": machine.get("StateMachineName") == "given-state-machine",
        "poll_interval": 7 in waits and 60 not in waits,
        "backoff": 11 in waits,
        "quota_codes": "servicequotas:getServiceQuota" in text and "L-GIVEN001" in text,
    }


def test_a_tuning_pipeline_encrypts_the_log_group_it_makes_with_its_training_s_key():
    """TuningPipeline took no key and made its log group with CloudWatch's own encryption."""
    stack, key, base = _stack()
    tuning = _tuning(stack, key, base)
    resources, _ = _resources(stack, tuning)
    group = resources[stack.get_logical_id(tuning.node.find_child("Logs").node.default_child)]
    assert group["Properties"]["KmsKeyId"] == {
        "Fn::GetAtt": [stack.get_logical_id(key.node.default_child), "Arn"]
    }
