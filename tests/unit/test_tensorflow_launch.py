"""What the TensorFlow container runs on a host (sagemaker_tensorflow_container/training.py on
sagemaker-training 4.x), and how this machine runs the same cluster: pinned word for word in the fast
tier (tests/conformance holds them against AWS's toolkit itself)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sagestack.core.contract import Devices, HostLayout, resource_config, sm_variables, training_environment
from sagestack.core.tf_contract import (
    TENSORFLOW_FRAMEWORK_MODULE,
    model_dir_under_tuning,
    tf_config_for_mwms,
    tf_config_for_ps,
)
from sagestack.local.training.hosts import local_addresses
from sagestack.local.training.launch import PS_SERVER, Launch, plan_launch
from sagestack.local.training.processes import Command, Processes

HOSTS = ["algo-1", "algo-2", "algo-3"]


def _plan(tmp_path: Path, hps: dict[str, str], *, host: str = "algo-1", hosts: list[str] = HOSTS) -> Launch:
    layout = HostLayout(host, tmp_path / host)
    layout.code.mkdir(parents=True, exist_ok=True)
    env = training_environment(
        layout,
        hyperparameters={"sagemaker_program": '"train.py"', "epochs": "3", **hps},
        resources=resource_config(host, hosts, "ml.g5.12xlarge", "eth0"),
        data_config={},
        devices=Devices(gpus=4),
        job_name="j",
        framework_module=TENSORFLOW_FRAMEWORK_MODULE,
        topology=False,
    )
    return plan_launch(env, layout.code)


def test_mwms_gives_every_host_a_worker_task_and_runs_one_plain_process(tmp_path):
    launch = _plan(tmp_path, {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}, host="algo-2")
    assert launch.runner == "mwms" and launch.processes_per_host == 1
    assert launch.tf_config == {
        "cluster": {"worker": ["algo-1:8890", "algo-2:8890", "algo-3:8890"]},
        "environment": "cloud",
        "task": {"index": 1, "type": "worker"},
    }
    # sagemaker-training 4.x: no end-of-options marker
    assert launch.container_command() == ["python", "train.py", "--epochs", "3"]
    addresses = local_addresses(launch.addresses())
    [(argv, extra)] = launch.local_commands(master_port=1, addresses=addresses)
    assert argv == [sys.executable, "train.py", "--epochs", "3"]
    local = json.loads(extra["TF_CONFIG"])
    assert local["task"] == launch.tf_config["task"]
    assert local["cluster"]["worker"] == [addresses[a] for a in launch.tf_config["cluster"]["worker"]]
    assert len(set(addresses.values())) == 3 and all(a.startswith("127.0.0.1:") for a in addresses.values())


def test_parameter_servers_make_algo_1_the_master_and_start_a_ps_task_on_every_host(tmp_path):
    master = _plan(tmp_path, {"sagemaker_parameter_server_enabled": "true"})
    worker = _plan(tmp_path, {"sagemaker_parameter_server_enabled": "true"}, host="algo-3")
    cluster = {
        "master": ["algo-1:2222"],
        "ps": ["algo-1:2223", "algo-2:2223", "algo-3:2223"],
        "worker": ["algo-2:2222", "algo-3:2222"],
    }
    assert master.tf_config == {
        "cluster": cluster,
        "environment": "cloud",
        "task": {"index": 0, "type": "master"},
    }
    assert worker.tf_config is not None and worker.tf_config["task"] == {"index": 1, "type": "worker"}
    assert worker.ps_config is not None and worker.ps_config["task"] == {"index": 2, "type": "ps"}
    commands = worker.local_commands(master_port=1, addresses=local_addresses(worker.addresses()))
    assert [c[0][1] for c in commands] == ["train.py", "-c"] and commands[1][0][2] == PS_SERVER


def test_parameter_servers_on_one_host_are_not_started(tmp_path):
    launch = _plan(tmp_path, {"sagemaker_parameter_server_enabled": "true"}, hosts=["algo-1"])
    assert launch.runner == "process" and "more than one" in launch.reason


def test_horovod_runs_mpirun_with_the_sdks_process_count(tmp_path):
    launch = _plan(
        tmp_path, {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}
    )
    assert launch.runner == "mpi" and launch.processes_per_host == 2
    assert launch.container_command()[:5] == ["mpirun", "--host", "algo-1:2,algo-2:2,algo-3:2", "-np", "6"]


def test_the_tf_configs_are_the_toolkits_functions(tmp_path):
    # the toolkit's _build_tf_config_for_ps on one host: a master alone, no ps (it would raise for a ps task)
    assert tf_config_for_ps(["algo-1"], "algo-1") == {
        "cluster": {"master": ["algo-1:2222"]},
        "environment": "cloud",
        "task": {"index": 0, "type": "master"},
    }
    assert tf_config_for_mwms(["algo-1"], "algo-1")["cluster"] == {"worker": ["algo-1:8890"]}


def test_sagemaker_training_4_has_no_topology_and_tuning_appends_the_job_to_model_dir(tmp_path):
    layout = HostLayout("algo-1", tmp_path / "algo-1")
    hps = {
        "sagemaker_program": '"train.py"',
        "model_dir": '"s3://b/out/j/model"',
        "_tuning_objective_metric": "x",
    }
    env = training_environment(
        layout,
        hyperparameters=hps,
        resources=resource_config("algo-1", ["algo-1"], "ml.m5.xlarge", "eth0"),
        data_config={},
        devices=Devices(),
        job_name="trial-7",
        framework_module=TENSORFLOW_FRAMEWORK_MODULE,
        topology=False,
    )
    assert "topology" not in env and len(env) == 36
    model_dir_under_tuning(hps, env["hyperparameters"], "trial-7")
    variables = sm_variables(env)
    assert variables["SM_HP_MODEL_DIR"] == "s3://b/out/j/model/trial-7/model"
    assert json.loads(variables["SM_TRAINING_ENV"])["hyperparameters"]["model_dir"].endswith("trial-7/model")


def test_a_service_process_is_ended_once_the_workers_are_done(tmp_path):
    pid_file = tmp_path / "service.pid"
    service = Command(
        argv=[
            sys.executable,
            "-c",
            f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)",
        ],
        cwd=tmp_path,
        environment={},
        log=tmp_path / "algo-1-ps.log",
        service=True,
    )
    worker = Command(
        argv=[sys.executable, "-c", "import time; time.sleep(1); print('done')"],
        cwd=tmp_path,
        environment={},
        log=tmp_path / "algo-1.log",
    )
    outcome = Processes([worker, service]).follow(
        interrupt_at=None, on_line=lambda *_: None, on_metrics=lambda _: None
    )
    assert outcome.codes == [0, 0]
    pid = int(pid_file.read_text())
    for _ in range(100):  # the guard's kill reaches it at once; the kernel reaps it a moment later
        if not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the parameter server {pid} outlived its worker")
