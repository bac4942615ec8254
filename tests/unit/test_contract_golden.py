"""The container contract for one representative two-host MPI job, every value pinned: the training
environment (SM_TRAINING_ENV), the SM_* variables, the toolkit's other exports, the host's config files.
tests/conformance holds each of these against AWS's own training toolkit (slow: it runs the toolkit);
this golden keeps them in the fast tier, where `make mutate` runs the contract's mutants. Refresh it
with `pytest tests/unit/test_contract_golden.py --snapshot-update` only after the conformance tier
agrees with the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from sagestack.core.contract import (
    Devices,
    HostLayout,
    files_under,
    input_data_config,
    is_container_path,
    resource_config,
    sagemaker_process_exports,
    sm_variables,
    toolkit_exports,
    training_environment,
    write_host_config,
)

HYPERPARAMETERS = {
    "sagemaker_program": '"train.py"',
    "sagemaker_submit_directory": '"s3://bucket/code/sourcedir.tar.gz"',
    "sagemaker_container_log_level": "20",
    "sagemaker_job_name": '"digits-dev-classifier-0123abcd-0"',
    "sagemaker_region": '"us-east-1"',
    "sagemaker_mpi_enabled": "true",
    "sagemaker_mpi_num_of_processes_per_host": "4",
    "epochs": "3",
    "lr": "0.001",
    "model": '{"depth": 2, "name": "cnn"}',
    "layers": "[8, 16]",
    "tag": '"x y"',
    "amp": "true",
}
REQUEST = {
    "AlgorithmSpecification": {"TrainingInputMode": "FastFile"},
    "InputDataConfig": [
        {
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {"S3Uri": "s3://b/t", "S3DataDistributionType": "ShardedByS3Key"}},
            "ContentType": "application/x-npz",
        },
        {
            "ChannelName": "val",
            "DataSource": {"S3DataSource": {"S3Uri": "s3://b/v"}},
            "InputMode": "File",
            "RecordWrapperType": "RecordIO",
        },
        {
            "ChannelName": "shared",
            "DataSource": {"FileSystemDataSource": {"FileSystemId": "fs-1"}},
        },
    ],
}


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def _contract(host: str, monkeypatch) -> dict:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    layout = HostLayout(host, Path("/opt/ml"))  # nothing is read or written: the container's own paths
    data = input_data_config(REQUEST)
    env = training_environment(
        layout,
        hyperparameters=HYPERPARAMETERS,
        resources=resource_config(host, ["algo-1", "algo-2"], "ml.g5.12xlarge", "eth0"),
        data_config=data,
        devices=Devices(gpus=4, neurons=0, cpus=48),
        job_name="digits-dev-classifier-0123abcd-0",
    )
    return {
        "inputdataconfig": data,
        "training_environment": env,
        "sm_variables": sm_variables(env),
        "toolkit_exports": toolkit_exports(env, code_dir=layout.code, master_port=29500),
        "process_exports": sagemaker_process_exports(HYPERPARAMETERS),
    }


@pytest.mark.parametrize("host", ["algo-1", "algo-2"])
def test_the_contract_of_a_two_host_mpi_job(host, monkeypatch, snapshot_json):
    assert _contract(host, monkeypatch) == snapshot_json


# What a bare resourceconfig.json and a script that is not a .py leave to the toolkit's defaults; and a
# heterogeneous cluster whose distribution runs on one of its two instance groups, with a topology.
SPARSE_RESOURCES = {"current_host": "algo-1", "hosts": ["algo-1"]}
HETERO_RESOURCES = {
    "current_host": "algo-3",
    "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "gpus",
    "hosts": ["algo-1", "algo-2", "algo-3"],
    "instance_groups": [
        {"instance_group_name": "cpus", "instance_type": "ml.c5.xlarge", "hosts": ["algo-1"]},
        {"instance_group_name": "gpus", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-2"]},
    ],
    "network_interface_name": "ens5",
    "topology": [{"name": "t"}],
}
CASES = {
    "sparse": (SPARSE_RESOURCES, {"sagemaker_program": '"run.sh"', "n": "1"}, Devices()),
    "hetero": (
        HETERO_RESOURCES,
        {
            "sagemaker_program": '"train.py"',
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_distribution_instance_groups": '["gpus"]',
        },
        Devices(gpus=8, cpus=96),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_contract_where_the_toolkits_defaults_and_groups_decide(case, monkeypatch, snapshot_json):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    resources, hyperparameters, devices = CASES[case]
    layout = HostLayout(resources["current_host"], Path("/opt/ml"))
    env = training_environment(
        layout,
        hyperparameters=hyperparameters,
        resources=resources,
        data_config={},
        devices=devices,
        job_name=None,
    )
    assert {
        "training_environment": env,
        "sm_variables": sm_variables(env),
        "toolkit_exports": toolkit_exports(env, code_dir=layout.code),
        "process_exports": sagemaker_process_exports(hyperparameters),
    } == snapshot_json


def test_the_host_config_files_are_what_the_platform_writes(tmp_path):
    layout = HostLayout("algo-1", tmp_path)
    layout.output.mkdir(parents=True)
    layout.failure.write_text("a previous run failed")
    layout.success.write_text("")
    resources = resource_config("algo-1", ["algo-1"], "ml.m5.xlarge", "eth0")
    data = input_data_config(REQUEST)
    write_host_config(layout, hyperparameters={"b": "2", "a": "1"}, resources=resources, data_config=data)
    config = layout.config
    assert (config / "hyperparameters.json").read_text() == '{\n  "a": "1",\n  "b": "2"\n}'
    assert json.loads((config / "resourceconfig.json").read_text()) == resources
    assert (config / "inputdataconfig.json").read_text() == json.dumps(data, indent=2)
    assert not layout.failure.exists() and not layout.success.exists()  # a rerun starts clean
    folders = ["input/config", "input/data", "model", "output/data", "output/intermediate"]
    assert all((tmp_path / f).is_dir() for f in folders)
    assert [p.relative_to(tmp_path).as_posix() for p in files_under(tmp_path)] == [
        "input/config/hyperparameters.json",
        "input/config/inputdataconfig.json",
        "input/config/resourceconfig.json",
    ]


def test_container_paths_are_opt_ml_and_below():
    assert is_container_path("/opt/ml") and is_container_path("/opt/ml/checkpoints")
    assert not is_container_path("/opt/mlx") and not is_container_path("/tmp/opt/ml")


def test_a_rerun_writes_the_host_config_again_and_a_first_run_finds_nothing_to_clear(tmp_path):
    layout = HostLayout("algo-1", tmp_path / "fresh")
    resources = resource_config("algo-1", ["algo-1"], "ml.m5.xlarge", "eth0")
    for _ in range(2):  # no failure/success marker on the first run; every folder already there on the second
        write_host_config(layout, hyperparameters={}, resources=resources, data_config={})
    assert (layout.config / "resourceconfig.json").read_text() == json.dumps(resources, indent=2)


def test_a_request_without_channels_or_an_input_mode_gets_the_platforms_defaults():
    assert input_data_config({"AlgorithmSpecification": {}}) == {}
    channel = {"ChannelName": "train", "DataSource": {"S3DataSource": {}}}
    request = {"AlgorithmSpecification": {}, "InputDataConfig": [channel]}
    assert input_data_config(request) == {
        "train": {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
    }


def test_arguments_and_variable_values_are_the_toolkits_own():
    """sagemaker_training.mapping is the judge (the conformance extra installs it)."""
    mapping = pytest.importorskip("sagemaker_training.mapping")
    from sagestack.core.contract import env_value, to_cmd_args

    for value in ({"name": "café", "n": [1, 2]}, "é", None, b"\xe9t\xe9", 3, True):
        assert env_value(value) == mapping.to_env_vars({"x": value})["SM_X"], value
    for hps in ({"a": 1, "bb": "x y", "": 2}, {"k": {"b": 1, "a": 2}}):
        assert to_cmd_args(hps) == mapping.to_cmd_args(hps), hps


def test_local_threads_are_sized_by_the_cores_this_process_may_use(monkeypatch):
    import os

    from sagestack.core.contract import cpu_count

    assert cpu_count() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)  # pinned to one of six
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cpu_count() == 1
    monkeypatch.delattr(os, "sched_getaffinity")  # where the platform has no affinity (macOS)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cpu_count() == 6
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # undeterminable
    assert cpu_count() == 1
