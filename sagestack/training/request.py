"""Spec -> CreateTrainingJob requests, one per instance candidate.

Pure functions over the spec and a RequestContext (the few values only a deployment knows: role,
bucket, key, image, code location). The same functions feed the CDK pipeline (with CloudFormation
tokens in the context), `sagestack plan`, and `sagestack local train`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from sagestack.core.catalog.instances import instance_type as catalog_instance
from sagestack.core.layout import S3Layout
from sagestack.core.names import Names
from sagestack.core.standins import STAND_IN_BUCKET, STAND_IN_SOURCE, stand_in_key_arn, stand_in_role_arn
from sagestack.training.models import DebuggerSpec, JobSpec, ProfilerSpec

CONTAINER_LOG_LEVEL = 20  # logging.INFO, as the SageMaker SDK sends it
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
# Where training_src/train.py looks for CheckpointConfig.LocalPath (set in the request's Environment).
CHECKPOINT_DIR_VARIABLE = "SAGESTACK_CHECKPOINT_DIR"
PROFILER_RULE_NAMES = {
    "profiler_report": "ProfilerReport",
    "cpu_bottleneck": "CPUBottleneck",
    "gpu_memory_increase": "GPUMemoryIncrease",
    "io_bottleneck": "IOBottleneck",
    "low_gpu_utilization": "LowGPUUtilization",
    "batch_size": "BatchSize",
    "step_outlier": "StepOutlier",
    "load_balancing": "LoadBalancing",
    "max_initialization_time": "MaxInitializationTime",
    "overall_system_usage": "OverallSystemUsage",
}


@dataclass(frozen=True)
class MlflowTarget:
    """Where a job logs its experiment: a SageMaker MLflow tracking server, and the prefix of the
    experiment names (Names.mlflow_experiment)."""

    arn: str
    experiment_prefix: str

    def experiment(self, job_key: str) -> str:
        return f"{self.experiment_prefix}-{job_key}"


@dataclass(frozen=True)
class RequestContext:
    """What only the deployment knows. Strings may be CloudFormation tokens."""

    region: str
    role_arn: str
    bucket: str
    kms_key_id: str
    source_s3_uri: str  # s3://…/sourcedir.tar.gz
    image_uri: str  # for this candidate
    rules_image_uri: str | None = None  # Debugger/Profiler rule evaluator for the region
    tags: tuple[tuple[str, str], ...] = ()
    mlflow: MlflowTarget | None = None  # tracking.mlflow: the job logs to this server


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


def processes_per_host(job: JobSpec, candidate: str) -> int:
    dist = job.distribution
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


def content_hash(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


_HASHED_WHEN_SET = ("training_plans",)


def job_hash(job: JobSpec, *, env: str, source_sha256: str, image_uris: dict[str, str]) -> str:
    """Content address of a job: its spec, its code and its images. 10 hex characters."""
    dumped = job.model_dump(mode="json")
    # The key was first named `model`; hashing it under that name keeps every job's name (and so
    # every job already run) across the rename.
    dumped["model"] = dumped.pop("sizing")
    # Keys added after job names were published enter the hash only when set: adding one to the
    # spec language renames no existing job.
    # When a job retrains is not what it computes: a schedule renames nothing.
    dumped.pop("schedule", None)
    for key in _HASHED_WHEN_SET:
        if not dumped.get(key):
            dumped.pop(key, None)
    payload = {"job": dumped, "env": env, "source": source_sha256, "images": image_uris}
    return content_hash(payload)[:10]


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
    it = catalog_instance(candidate)
    s3 = S3Layout(ctx.bucket)
    hyperparameters = {k: encode_hyperparameter(v) for k, v in sorted(script_arguments(job).items())}
    hyperparameters.update(
        {
            "sagemaker_program": encode_hyperparameter(job.entry_point),
            "sagemaker_submit_directory": encode_hyperparameter(ctx.source_s3_uri),
            "sagemaker_container_log_level": str(CONTAINER_LOG_LEVEL),
            "sagemaker_job_name": encode_hyperparameter(name),
            "sagemaker_region": encode_hyperparameter(ctx.region),
        }
    )
    hyperparameters.update(distribution_hyperparameters(job, candidate))

    algorithm: dict[str, Any] = {"TrainingImage": ctx.image_uri, "TrainingInputMode": job.input_mode}
    if job.metric_definitions:
        algorithm["MetricDefinitions"] = [{"Name": k, "Regex": v} for k, v in job.metric_definitions.items()]
        algorithm["EnableSageMakerMetricsTimeSeries"] = True

    resources: dict[str, Any] = {
        "InstanceType": candidate,
        "InstanceCount": job.instance_count,
        "VolumeSizeInGB": job.volume_size_gb,
    }
    if job.volume_kms and not it.has_instance_storage:
        # SageMaker refuses VolumeKmsKeyId on types with local NVMe storage (it encrypts those itself).
        resources["VolumeKmsKeyId"] = ctx.kms_key_id
    if job.keep_alive is not None:
        resources["KeepAlivePeriodInSeconds"] = job.keep_alive
    if candidate in job.training_plans:
        resources["TrainingPlanArn"] = job.training_plans[candidate]

    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": job.max_run}
    if job.use_spot_instances:
        stopping["MaxWaitTimeInSeconds"] = job.max_wait or job.max_run

    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": algorithm,
        "RoleArn": ctx.role_arn,
        "HyperParameters": hyperparameters,
        "OutputDataConfig": {"S3OutputPath": s3.output(job_key), "KmsKeyId": ctx.kms_key_id},
        "ResourceConfig": resources,
        "StoppingCondition": stopping,
        "EnableNetworkIsolation": job.network_isolation,
        "EnableInterContainerTrafficEncryption": (
            job.encrypt_inter_container_traffic
            if job.encrypt_inter_container_traffic is not None
            else job.instance_count > 1
        ),
        "EnableManagedSpotTraining": job.use_spot_instances,
        "RetryStrategy": {"MaximumRetryAttempts": job.retry_attempts},
    }
    channels = [_channel(name_, ch, s3) for name_, ch in job.channels.items()]
    if channels:
        request["InputDataConfig"] = channels
    if job.checkpoint is not None:
        request["CheckpointConfig"] = {
            "S3Uri": s3.checkpoints(job_key, digest),
            "LocalPath": job.checkpoint.local_path,
        }
    environment = dict(job.environment)
    if job.checkpoint is not None:
        # Nothing in the container says where CheckpointConfig.LocalPath is; training_src reads this
        # (the user's own Environment value wins).
        environment.setdefault(CHECKPOINT_DIR_VARIABLE, job.checkpoint.local_path)
    if ctx.mlflow is not None:
        # MlflowConfig makes the run SageMaker's; the variables tell training_src/train.py's MLflow
        # client where to log (the user's own Environment values win).
        environment.setdefault("MLFLOW_TRACKING_URI", ctx.mlflow.arn)
        environment.setdefault("MLFLOW_EXPERIMENT_NAME", ctx.mlflow.experiment(job_key))
    if efa_enabled(job, candidate):
        environment.setdefault("FI_PROVIDER", "efa")
        if it.gpudirect_rdma:
            environment.setdefault("FI_EFA_USE_DEVICE_RDMA", "1")
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
        request["DebugHookConfig"], request["DebugRuleConfigurations"] = _debugger(
            job.debugger, ctx, job_name=name, s3_output=s3.debugger(job_key)
        )
    if job.profiler is not None:
        profiler: dict[str, Any] = {
            "S3OutputPath": s3.profiler(job_key),
            "ProfilingIntervalInMilliseconds": job.profiler.system_interval_ms,
            "DisableProfiler": False,
        }
        parameters = _framework_profiling(job.profiler)
        if parameters:
            profiler["ProfilingParameters"] = parameters
        request["ProfilerConfig"] = profiler
        if job.profiler.rules:
            request["ProfilerRuleConfigurations"] = [
                _rule(PROFILER_RULE_NAMES[r], ctx) for r in job.profiler.rules
            ]
    if ctx.mlflow is not None:
        request["MlflowConfig"] = {
            "MlflowResourceArn": ctx.mlflow.arn,
            "MlflowExperimentName": ctx.mlflow.experiment(job_key),
            "MlflowRunName": name,
        }
    tags = [*ctx.tags, *sorted(job.tags.items()), ("sagestack:job", job_key), ("sagestack:spec-hash", digest)]
    request["Tags"] = [{"Key": k, "Value": v} for k, v in dict(tags).items()]
    return request


def _channel(name: str, ch: Any, s3: S3Layout) -> dict[str, Any]:
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


def _rule(name: str, ctx: RequestContext, parameters: dict[str, str] | None = None) -> dict[str, Any]:
    if ctx.rules_image_uri is None:
        raise ValueError("Debugger/Profiler rules need the region's rule evaluator image")
    return {
        "RuleConfigurationName": name,
        "RuleEvaluatorImage": ctx.rules_image_uri,
        "RuleParameters": parameters or {"rule_to_invoke": name},
    }


def _framework_profiling(profiler: ProfilerSpec) -> dict[str, str]:
    """ProfilingParameters as the SDK's FrameworkProfile writes them: one JSON string per kind."""
    out: dict[str, str] = {}
    if profiler.framework is not None:
        f = profiler.framework
        out["DetailedProfilingConfig"] = json.dumps({"StartStep": f.start_step, "NumSteps": f.num_steps})
    if profiler.dataloader is not None:
        d = profiler.dataloader
        out["DataloaderProfilingConfig"] = json.dumps(
            {"StartStep": d.start_step, "NumSteps": d.num_steps, "MetricsRegex": d.metrics_regex}
        )
    if profiler.python is not None:
        p = profiler.python
        config: dict[str, Any] = {
            "StartStep": p.start_step,
            "NumSteps": p.num_steps,
            "ProfilerName": p.profiler,
        }
        if p.profiler == "cprofile":
            config["cProfileTimer"] = p.cprofile_timer
        out["PythonProfilingConfig"] = json.dumps(config)
    return out


def _text(value: Any) -> str:
    # Rule, hook and collection parameters are strings; booleans as Python writes them ("True"),
    # which is how SDK users pass them and how smdebug parses them.
    return str(value)


def _debugger(
    debugger: DebuggerSpec, ctx: RequestContext, *, job_name: str, s3_output: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """DebugHookConfig and DebugRuleConfigurations as the SageMaker SDK renders Rule.sagemaker(...)
    rules with a DebuggerHookConfig: each rule's default parameters, the user's on top, its actions
    as action_json (StopTraining's prefix is the job's name); the collections every rule needs merged
    into the hook with the hook's own (the hook's parameters win for a collection both name)."""
    from sagestack.core.catalog.debugger import action_json, debugger_rules

    catalog = debugger_rules()
    rules: list[dict[str, Any]] = []
    collections: dict[str, dict[str, str]] = {}
    for r in debugger.rules:
        entry = catalog[r.rule]
        parameters = {**entry["parameters"], **{k: _text(v) for k, v in r.parameters.items()}}
        actions: list[tuple[str, dict[str, str]]] = []
        if debugger.stops_training(r):
            actions.append(("stoptraining", {"training_job_prefix": job_name}))
        actions += [("email", {"endpoint": e}) for e in r.email]
        actions += [("sms", {"endpoint": n}) for n in r.sms]
        if actions:
            parameters["action_json"] = action_json(actions)
        rules.append(_rule(entry["name"], ctx, parameters))
        for c in entry["collections"]:
            collections.setdefault(c["CollectionName"], dict(c.get("CollectionParameters", {})))
    hook: dict[str, Any] = {"S3OutputPath": s3_output}
    if debugger.hook is not None:
        for cname, cparams in debugger.hook.collections.items():
            collections[cname] = {**collections.get(cname, {}), **{k: _text(v) for k, v in cparams.items()}}
        if debugger.hook.parameters:
            hook["HookParameters"] = {k: _text(v) for k, v in debugger.hook.parameters.items()}
    if collections:
        hook["CollectionConfigurations"] = [
            {"CollectionName": c, **({"CollectionParameters": p} if p else {})}
            for c, p in collections.items()
        ]
    return hook, rules


def rules_image_uri(region: str) -> str:
    """The Debugger/Profiler rule evaluator image for a region (sagemaker-core's debugger table)."""
    from sagestack.core.catalog.images import debugger_rules_image_uri

    return debugger_rules_image_uri(region)


# ---------------------------------------------------------------- a job resolved for one environment


@dataclass(frozen=True)
class CandidatePlan:
    index: int
    instance_type: str
    name: str  # the TrainingJobName this candidate is created with
    request: dict[str, Any]
    processes_per_host: int
    quota_name: str


@dataclass(frozen=True)
class TrainingJobPlan:
    key: str
    job: JobSpec
    digest: str
    candidates: tuple[CandidatePlan, ...]
    # One job with ResourceConfig.InstancePreferences (SageMaker picks the first candidate with
    # capacity), when the candidates' requests differ in nothing else; else the pipeline's own loop.
    preferred: PreferredJob | None = None
    loop_reason: str | None = None  # why the candidates keep the pipeline's loop

    @property
    def capacity_path(self) -> str:
        """How the pipeline gets capacity, in a line (`plan` and `render` show it)."""
        return f"{self.capacity_kind}: {self.capacity_detail}"

    @property
    def capacity_kind(self) -> str:
        return "InstancePreferences" if self.preferred is not None else "candidate loop"

    @property
    def capacity_detail(self) -> str:
        if self.preferred is not None:
            return "one job; SageMaker launches the first candidate with capacity"
        return self.loop_reason or ""


@dataclass(frozen=True)
class PreferredJob:
    name: str
    request: dict[str, Any]  # every candidate as a preference; the pipeline sends the quota-filtered ones


PREFERENCES_MAX = 5  # ResourceConfig.InstancePreferences holds 1 to 5
# What may differ between candidates' requests on the preference path: the name, the instance type,
# and, for torch_distributed, the SDK's sagemaker_instance_type (the toolkit reads the running
# instance's type from resourceconfig.json, not from it). Anything else — MPI processes per host,
# SMDDP's instance type, EFA variables, a volume key on a type with instance storage — keeps the loop.
_RUNTIME_ADAPTED = ("sagemaker_job_name",)


def _comparable(job: JobSpec, request: dict[str, Any]) -> dict[str, Any]:
    r: dict[str, Any] = json.loads(json.dumps(request))
    r.pop("TrainingJobName", None)
    r.get("MlflowConfig", {}).pop("MlflowRunName", None)  # the job's name, as TrainingJobName
    r["ResourceConfig"].pop("InstanceType", None)
    r["ResourceConfig"].pop("TrainingPlanArn", None)  # carried per preference (TrainingPlanArns)
    hp = r.get("HyperParameters", {})
    for k in _RUNTIME_ADAPTED:
        hp.pop(k, None)
    if job.distribution is not None and job.distribution.kind == "torch_distributed":
        hp.pop("sagemaker_instance_type", None)
    return r


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b)):
            out += _differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [path]


def preference_refusal(job: JobSpec, candidates: list[CandidatePlan]) -> str | None:
    """Why these candidates cannot be one job with InstancePreferences (None: they can)."""
    if len(candidates) < 2:
        return "one candidate"
    if len(candidates) > PREFERENCES_MAX:
        return f"{len(candidates)} candidates; InstancePreferences holds {PREFERENCES_MAX}"
    if job.use_spot_instances:
        return "managed spot training, which InstancePreferences does not support"
    first = _comparable(job, candidates[0].request)
    for c in candidates[1:]:
        diff = _differences(first, _comparable(job, c.request))
        if diff:
            fields = ", ".join(dict.fromkeys(d.rsplit(".", 1)[-1] for d in diff))
            return f"{candidates[0].instance_type} and {c.instance_type} differ in {fields}"
    return None


def preferred_job(names: Names, key: str, digest: str, candidates: list[CandidatePlan]) -> PreferredJob:
    """The first candidate's request as one job over every candidate, in order of preference."""
    name = names.preference_job(key, digest)
    request = json.loads(json.dumps(candidates[0].request))
    request["TrainingJobName"] = name
    request["HyperParameters"]["sagemaker_job_name"] = encode_hyperparameter(name)
    request["HyperParameters"].pop("sagemaker_instance_type", None)
    if "MlflowConfig" in request:
        request["MlflowConfig"]["MlflowRunName"] = name
    request.pop("EnableManagedSpotTraining", None)  # exclusive with InstancePreferences
    resources = request["ResourceConfig"]
    count = resources.pop("InstanceCount")
    resources.pop("InstanceType")
    resources.pop("TrainingPlanArn", None)
    resources["InstancePreferences"] = [preference(c, count) for c in candidates]
    return PreferredJob(name=name, request=request)


def preference(candidate: CandidatePlan, count: int) -> dict[str, Any]:
    """One entry of InstancePreferences: the type, the count and the candidate's training plan."""
    entry: dict[str, Any] = {"InstanceType": candidate.instance_type, "InstanceCount": count}
    plan = candidate.request["ResourceConfig"].get("TrainingPlanArn")
    if plan:
        entry["TrainingPlanArns"] = [plan]
    return entry


def resolve_training_job(
    *,
    names: Names,
    key: str,
    job: JobSpec,
    source_sha256: str,
    image_uris: dict[str, str],
    context: Any,  # Callable[[str], RequestContext]: the context for one candidate
    validate: bool = True,
) -> TrainingJobPlan:
    """Every candidate's request. With validate=True each one is checked against botocore's
    SageMaker model (pass a context of concrete values: CloudFormation tokens are not ARNs)."""
    from sagestack.core.catalog.quotas import quota_name, training_usage
    from sagestack.core.catalog.service_model import validate_request

    digest = job_hash(job, env=names.env, source_sha256=source_sha256, image_uris=image_uris)
    candidates = []
    for i, itype in enumerate(job.instance_type):
        name = names.training_job(key, digest, i)
        request = render_training_request(
            job, job_key=key, candidate=itype, name=name, digest=digest, ctx=context(itype)
        )
        if validate:
            validate_request("CreateTrainingJob", request)
        candidates.append(
            CandidatePlan(
                index=i,
                instance_type=itype,
                name=name,
                request=request,
                processes_per_host=processes_per_host(job, itype),
                quota_name=quota_name(itype, training_usage(job.use_spot_instances)),
            )
        )
    refusal = preference_refusal(job, candidates)
    preferred = None
    if refusal is None:
        preferred = preferred_job(names, key, digest, candidates)
        if validate:
            validate_request("CreateTrainingJob", preferred.request)
    return TrainingJobPlan(
        key=key,
        job=job,
        digest=digest,
        candidates=tuple(candidates),
        preferred=preferred,
        loop_reason=refusal,
    )


def stand_in_context(
    *, region: str, account: str, image_uri: str, rules_image: str | None, tags: tuple[tuple[str, str], ...]
) -> RequestContext:
    """A request context of concrete stand-ins for what only a deployment knows (see STAND_INS)."""
    return RequestContext(
        region=region,
        role_arn=stand_in_role_arn(account),
        bucket=STAND_IN_BUCKET,
        kms_key_id=stand_in_key_arn(account, region),
        source_s3_uri=STAND_IN_SOURCE,
        image_uri=image_uri,
        rules_image_uri=rules_image,
        tags=tags,
    )


def rules_image_for(job: JobSpec, region: str) -> str | None:
    """The Debugger/Profiler rule evaluator image, when the job has rules to evaluate."""
    return rules_image_uri(region) if (job.debugger or (job.profiler and job.profiler.rules)) else None
