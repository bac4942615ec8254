"""Rendered CreateTrainingJob requests: golden files per distribution kind, each validated against
botocore's SageMaker model, plus the details a request must get exactly right."""

from __future__ import annotations

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from sagestack.core.catalog import RequestValidationError, validate_request
from sagestack.core.deployment import Deployment
from sagestack.core.names import Names
from sagestack.core.sourcedir import pack_source_dir
from sagestack.training.context import RequestContext
from sagestack.training.models import JobSpec
from sagestack.training.rendered import resolve_training_job
from sagestack.training.request import distribution_hyperparameters

ACCOUNT = "123456789012"
DEPLOYMENT = Deployment(
    region="us-east-1",
    account=ACCOUNT,
    role_arn=f"arn:aws:iam::{ACCOUNT}:role/exec",
    bucket="digits-artifacts",
    kms_key_id=f"arn:aws:kms:us-east-1:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555",
    tags=(("sagestack:project", "digits"),),
)


def context(image: str):
    def ctx(itype: str) -> RequestContext:
        return RequestContext(
            deployment=DEPLOYMENT,
            source_s3_uri="s3://cdk-assets/abc.tar.gz",
            image_uri=image,
            rules_image_uri="503895931360.dkr.ecr.us-east-1.amazonaws.com/sagemaker-debugger-rules:latest",
        )

    return ctx


GPU = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"
NEURON = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.21.0-ubuntu22.04"

CASES = {
    "torch_distributed-2x-p4d-spot": (
        {
            "image": "train",
            "instance_type": ["ml.p4d.24xlarge", "ml.p4de.24xlarge"],
            "instance_count": 2,
            "max_run": "4h",
            "use_spot_instances": True,
            "max_wait": "8h",
            "volume_size_gb": 100,
            "distribution": {"torch_distributed": {}},
            "checkpoint": {"every_steps": 200},
            "hyperparameters": {"epochs": 10, "lr": 0.001, "optimizer": "adamw", "amp": True},
            "metric_definitions": {"val_accuracy": "val_accuracy=([0-9.]+)"},
            "debugger": {"rules": ["vanishing_gradient", "overfit"], "stop_on_issue": True},
            "profiler": {
                "system_interval_ms": 500,
                "framework": {"start_step": 5, "num_steps": 10},
                "rules": ["profiler_report"],
            },
            "tensorboard": True,
        },
        GPU,
        8,
    ),
    "mpi-2x-p3.16xlarge": (
        {
            "image": "train",
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "distribution": {"mpi": {"custom_mpi_options": "-verbose -x NCCL_DEBUG=INFO"}},
            "hyperparameters": {"epochs": 3},
        },
        GPU,
        8,
    ),
    "smp-p5.48xlarge": (
        {
            "image": "train",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
            "distribution": {
                "smp": {"parameters": {"hybrid_shard_degree": 16, "sm_activation_offloading": True}}
            },
            "keep_alive": "10m",
            "retry_attempts": 2,
        },
        GPU,
        8,
    ),
    "torch_distributed-trn1.32xlarge": (
        {
            "image": "train",
            "instance_type": "ml.trn1.32xlarge",
            "instance_count": 2,
            "distribution": {"torch_distributed": {}},
            "environment": {"NEURON_CC_FLAGS": "--model-type=transformer"},
        },
        NEURON,
        32,
    ),
    "smddp-2x-p4de-vpc-channels": (
        {
            "image": "train",
            "instance_type": "ml.p4de.24xlarge",
            "instance_count": 2,
            "distribution": {"smddp": {}},
            "vpc": {"subnets": ["subnet-0abc"], "security_groups": ["sg-0abc"]},
            "channels": {
                "train": {"key_prefix": "digits/train"},
                "val": {"s3_uri": "s3://shared-data/digits/val/", "input_mode": "FastFile"},
            },
        },
        GPU,
        8,
    ),
    # The book's chapter 5-7 scenarios, as the spec writes them.
    "book-ch5-spot-with-checkpoints": (
        {
            "image": "train",
            "instance_type": "ml.p3.2xlarge",
            "max_run": "2h",
            "use_spot_instances": True,
            "max_wait": "6h",
            "checkpoint": {"every_steps": 100, "keep_last": 2, "local_path": "/opt/ml/checkpoints/run"},
            "hyperparameters": {"epochs": 20},
        },
        GPU,
        1,
    ),
    "book-ch6-horovod-mpi": (
        {
            "image": "train",
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "distribution": {
                "mpi": {
                    "processes_per_host": 8,
                    "custom_mpi_options": "--NCCL_DEBUG WARN -x HOROVOD_FUSION_THRESHOLD=16777216",
                }
            },
        },
        GPU,
        8,
    ),
    "book-ch6-pytorch-ddp": (
        {
            "image": "train",
            "instance_type": "ml.g5.12xlarge",
            "instance_count": 2,
            "distribution": {"torch_distributed": {}},
            "hyperparameters": {"batch_size_per_device": 64, "num_workers": 8},
        },
        GPU,
        4,
    ),
    "book-ch6-smddp": (
        {
            "image": "train",
            "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2,
            "distribution": {"smddp": {"custom_mpi_options": "-verbose"}},
        },
        GPU,
        8,
    ),
    "book-ch6-smp-v1": (
        {
            "image": "train",
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "distribution": {
                "smp": {
                    "version": 1,
                    "parameters": {
                        "partitions": 2,
                        "microbatches": 4,
                        "pipeline": "interleaved",
                        "optimize": "speed",
                        "placement_strategy": "cluster",
                        "ddp": True,
                    },
                    "processes_per_host": 8,
                    "custom_mpi_options": "-verbose -x NCCL_DEBUG=WARN",
                }
            },
        },
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-gpu-py39",
        8,
    ),
    "book-ch6-smp-v2": (
        {
            "image": "train",
            "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2,
            "distribution": {"smp": {"parameters": {"hybrid_shard_degree": 16, "tensor_parallel_degree": 2}}},
        },
        "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311-cu121",
        8,
    ),
    "book-ch7-debugger-four-rules-and-hook": (
        {
            "image": "train",
            "instance_type": "ml.g5.2xlarge",
            "debugger": {
                "rules": [
                    "vanishing_gradient",
                    {"rule": "overfit", "parameters": {"patience_train": 5, "patience_validation": 10}},
                    {
                        "rule": "loss_not_decreasing",
                        "email": ["ml-team@example.com"],
                        "sms": ["+14155550100"],
                    },
                    {"rule": "weight_update_ratio", "stop_training": False},
                ],
                "stop_on_issue": True,
                "hook": {
                    "parameters": {"train.save_interval": 100, "eval.save_interval": 10},
                    "collections": {"weights": {"save_histogram": True}, "losses": {}},
                },
            },
        },
        GPU,
        1,
    ),
    "book-ch7-profiler-pytorch-1.13": (
        {
            "image": "train",
            "instance_type": "ml.p3.2xlarge",
            "profiler": {
                "system_interval_ms": 100,
                "dataloader": {"start_step": 5, "num_steps": 3},
                "python": {
                    "start_step": 9,
                    "num_steps": 3,
                    "profiler": "cprofile",
                    "cprofile_timer": "cpu_time",
                },
                "rules": ["profiler_report", "low_gpu_utilization"],
            },
        },
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:1.13.1-gpu-py39",
        1,
    ),
    "single-cpu-no-distribution": (
        {"image": "train", "instance_type": "ml.m5.xlarge"},
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311",
        1,
    ),
}


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_request(case, snapshot_json):
    body, image, per_host = CASES[case]
    job = JobSpec.model_validate(body)
    plan = resolve_training_job(
        names=Names("digits", "prod"),
        key="classifier",
        job=job,
        source_sha256="0" * 64,
        image_uris={it: image for it in job.instance_type},
        context=context(image),
    )  # validate=True: every candidate's request is checked against botocore's model
    assert plan.candidates[0].processes_per_host == per_host
    assert [c.request for c in plan.candidates] == snapshot_json


def test_torch_distributed_keys_per_candidate():
    job = JobSpec.model_validate(
        {
            "image": "t",
            "instance_type": ["ml.p4d.24xlarge", "ml.g5.48xlarge"],
            "instance_count": 2,
            "distribution": {"torch_distributed": {}},
        }
    )
    assert distribution_hyperparameters(job, "ml.g5.48xlarge") == {
        "sagemaker_torch_distributed_enabled": "true",
        "sagemaker_instance_type": '"ml.g5.48xlarge"',
    }


def test_mpi_processes_default_to_accelerators():
    job = JobSpec.model_validate(
        {"image": "t", "instance_type": "ml.g5.12xlarge", "distribution": {"mpi": {}}}
    )
    assert (
        distribution_hyperparameters(job, "ml.g5.12xlarge")["sagemaker_mpi_num_of_processes_per_host"] == "4"
    )


def _plan(body: dict):
    job = JobSpec.model_validate({"image": "t", **body})
    return resolve_training_job(
        names=Names("digits", "dev"),
        key="c",
        job=job,
        source_sha256="0" * 64,
        image_uris={},
        context=context(GPU),
    )


def _request(body: dict, candidate: int = 0) -> dict:
    return _plan(body).candidates[candidate].request


def test_hyperparameters_are_json_encoded_like_the_sdk():
    hps = _request(
        {"instance_type": "ml.g5.xlarge", "hyperparameters": {"lr": 0.001, "name": "x", "amp": True}}
    )["HyperParameters"]
    assert hps["lr"] == "0.001" and hps["name"] == '"x"' and hps["amp"] == "true"
    assert hps["sagemaker_program"] == '"train.py"'
    assert hps["sagemaker_submit_directory"] == '"s3://cdk-assets/abc.tar.gz"'
    assert hps["sagemaker_container_log_level"] == "20" and hps["sagemaker_region"] == '"us-east-1"'


def test_volume_key_only_where_sagemaker_accepts_it():
    # p4d has local NVMe storage: SageMaker refuses a VolumeKmsKeyId there.
    assert "VolumeKmsKeyId" not in _request({"instance_type": "ml.p4d.24xlarge"})["ResourceConfig"]
    assert "VolumeKmsKeyId" in _request({"instance_type": "ml.p3.2xlarge"})["ResourceConfig"]


def test_multi_node_encrypts_inter_container_traffic_by_default():
    assert _request({"instance_type": "ml.g5.xlarge", "instance_count": 2})[
        "EnableInterContainerTrafficEncryption"
    ]
    assert not _request({"instance_type": "ml.g5.xlarge"})["EnableInterContainerTrafficEncryption"]


def test_efa_environment_on_multi_node_efa_types():
    env = _request({"instance_type": "ml.p4d.24xlarge", "instance_count": 2})["Environment"]
    assert env == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}
    assert "Environment" not in _request({"instance_type": "ml.p4d.24xlarge"})


def test_efa_variables_only_where_the_instance_has_efa():
    """FI_PROVIDER=efa on an instance without an EFA device makes libfabric fail NCCL's start-up: the
    spec's `efa: true` asks for EFA where there is one, never conjures it (ml.g5.2xlarge has none);
    GPUDirect RDMA's variable only where the instance has it (ml.g4dn.8xlarge: EFA without RDMA)."""
    for count in (1, 2):
        plain = _request({"instance_type": "ml.g5.2xlarge", "instance_count": count, "efa": True})
        assert "FI_PROVIDER" not in plain.get("Environment", {})
    assert _request({"instance_type": "ml.g4dn.8xlarge", "instance_count": 2})["Environment"] == {
        "FI_PROVIDER": "efa"
    }
    # asked for on one host of an EFA type: given; refused on several: none
    assert _request({"instance_type": "ml.p4d.24xlarge", "efa": True})["Environment"] == {
        "FI_PROVIDER": "efa",
        "FI_EFA_USE_DEVICE_RDMA": "1",
    }
    off = _request({"instance_type": "ml.p4d.24xlarge", "instance_count": 2, "efa": False})
    assert "FI_PROVIDER" not in off.get("Environment", {})


def test_invalid_request_is_refused_at_render():
    req = _request({"instance_type": "ml.g5.xlarge"})
    req["TrainingJobName"] = "digits_dev"  # underscores are not allowed in job names
    req["StoppingCondition"]["MaxRuntimeInSeconds"] = 0
    with pytest.raises(
        RequestValidationError,
        match=r"TrainingJobName: 'digits_dev' does not match[\s\S]*MaxRuntimeInSeconds",
    ):
        validate_request("CreateTrainingJob", req)


def test_job_names_fit_63_characters_and_keep_the_hash():
    name = Names("a" * 20, "b" * 16).training_job("c" * 24, "0123456789", 3)
    assert len(name) <= 63 and name.endswith("-01234567-3")


def test_content_hash_changes_with_code_and_spec_only(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    first = pack_source_dir(tmp_path)
    job = JobSpec.model_validate({"image": "t", "instance_type": "ml.g5.xlarge"})

    def digest(j, sha):
        return resolve_training_job(
            names=Names("p", "dev"), key="k", job=j, source_sha256=sha, image_uris={}, context=context(GPU)
        ).digest

    assert digest(job, first.sha256) == digest(job, pack_source_dir(tmp_path).sha256)
    (tmp_path / "train.py").write_text("print(2)\n")
    assert digest(job, first.sha256) != digest(job, pack_source_dir(tmp_path).sha256)
    bigger = JobSpec.model_validate({"image": "t", "instance_type": "ml.g5.xlarge", "instance_count": 2})
    assert digest(job, first.sha256) != digest(bigger, first.sha256)


def test_source_archive_is_byte_identical_regardless_of_mtimes_and_caches(tmp_path):
    import os

    (tmp_path / "pkg").mkdir()
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "pkg" / "util.py").write_text("X = 1\n")
    first = pack_source_dir(tmp_path)
    os.utime(tmp_path / "train.py", (1, 1))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"junk")
    second = pack_source_dir(tmp_path)
    assert first.data == second.data
    assert first.files == ("pkg/util.py", "train.py")
    import gzip
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(second.data))) as tar:
        assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in tar.getmembers())
    assert first.sha256 == second.sha256


def test_pipeline_skips_a_candidate_whose_quota_is_short():
    from sagestack.core.states import PipelineSettings
    from sagestack.training.states import training_pipeline

    plan = _plan(
        {
            "instance_type": ["ml.p4d.24xlarge", "ml.g5.48xlarge"],
            "instance_count": 2,
            "distribution": {"torch_distributed": {}},
        }
    )
    codes = {"ml.p4d.24xlarge for training job usage": "L-AAAA0001"}
    states = training_pipeline(plan, PipelineSettings(quota_codes=codes))["States"]
    assert states["Quota enough 1/2?"]["Choices"] == [
        {"Variable": "$.quota_1.Value", "NumericLessThan": 2, "Next": "Quota 2/2"}
    ]
    # the second candidate's code is unknown: it is found by name, and checked the same way
    assert states["Quota 2/2"]["Resource"] == "arn:aws:states:::aws-sdk:servicequotas:listServiceQuotas"
    assert states["Quota 2/2"]["ResultSelector"]["Match.$"] == (
        "$.Quotas[?(@.QuotaName == 'ml.g5.48xlarge for training job usage')]"
    )
    assert states["Quota 2/2: value"]["Next"] == "Quota enough 2/2?"
    assert states["Quota enough 2/2?"]["Choices"][0]["NumericLessThan"] == 2
    assert states["Back off 2/2"]["Next"] == "No candidate available"


def test_a_file_system_channel_renders_a_valid_FileSystemDataSource():
    from sagestack.core.catalog.service_model import validate_request

    request = _request(
        {
            "instance_type": "ml.g5.2xlarge",
            "channels": {
                "train": {
                    "file_system": {
                        "id": "fs-0123456789abcdef0",
                        "type": "FSxLustre",
                        "directory_path": "/abcdefgh/digits",
                    }
                }
            },
            "vpc": {"subnets": ["subnet-0123456789abcdef0"], "security_groups": ["sg-0123456789abcdef0"]},
        }
    )
    (channel,) = request["InputDataConfig"]
    assert channel == {
        "ChannelName": "train",
        "DataSource": {
            "FileSystemDataSource": {
                "FileSystemId": "fs-0123456789abcdef0",
                "FileSystemAccessMode": "ro",
                "FileSystemType": "FSxLustre",
                "DirectoryPath": "/abcdefgh/digits",
            }
        },
    }
    validate_request("CreateTrainingJob", request)


PLAN_ARN = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/p5-week"


def test_a_training_plan_goes_to_its_candidate_and_to_its_preference():
    from sagestack.core.catalog.service_model import validate_request

    body = {
        "instance_type": ["ml.p5.48xlarge", "ml.p4d.24xlarge"],
        "training_plans": {"ml.p5.48xlarge": PLAN_ARN},
    }
    plan = _plan(body)
    first, second = plan.candidates
    assert first.request["ResourceConfig"]["TrainingPlanArn"] == PLAN_ARN
    assert "TrainingPlanArn" not in second.request["ResourceConfig"]
    assert plan.preferred is not None  # the plan does not keep the candidates apart
    preferences = plan.preferred.request["ResourceConfig"]["InstancePreferences"]
    assert preferences[0]["TrainingPlanArns"] == [PLAN_ARN] and "TrainingPlanArns" not in preferences[1]
    assert "TrainingPlanArn" not in plan.preferred.request["ResourceConfig"]
    validate_request("CreateTrainingJob", first.request)
    validate_request("CreateTrainingJob", plan.preferred.request)


def test_adding_training_plans_to_the_language_renamed_no_job():
    """A key added after job names were published enters the hash only when it is set."""
    from sagestack.training.identity import job_hash
    from sagestack.training.models import JobSpec

    base = {"image": "train", "instance_type": ["ml.p5.48xlarge"]}
    plain = JobSpec.model_validate(base)
    dumped = plain.model_dump(mode="json")
    assert "training_plans" in dumped  # the model has the key ...
    digest = job_hash(plain, env="dev", source_sha256="0" * 64, image_uris={})
    planned = JobSpec.model_validate({**base, "training_plans": {"ml.p5.48xlarge": PLAN_ARN}})
    assert (
        job_hash(planned, env="dev", source_sha256="0" * 64, image_uris={}) != digest
    )  # ... and it counts when set


def test_training_plan_offerings_are_searched_per_offered_type():
    from datetime import UTC, datetime

    import boto3
    from botocore.stub import Stubber

    from sagestack.ops.account import training_plan_offerings

    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    start = datetime(2027, 1, 15, 8, tzinfo=UTC)
    with Stubber(client) as stub:  # the Stubber checks each request against botocore's model
        stub.add_response(
            "search_training_plan_offerings",
            {
                "TrainingPlanOfferings": [
                    {
                        "TrainingPlanOfferingId": "tpo-1",
                        "TargetResources": ["training-job"],
                        "DurationHours": 48,
                        "UpfrontFee": "9876.54",
                        "CurrencyCode": "USD",
                        "ReservedCapacityOfferings": [
                            {
                                "InstanceType": "ml.p5.48xlarge",
                                "InstanceCount": 2,
                                "StartTime": start,
                                "EndTime": start,
                            }
                        ],
                    }
                ]
            },
            {
                "InstanceType": "ml.p5.48xlarge",
                "InstanceCount": 2,
                "DurationHours": 48,
                "TargetResources": ["training-job"],
            },
        )
        rows, unoffered = training_plan_offerings(
            "us-east-1",
            instance_types=["ml.p5.48xlarge", "ml.g5.48xlarge"],
            instance_count=2,
            duration_hours=48,
            client=client,
        )
        stub.assert_no_pending_responses()
    assert unoffered == ["ml.g5.48xlarge"]
    assert rows == [
        {
            "OfferingId": "tpo-1",
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 2,
            "AvailabilityZone": "",
            "StartTime": start,
            "EndTime": start,
            "DurationHours": 48,
            "UpfrontFee": "9876.54",
            "CurrencyCode": "USD",
        }
    ]


def test_a_training_plan_is_checked_against_what_it_reserves():
    import boto3
    from botocore.stub import Stubber

    from sagestack.ops.account import training_plan_fit

    client = boto3.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    described = {
        "TrainingPlanArn": PLAN_ARN,
        "TrainingPlanName": "p5-week",
        "Status": "Scheduled",
        "DurationHours": 168,
        "UpfrontFee": "123456.78",
        "CurrencyCode": "USD",
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": PLAN_ARN.replace("training-plan", "reserved-capacity"),
                "InstanceType": "ml.p5.48xlarge",
                "TotalInstanceCount": 2,
                "Status": "Scheduled",
            }
        ],
    }
    with Stubber(client) as stub:
        stub.add_response("describe_training_plan", described, {"TrainingPlanName": "p5-week"})
        stub.add_response("describe_training_plan", described, {"TrainingPlanName": "p5-week"})
        line, problem = training_plan_fit(PLAN_ARN, "ml.p5.48xlarge", 2, "us-east-1", client=client)
        assert (
            problem is None
            and line == "p5-week: Scheduled, 2x ml.p5.48xlarge for 168 h, 123456.78 USD up front"
        )
        _, problem = training_plan_fit(PLAN_ARN, "ml.p5.48xlarge", 4, "us-east-1", client=client)
        assert problem == "the plan reserves 2x ml.p5.48xlarge; the job needs 4"


def test_mlflow_tracking_renders_mlflow_config_and_the_clients_variables():
    import dataclasses

    from sagestack.training.context import MlflowTarget
    from sagestack.training.retrain import retrainable

    arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:mlflow-tracking-server/digits-dev-mlflow"

    def ctx(itype: str) -> RequestContext:
        return dataclasses.replace(context(GPU)(itype), mlflow=MlflowTarget(arn, "digits-dev"))

    job = JobSpec.model_validate(
        {"image": "train", "instance_type": ["ml.g5.2xlarge", "ml.g4dn.2xlarge"], "environment": {"X": "1"}}
    )
    plan = resolve_training_job(
        names=Names("digits", "dev"),
        key="classifier",
        job=job,
        source_sha256="0" * 64,
        image_uris={},
        context=ctx,
    )
    for c in plan.candidates:
        validate_request("CreateTrainingJob", c.request)
        assert c.request["MlflowConfig"] == {
            "MlflowResourceArn": arn,
            "MlflowExperimentName": "digits-dev-classifier",
            "MlflowRunName": c.name,
        }
        assert c.request["Environment"] == {
            "X": "1",
            "MLFLOW_TRACKING_URI": arn,
            "MLFLOW_EXPERIMENT_NAME": "digits-dev-classifier",
        }
    assert plan.preferred is not None
    assert plan.preferred.request["MlflowConfig"]["MlflowRunName"] == plan.preferred.name
    # A retrain names its run after the fresh job name, as it names the job.
    from sagestack.core.states import PipelineSettings
    from sagestack.training.states import training_pipeline

    definition = retrainable(training_pipeline(plan, PipelineSettings()))
    create = definition["States"]["Create"]["Parameters"]
    assert create["MlflowConfig"]["MlflowRunName.$"] == create["TrainingJobName.$"]
    # without tracking: no MlflowConfig, no variables
    bare = resolve_training_job(
        names=Names("digits", "dev"),
        key="classifier",
        job=job,
        source_sha256="0" * 64,
        image_uris={},
        context=context(GPU),
    )
    assert "MlflowConfig" not in bare.candidates[0].request
    assert bare.candidates[0].request["Environment"] == {"X": "1"}


def test_max_pending_time_stops_a_job_that_waits_too_long_for_capacity():
    body = {"instance_type": ["ml.g5.2xlarge", "ml.g4dn.2xlarge"], "max_pending_time": "2h"}
    plan = _plan(body)
    for request in [*(c.request for c in plan.candidates), plan.preferred.request]:
        assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400, "MaxPendingTimeInSeconds": 7200}
        validate_request("CreateTrainingJob", request)
    # unset: no key in the request
    assert _request({"instance_type": "ml.g5.xlarge"})["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}


def test_max_pending_time_renames_no_job_unless_set():
    from sagestack.core.identity import identity
    from sagestack.training.identity import PUBLISHED, job_hash

    unset = JobSpec.model_validate({"image": "t", "instance_type": "ml.g5.xlarge"})
    assert "max_pending_time" not in identity(unset, PUBLISHED)  # added after names were published
    set_ = JobSpec.model_validate({"image": "t", "instance_type": "ml.g5.xlarge", "max_pending_time": 3600})
    digest = job_hash(unset, env="dev", source_sha256="0" * 64, image_uris={})
    assert job_hash(set_, env="dev", source_sha256="0" * 64, image_uris={}) != digest


def test_a_max_pending_time_outside_what_sagemaker_allows_is_located(project):
    from tests.conftest import MINIMAL

    errors = project.spec(MINIMAL + "    max_pending_time: 10m\n").errors()
    assert errors == [
        "config/sagestack.yaml:9:23: jobs.classifier.max_pending_time: Input should be greater than or "
        "equal to 1800 (given: '10m')"
    ]
    assert (
        project.spec(MINIMAL + "    max_pending_time: 29d\n")
        .errors()[0]
        .startswith(
            "config/sagestack.yaml:9:23: jobs.classifier.max_pending_time: Input should be less than or equal to"
        )
    )


@pytest.mark.parametrize("candidates", [["ml.g5.2xlarge"], ["ml.g5.2xlarge", "ml.g4dn.2xlarge"]])
def test_a_retrain_leaves_no_content_hash_behind_but_the_spec_hash_tag(candidates):
    """training/retrain.py lists where a CreateTrainingJob names things by content hash; a request
    field added later that carries the hash must join that list, or a retrain would reuse the old
    name or prefix. Every option that puts the hash in a request is set here: any static copy of
    the hash left after the rewrite (the spec-hash tag aside: a retrain trains the same spec) fails."""
    import dataclasses
    import json

    from sagestack.core.states import PipelineSettings
    from sagestack.training.context import MlflowTarget
    from sagestack.training.retrain import retrainable
    from sagestack.training.states import training_pipeline

    arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:mlflow-tracking-server/digits-dev-mlflow"

    def ctx(itype: str) -> RequestContext:
        return dataclasses.replace(context(GPU)(itype), mlflow=MlflowTarget(arn, "digits-dev"))

    job = JobSpec.model_validate(
        {
            "image": "train",
            "instance_type": candidates,
            "checkpoint": {"every_steps": 10},
            "tensorboard": True,
            "debugger": {"rules": [{"rule": "loss_not_decreasing"}]},
            "profiler": {"rules": ["profiler_report"]},
        }
    )
    plan = resolve_training_job(
        names=Names("digits", "dev"),
        key="classifier",
        job=job,
        source_sha256="0" * 64,
        image_uris={},
        context=ctx,
    )
    definition = retrainable(training_pipeline(plan, PipelineSettings()))
    creates = [
        s["Parameters"]
        for s in definition["States"].values()
        if str(s.get("Resource", "")).endswith("sagemaker:createTrainingJob")
    ]
    assert creates
    for params in creates:
        rest = {k: v for k, v in params.items() if k != "Tags"}
        assert plan.digest not in json.dumps(rest), json.dumps(rest, indent=1)
        assert {"Key": "sagestack:spec-hash", "Value": plan.digest} in params["Tags"]
