"""The apps the IAM tier judges, synthesized once per session (jsii start-up and synth are the slow
part): the example, the broad project, a project with a HyperPod cluster, the example with delivery,
one with every serving kind — each in an environment without an account and in one with one —, and
a promotion across accounts where the source names one too."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

from tests.conftest import MINIMAL, REPO, Project
from tests.constructs.test_clusters import SPEC as CLUSTER_SPEC
from tests.constructs.test_clusters_eks import EKS_SPEC
from tests.constructs.test_delivery import DELIVERY

BROAD = REPO / "tests" / "constructs" / "baseline" / "broad"
PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
OTHER = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/4"
# Every serving kind beside the example's real-time, compiled, autoscaled endpoint and the broad
# project's serverless and Inferentia ones: async, inference components, VPC with Model Monitor, a
# pinned batch transform. Its job logs to a serverless MLflow App (the example's to a tracking server)
# and waits in a training queue.
SERVING = (
    MINIMAL
    + "    queue: {name: shared, share: research, priority: 5}\n"
    + "queues:\n  shared: {max_instances: 4, shares: {research: 1, production: 0.5}}\n"
    + "tracking:\n  mlflow: {app: true, automatic_model_registration: true}\n"
    + "endpoints:\n"
    + f'  queued:\n    model_package: "{PIN}"\n    instance_type: ml.g5.xlarge\n'
    + "    async: {max_concurrent_invocations_per_instance: 4, include_response_in_notification: true}\n"
    + "    autoscaling: {min: 0, max: 3, backlog_per_instance: 2}\n"
    + "  shared:\n    instance_type: ml.g5.12xlarge\n    autoscaling: {min: 1, max: 4}\n"
    + "    components:\n"
    + f'      small: {{model_package: "{PIN}", memory_mb: 4096, cpu_cores: 2, accelerators: 1}}\n'
    + f'      large: {{model_package: "{OTHER}", memory_mb: 16384, accelerators: 2}}\n'
    + f'  watched:\n    model_package: "{PIN}"\n    instance_type: ml.m5.large\n    data_capture: {{}}\n'
    + "    vpc: {subnets: [subnet-0a1b2c3d4e5f60718], security_groups: [sg-0a1b2c3d4e5f60718]}\n"
    + "    monitor: {dataset_format: csv, csv_header: false, alarm_features: [_c36], drift_threshold: 0.2}\n"
    + "transforms:\n  score:\n"
    + f'    model_package: "{PIN}"\n    instance_type: [ml.m5.xlarge]\n    split_type: Line\n'
)

# Promotion across accounts where the source names an account too (the example's dev names none):
# dev (333333333333) -> staging (222222222222). Staging scores with its own copy of a transform's
# package (a pipeline's model too: the image it registers with), and serves an LLM whose weights lie
# in another bucket under that bucket's key (of an account no environment names).
LLM_KEY = "arn:aws:kms:us-east-1:444444444444:key/1234abcd-12ab-34cd-56ef-1234567890ab"
PROMOTION = (
    MINIMAL
    + "promotion: [dev, staging]\n"
    + "transforms:\n  score:\n    model: {from: classifier}\n    instance_type: [ml.m5.xlarge]\n"
    + "endpoints:\n  chat:\n    deploy: false\n    instance_type: ml.g5.2xlarge\n    llm:\n"
    + "      container: djl-lmi\n      parameters: 1.0e9\n      dtype: fp16\n"
    + f"      weights: {{s3: s3://shared-weights/llama/, kms_key: {LLM_KEY}}}\n"
)
PROMOTION_STAGING = (
    'account: "222222222222"\nendpoints:\n  chat: {deploy: true}\ntransforms:\n  score:\n'
    '    model_package: "arn:aws:sagemaker:us-east-1:222222222222:model-package/digits-staging/2"\n'
)


@dataclass
class Synthesized:
    name: str
    root: Path
    outdir: Path


def _copy_example(root: Path, extra: str = "") -> Path:
    Project(root)
    shutil.rmtree(root / "config")
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "containers", root / "containers")
    spec = root / "config" / "sagestack.yaml"
    spec.write_text(spec.read_text() + extra)
    return root


def _projects(base: Path) -> dict[str, Path]:
    cluster = Project(base / "cluster")
    cluster.spec(CLUSTER_SPEC).env("dev", "retain_data: false\n").env("prod", 'account: "444444444444"\n')
    script = cluster.root / "cluster_src" / "on_create.sh"
    script.parent.mkdir(parents=True)
    script.write_text(resources.files("sagestack.templates").joinpath("on_create.sh").read_text())
    script.chmod(0o755)
    eks = Project(base / "eks")
    eks.spec(EKS_SPEC).env("dev", "retain_data: false\n").env("prod", 'account: "555555555555"\n')
    script = eks.root / "cluster_src" / "on_create.sh"
    script.parent.mkdir(parents=True)
    script.write_text(resources.files("sagestack.templates").joinpath("on_create.sh").read_text())
    script.chmod(0o755)
    serving = Project(base / "serving")
    serving.spec(SERVING).env("dev", "retain_data: false\n").env("prod", 'account: "111111111111"\n')
    promotion = Project(base / "promotion")
    promotion.spec(PROMOTION).env("dev", 'account: "333333333333"\nretain_data: false\n')
    promotion.env("staging", PROMOTION_STAGING)
    return {
        "example": REPO,
        "broad": BROAD,
        "cluster": cluster.root,
        "eks": eks.root,
        "delivery": _copy_example(base / "delivery", DELIVERY),
        "serving": serving.root,
        "promotion": promotion.root,
    }


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> list[Synthesized]:
    from tests.support.cdk_app import BuiltApp

    base = tmp_path_factory.mktemp("iam")
    built = []
    for name, root in _projects(base).items():
        out = base / f"{name}.out"
        BuiltApp(root, out)  # every environment; fails on an unacknowledged cdk-nag finding
        built.append(Synthesized(name, root, out))
    return built
