"""The SageMaker TensorFlow container's side of the training contract, as AWS's toolkit does it.

`sagemaker-tensorflow-training` 20.x (sagemaker_tensorflow_container/training.py, s3_utils.py) on
`sagemaker-training` 4.8.x (its pin: <=4.8.3): the same SM_* environment as the PyTorch container
(core/contract.py) without the 5.x `topology` key, TF_CONFIG per host for MultiWorkerMirroredStrategy
(one worker per host on port 8890) and for parameter servers (a `master` task on algo-1 and `worker`
tasks on the others on port 2222, a `ps` task on every host on port 2223, which the toolkit starts
itself beside the worker), `model_dir` appended with the job's name under tuning, and the variables
s3_utils exports. tests/conformance runs the toolkit itself on the same layout and compares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TENSORFLOW_FRAMEWORK_MODULE = "sagemaker_tensorflow_container.training:main"
MWMS_PORT = 8890  # _build_tf_config_for_mwms
WORKER_PORT = 2222  # _build_tf_config_for_ps: master and workers
PS_PORT = 2223  # _build_tf_config_for_ps: parameter servers
PS_FLAG = "sagemaker_parameter_server_enabled"
MWMS_FLAG = "sagemaker_multi_worker_mirrored_strategy_enabled"
SMDDP_FLAG = "sagemaker_distributed_dataparallel_enabled"
TUNING_OBJECTIVE = "_tuning_objective_metric"
# What the local run does differently, on purpose (on top of core.contract.LOCAL_SUBSTITUTIONS).
TF_LOCAL_SUBSTITUTIONS = {
    "TF_CONFIG": "each algo-N:port is 127.0.0.1 and a free port of its own (the hosts share one machine)",
}


def tf_config_for_mwms(hosts: list[str], current_host: str) -> dict[str, Any]:
    """TF_CONFIG for MultiWorkerMirroredStrategy: every host a worker."""
    return {
        "cluster": {"worker": [f"{h}:{MWMS_PORT}" for h in hosts]},
        "environment": "cloud",
        "task": {"index": hosts.index(current_host), "type": "worker"},
    }


def tf_config_for_ps(hosts: list[str], current_host: str, *, ps_task: bool = False) -> dict[str, Any]:
    """TF_CONFIG of a parameter-server cluster: algo-1 the master, the others workers, a parameter
    server on every host (more than one host; the toolkit enables it only then)."""
    workers = hosts[1:]
    cluster: dict[str, list[str]] = {"master": [f"{hosts[0]}:{WORKER_PORT}"]}
    if len(hosts) > 1:
        cluster["ps"] = [f"{h}:{PS_PORT}" for h in hosts]
    if workers:
        cluster["worker"] = [f"{h}:{WORKER_PORT}" for h in workers]
    if ps_task:
        task = {"index": hosts.index(current_host), "type": "ps"}
    elif current_host == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": workers.index(current_host), "type": "worker"}
    return {"cluster": cluster, "environment": "cloud", "task": task}


def readdressed(tf_config: Mapping[str, Any], addresses: Mapping[str, str]) -> dict[str, Any]:
    """The same TF_CONFIG with each `host:port` replaced by its local address."""
    cluster = {job: [addresses.get(a, a) for a in tasks] for job, tasks in tf_config["cluster"].items()}
    return {**tf_config, "cluster": cluster}


def cluster_addresses(tf_config: Mapping[str, Any]) -> list[str]:
    return [a for tasks in tf_config["cluster"].values() for a in tasks]


def tensorflow_exports(region: str) -> dict[str, str]:
    """What s3_utils.configure puts in the environment the script inherits. S3_REGION is the
    bucket's region for an s3:// model_dir, else the job's: the job's either way here, as every
    bucket sagestack names lies in the job's region."""
    return {"S3_REGION": region, "TF_CPP_MIN_LOG_LEVEL": "1", "S3_USE_HTTPS": "1"}


def model_dir_under_tuning(hyperparameters: Mapping[str, Any], user: dict[str, Any], job_name: str) -> None:
    """training.main: a tuning trial's model_dir gets `/<job name>/model` appended (unless it is a
    container path), so trials do not write over each other."""
    if TUNING_OBJECTIVE not in hyperparameters:
        return
    model_dir = user.get("model_dir")
    if isinstance(model_dir, str) and model_dir.startswith("/opt/ml"):
        return
    user["model_dir"] = f"{model_dir}/{job_name}/model"
