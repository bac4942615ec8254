"""TensorFlow jobs render as the SageMaker SDK's TensorFlow estimator renders them: the
distribution's `sagemaker_*_enabled` key, and `model_dir` (the job's prefix of the output path,
`/opt/ml/model` under MPI, the spec's own value, or none), each request valid against botocore."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sagestack.core.catalog import validate_request
from sagestack.core.names import Names
from sagestack.training.context import RequestContext
from sagestack.training.models import JobSpec
from sagestack.training.rendered import resolve_training_job
from tests.unit.test_training_requests import DEPLOYMENT

TF_CPU = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.21-cpu-py312"
TF_GPU = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.21-gpu-py312"
PT_GPU = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"
OWN = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:7"


def render(job: dict[str, Any], image: str, framework: str | None) -> dict[str, Any]:
    spec = JobSpec.model_validate({"image": "train", **job})

    def ctx(_: str) -> RequestContext:
        return RequestContext(DEPLOYMENT, "s3://cdk-assets/abc.tar.gz", image, framework=framework)

    plan = resolve_training_job(
        names=Names("digits", "dev"),
        key="keras",
        job=spec,
        source_sha256="0" * 64,
        image_uris={t: image for t in spec.instance_type},
        context=ctx,
    )
    request = plan.candidates[0].request
    validate_request("CreateTrainingJob", request)
    return request


def hyperparameters(request: dict[str, Any]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in request["HyperParameters"].items()}


def test_multi_worker_mirrored_strategy_is_the_sdks_key_and_model_dir_under_the_jobs_output() -> None:
    request = render(
        {
            "instance_type": ["ml.g5.2xlarge"],
            "instance_count": 2,
            "distribution": {"multi_worker_mirrored_strategy": {}},
        },
        TF_GPU,
        "tensorflow",
    )
    hps = hyperparameters(request)
    assert hps["sagemaker_multi_worker_mirrored_strategy_enabled"] is True
    name = request["TrainingJobName"]
    # the SDK: s3_path_join(output_path, job_name, "model"), output_path being the job's S3OutputPath
    output = request["OutputDataConfig"]["S3OutputPath"]
    assert hps["model_dir"] == f"{output.rstrip('/')}/{name}/model"
    assert not any(k.startswith(("sagemaker_torch", "sagemaker_instance_type")) for k in hps)


def test_parameter_server_is_the_sdks_key() -> None:
    hps = hyperparameters(
        render(
            {
                "instance_type": ["ml.m5.xlarge"],
                "instance_count": 2,
                "distribution": {"parameter_server": {}},
            },
            TF_CPU,
            "tensorflow",
        )
    )
    assert hps["sagemaker_parameter_server_enabled"] is True
    assert hps["model_dir"].startswith("s3://digits-artifacts/")


def test_horovod_gets_the_local_model_dir_and_the_mpi_keys() -> None:
    hps = hyperparameters(
        render({"instance_type": ["ml.g5.12xlarge"], "distribution": {"mpi": {}}}, TF_GPU, None)
    )
    # the framework is read from nothing here: mpi alone is not TensorFlow's, so no model_dir
    assert "model_dir" not in hps
    hps = hyperparameters(
        render({"instance_type": ["ml.g5.12xlarge"], "distribution": {"mpi": {}}}, TF_GPU, "tensorflow")
    )
    assert hps["model_dir"] == "/opt/ml/model"
    assert hps["sagemaker_mpi_enabled"] is True and hps["sagemaker_mpi_num_of_processes_per_host"] == 4


@pytest.mark.parametrize(
    ("model_dir", "expected"), [(False, None), ("s3://elsewhere/models", "s3://elsewhere/models")]
)
def test_model_dir_false_sends_none_and_a_string_is_sent_as_given(model_dir: Any, expected: Any) -> None:
    hps = hyperparameters(
        render({"instance_type": ["ml.m5.xlarge"], "model_dir": model_dir}, TF_CPU, "tensorflow")
    )
    assert hps.get("model_dir") == expected


def test_a_pytorch_job_gets_no_model_dir_and_a_tensorflow_distribution_implies_tensorflow() -> None:
    assert "model_dir" not in hyperparameters(render({"instance_type": ["ml.m5.xlarge"]}, PT_GPU, "pytorch"))
    hps = hyperparameters(
        render(
            {
                "instance_type": ["ml.m5.xlarge"],
                "instance_count": 2,
                "distribution": {"parameter_server": {}},
            },
            OWN,
            None,
        )
    )
    assert "model_dir" in hps


def test_the_users_own_model_dir_hyperparameter_wins() -> None:
    hps = hyperparameters(
        render(
            {"instance_type": ["ml.m5.xlarge"], "hyperparameters": {"model_dir": "/opt/ml/model"}},
            TF_CPU,
            "tensorflow",
        )
    )
    assert hps["model_dir"] == "/opt/ml/model"


def test_the_framework_is_read_from_the_image_the_same_way_on_both_doors(project) -> None:
    from sagestack.constructs.training_image import TrainingImage
    from sagestack.core.catalog.images import dlc_framework

    assert dlc_framework(TF_CPU) == "tensorflow" and dlc_framework(PT_GPU) == "pytorch"
    assert dlc_framework(OWN) is None and dlc_framework("${Token[TOKEN.12]}") is None
    assert TrainingImage.from_uris({"ml.m5.xlarge": TF_CPU}).framework == "tensorflow"
    assert TrainingImage.from_registry(OWN).framework is None
    project.spec(
        """\
        project: digits
        region: us-east-1
        images:
          tf: {dlc: {framework: tensorflow, version: "2.21", py_version: py312}}
        jobs:
          keras: {image: tf, instance_type: ml.m5.xlarge, instance_count: 2,
                  distribution: {multi_worker_mirrored_strategy: {}}}
        """
    ).env("dev")
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_training

    loaded = project.load("dev")
    requests = render_training(resolve_environment(loaded), project.root)
    hps = requests.jobs["keras"].candidates[0].request["HyperParameters"]
    assert "model_dir" in hps and hps["sagemaker_multi_worker_mirrored_strategy_enabled"] == "true"
