"""Spec -> CreateTrainingJob request for one instance candidate.

Pure functions over the spec and a RequestContext (training.context: the deployment's values, the
code location, the image). The same functions feed the CDK pipeline (with CloudFormation tokens in
the context), `sagestack plan` and `render` (stand-ins), and `sagestack local train` (local values).
"""

from __future__ import annotations

import json
from typing import Any

from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.layout import S3Layout
from sagestack.training.context import RequestContext
from sagestack.training.debugger import debugger_configs, profiler_configs
from sagestack.training.launch_contract import LaunchContract, launch_contract
from sagestack.training.models import TENSORFLOW_KINDS, ChannelSpec, JobSpec

CONTAINER_LOG_LEVEL = 20  # logging.INFO, as the SageMaker SDK sends it
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
# Where training_src/train.py looks for CheckpointConfig.LocalPath (set in the request's Environment).
CHECKPOINT_DIR_VARIABLE = "SAGESTACK_CHECKPOINT_DIR"


def encode_hyperparameter(value: Any) -> str:
    """As the SageMaker SDK does: every value JSON-encoded (strings keep their quotes)."""
    return json.dumps(value)


def distribution_hyperparameters(job: JobSpec, candidate: str) -> dict[str, str]:
    """The SageMaker SDK's keys for the job's distribution on one instance candidate."""
    dist = job.distribution
    if dist is None:
        return {}
    itype = encode_hyperparameter(candidate)
    if dist.torch_distributed is not None:
        return {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": itype}
    if dist.smddp is not None:
        return {
            "sagemaker_distributed_dataparallel_enabled": "true",
            "sagemaker_instance_type": itype,
            "sagemaker_distributed_dataparallel_custom_mpi_options": encode_hyperparameter(
                dist.smddp.custom_mpi_options
            ),
        }
    if dist.multi_worker_mirrored_strategy is not None:
        # the SDK's {"multi_worker_mirrored_strategy": {"enabled": True}}
        return {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}
    if dist.parameter_server is not None:
        # the SDK's {"parameter_server": {"enabled": True}}
        return {"sagemaker_parameter_server_enabled": "true"}
    if dist.mpi is not None:
        per_host = dist.mpi.processes_per_host or catalog_instance(candidate).accelerators_per_host
        return {
            "sagemaker_mpi_enabled": "true",
            "sagemaker_mpi_num_of_processes_per_host": str(per_host),
            "sagemaker_mpi_custom_mpi_options": encode_hyperparameter(dist.mpi.custom_mpi_options),
        }
    assert dist.smp is not None
    smp = dist.smp
    if smp.version == 1:
        # the SDK's {"smdistributed": {"modelparallel": …}, "mpi": {"enabled": True, …}}
        per_host = smp.processes_per_host or catalog_instance(candidate).accelerators_per_host
        return {
            "sagemaker_mpi_enabled": "true",
            "sagemaker_mpi_num_of_processes_per_host": str(per_host),
            "sagemaker_mpi_custom_mpi_options": encode_hyperparameter(smp.custom_mpi_options),
            "mp_parameters": encode_hyperparameter(smp.parameters),
            "sagemaker_distributed_dataparallel_enabled": "false",
            "sagemaker_instance_type": itype,
        }
    # v2: {"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": …}}
    return {
        "sagemaker_torch_distributed_enabled": "true",
        "sagemaker_instance_type": itype,
        "sagemaker_distributed_dataparallel_enabled": "false",
        "mp_parameters": encode_hyperparameter(smp.parameters),
    }


def is_tensorflow(job: JobSpec, ctx: RequestContext) -> bool:
    """The job runs in the TensorFlow container: its image is a TensorFlow DLC, or its distribution is
    one only that container runs."""
    dist = job.distribution
    return ctx.framework == "tensorflow" or (dist is not None and dist.kind in TENSORFLOW_KINDS)


def tensorflow_model_dir(job: JobSpec, *, job_key: str, name: str, ctx: RequestContext) -> str | None:
    """The `model_dir` hyperparameter the SDK's TensorFlow estimator sends (tensorflow/estimator.py
    `_default_s3_path`): the job's own prefix of the output path, `/opt/ml/model` under MPI, the
    spec's value, or none when the spec says false."""
    if job.model_dir is False:
        return None
    if isinstance(job.model_dir, str):
        return job.model_dir
    if job.distribution is not None and job.distribution.mpi is not None:
        return "/opt/ml/model"
    return f"{ctx.deployment.s3.output(job_key)}{name}/model"


def processes_per_host(job: JobSpec, candidate: str) -> int:
    dist = job.distribution
    if dist is not None and dist.kind in TENSORFLOW_KINDS:
        return 1  # one process per host: the strategy drives every device of the host from it
    if dist is not None and dist.mpi is not None and dist.mpi.processes_per_host:
        return dist.mpi.processes_per_host
    if dist is not None and dist.smp is not None and dist.smp.version == 1 and dist.smp.processes_per_host:
        return dist.smp.processes_per_host
    return catalog_instance(candidate).accelerators_per_host


def efa_enabled(job: JobSpec, candidate: str) -> bool:
    it = catalog_instance(candidate)
    if job.efa is not None:
        return job.efa and it.efa
    return it.efa and job.instance_count > 1


def script_arguments(job: JobSpec) -> dict[str, Any]:
    """What the entry point receives as arguments: the job's hyperparameters, and the checkpoint
    interval training_src/train.py reads (the user's own values win)."""
    args: dict[str, Any] = {}
    if job.checkpoint is not None and job.checkpoint.every_steps is not None:
        args = {
            "checkpoint_every_steps": job.checkpoint.every_steps,
            "checkpoint_keep_last": job.checkpoint.keep_last,
        }
    args.update(job.hyperparameters)
    return args


def render_training_request(
    job: JobSpec,
    *,
    job_key: str,
    candidate: str,
    name: str,
    digest: str,
    ctx: RequestContext,
) -> dict[str, Any]:
    """A complete CreateTrainingJob request for one candidate. Unset options are omitted."""
    deployment = ctx.deployment
    s3 = deployment.s3
    contract = launch_contract(job)
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": contract.algorithm(_algorithm(job, ctx)),
        "RoleArn": deployment.role_arn,
        "HyperParameters": _hyperparameters(job, contract, job_key, candidate, name, ctx),
        "OutputDataConfig": contract.output(
            {"S3OutputPath": s3.output(job_key), "KmsKeyId": deployment.kms_key_id}
        ),
        "ResourceConfig": _resources(job, candidate, deployment.kms_key_id),
        "StoppingCondition": _stopping_condition(job),
        "EnableNetworkIsolation": job.network_isolation,
        "EnableInterContainerTrafficEncryption": (
            job.encrypt_inter_container_traffic
            if job.encrypt_inter_container_traffic is not None
            else job.instance_count > 1
        ),
        "EnableManagedSpotTraining": job.use_spot_instances,
        "RetryStrategy": {"MaximumRetryAttempts": job.retry_attempts},
    }
    if job.enable_infra_check is not None:
        request["InfraCheckConfig"] = {"EnableInfraCheck": job.enable_infra_check}
    channels = [_channel(channel, spec, s3) for channel, spec in job.channels.items()]
    channels += contract.channels(ctx)
    if channels:
        request["InputDataConfig"] = channels
    if job.checkpoint is not None:
        request["CheckpointConfig"] = {
            "S3Uri": s3.checkpoints(job_key, digest),
            "LocalPath": job.checkpoint.local_path,
        }
    environment = _environment(job, job_key, candidate, ctx)
    if environment:
        request["Environment"] = environment
    if job.vpc is not None:
        request["VpcConfig"] = {"SecurityGroupIds": job.vpc.security_groups, "Subnets": job.vpc.subnets}
    if job.tensorboard:
        request["TensorBoardOutputConfig"] = {
            "S3OutputPath": s3.tensorboard(job_key, digest),
            "LocalPath": TENSORBOARD_LOCAL_PATH,
        }
    if job.debugger is not None:
        request["DebugHookConfig"], request["DebugRuleConfigurations"] = debugger_configs(
            job.debugger, ctx, job_name=name, s3_output=s3.debugger(job_key)
        )
    if job.profiler is not None:
        request["ProfilerConfig"], rules = profiler_configs(job.profiler, ctx, s3_output=s3.profiler(job_key))
        if rules:
            request["ProfilerRuleConfigurations"] = rules
    if ctx.mlflow is not None:
        request["MlflowConfig"] = {
            "MlflowResourceArn": ctx.mlflow.arn,
            "MlflowExperimentName": ctx.mlflow.experiment(job_key),
            "MlflowRunName": name,
        }
    tags = [
        *deployment.tags,
        *sorted(job.tags.items()),
        ("sagestack:job", job_key),
        ("sagestack:spec-hash", digest),
    ]
    request["Tags"] = [{"Key": k, "Value": v} for k, v in dict(tags).items()]
    return request


def _hyperparameters(
    job: JobSpec, contract: LaunchContract, job_key: str, candidate: str, name: str, ctx: RequestContext
) -> dict[str, str]:
    """The script's arguments as the contract's SDK sends them, then (the toolkit contract) the
    SDK's own keys, each JSON-encoded as the SDK sends them."""
    hyperparameters = contract.hyperparameters(job, dict(sorted(script_arguments(job).items())))
    if not contract.sends_sdk_keys:
        return hyperparameters
    hyperparameters.update(
        {
            "sagemaker_program": encode_hyperparameter(job.entry_point),
            "sagemaker_submit_directory": encode_hyperparameter(ctx.source_s3_uri),
            "sagemaker_container_log_level": str(CONTAINER_LOG_LEVEL),
            "sagemaker_job_name": encode_hyperparameter(name),
            "sagemaker_region": encode_hyperparameter(ctx.deployment.region),
        }
    )
    hyperparameters.update(distribution_hyperparameters(job, candidate))
    model_dir = (
        tensorflow_model_dir(job, job_key=job_key, name=name, ctx=ctx) if is_tensorflow(job, ctx) else None
    )
    if model_dir is not None and "model_dir" not in job.hyperparameters:
        hyperparameters["model_dir"] = encode_hyperparameter(model_dir)
    return hyperparameters


def _algorithm(job: JobSpec, ctx: RequestContext) -> dict[str, Any]:
    algorithm: dict[str, Any] = {"TrainingImage": ctx.image_uri, "TrainingInputMode": job.input_mode}
    if job.metric_definitions:
        algorithm["MetricDefinitions"] = [{"Name": k, "Regex": v} for k, v in job.metric_definitions.items()]
        algorithm["EnableSageMakerMetricsTimeSeries"] = True
    return algorithm


def _resources(job: JobSpec, candidate: str, kms_key_id: str) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "InstanceType": candidate,
        "InstanceCount": job.instance_count,
        "VolumeSizeInGB": job.volume_size_gb,
    }
    if job.volume_kms and not catalog_instance(candidate).has_instance_storage:
        # SageMaker refuses VolumeKmsKeyId on types with local NVMe storage (it encrypts those itself).
        resources["VolumeKmsKeyId"] = kms_key_id
    if job.keep_alive is not None:
        resources["KeepAlivePeriodInSeconds"] = job.keep_alive
    if candidate in job.training_plans:
        resources["TrainingPlanArn"] = job.training_plans[candidate]
    return resources


def _stopping_condition(job: JobSpec) -> dict[str, Any]:
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": job.max_run}
    if job.spot_max_wait is not None:
        stopping["MaxWaitTimeInSeconds"] = job.spot_max_wait
    if job.max_pending_time is not None:
        stopping["MaxPendingTimeInSeconds"] = job.max_pending_time
    return stopping


def _environment(job: JobSpec, job_key: str, candidate: str, ctx: RequestContext) -> dict[str, str]:
    """The job's own variables, then what training_src and the libraries need (the user's own
    values win)."""
    environment = dict(job.environment)
    if job.checkpoint is not None:
        # Nothing in the container says where CheckpointConfig.LocalPath is; training_src reads this.
        environment.setdefault(CHECKPOINT_DIR_VARIABLE, job.checkpoint.local_path)
    if ctx.mlflow is not None:
        # MlflowConfig makes the run SageMaker's; the variables tell training_src/train.py's MLflow
        # client where to log.
        environment.setdefault("MLFLOW_TRACKING_URI", ctx.mlflow.arn)
        environment.setdefault("MLFLOW_EXPERIMENT_NAME", ctx.mlflow.experiment(job_key))
    if efa_enabled(job, candidate):
        environment.setdefault("FI_PROVIDER", "efa")
        if catalog_instance(candidate).gpudirect_rdma:
            environment.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
    return environment


def _channel(name: str, ch: ChannelSpec, s3: S3Layout) -> dict[str, Any]:
    if ch.file_system is not None:
        fs = ch.file_system
        source: dict[str, Any] = {
            "FileSystemDataSource": {
                "FileSystemId": fs.id,
                "FileSystemAccessMode": fs.access_mode,
                "FileSystemType": fs.type,
                "DirectoryPath": fs.directory_path,
            }
        }
    else:
        source = {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": ch.s3_uri or s3.channel(ch.key_prefix or name),
                "S3DataDistributionType": ch.distribution,
            }
        }
    out: dict[str, Any] = {"ChannelName": name, "DataSource": source}
    if ch.input_mode:
        out["InputMode"] = ch.input_mode
    if ch.content_type:
        out["ContentType"] = ch.content_type
    return out
