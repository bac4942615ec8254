"""A job's identity: the content hash in its name (spec + code + images).

Job names are published, so a JobSpec's identity is the set of field names its models had when names
were published (`PUBLISHED`), hashed by sagestack.core.identity: a field added since renames no job
unless a spec sets it.
"""

from __future__ import annotations

from sagestack.core.identity import Registry, content_hash, identity, published
from sagestack.core.model import VpcSpec
from sagestack.training import models as m
from sagestack.training.launch_contract import launch_contract

PUBLISHED: Registry = {
    m.JobSpec: published(
        "image",
        "source_dir",
        "entry_point",
        "instance_type",
        "instance_count",
        "volume_size_gb",
        "volume_kms",
        "max_run",
        "input_mode",
        "channels",
        "distribution",
        "use_spot_instances",
        "max_wait",
        "checkpoint",
        "hyperparameters",
        "metric_definitions",
        "debugger",
        "profiler",
        "tensorboard",
        "environment",
        "efa",
        "vpc",
        "network_isolation",
        "encrypt_inter_container_traffic",
        "retry_attempts",
        "keep_alive",
        "run_on_deploy",
        "tags",
        "sizing",
        # The key was first named `model`.
        hashed_as={"sizing": "model"},
        # When a job retrains is not what it computes: a schedule renames nothing; nor does where it
        # waits (a queue: the CreateTrainingJob body it submits is the same).
        not_identity=("schedule", "queue"),
    ),
    m.ChannelSpec: published(
        "file_system", "s3_uri", "key_prefix", "local_path", "input_mode", "content_type", "distribution"
    ),
    m.FileSystemSpec: published("id", "type", "directory_path", "access_mode"),
    m.Distribution: published("torch_distributed", "smddp", "mpi", "smp"),
    m.TorchDistributed: published(),
    m.SmddpDistribution: published("custom_mpi_options"),
    m.MpiDistribution: published("processes_per_host", "custom_mpi_options"),
    m.SmpDistribution: published("version", "parameters", "processes_per_host", "custom_mpi_options"),
    m.CheckpointSpec: published("every_steps", "keep_last", "local_path"),
    m.DebuggerSpec: published("rules", "stop_on_issue", "hook"),
    m.DebuggerRuleSpec: published("rule", "parameters", "stop_training", "email", "sms"),
    m.DebuggerHookSpec: published("parameters", "collections"),
    m.ProfilerSpec: published("system_interval_ms", "framework", "dataloader", "python", "rules"),
    m.FrameworkProfiling: published("start_step", "num_steps"),
    m.DataloaderProfiling: published("start_step", "num_steps", "metrics_regex"),
    m.PythonProfiling: published("start_step", "num_steps", "profiler", "cprofile_timer"),
    VpcSpec: published("subnets", "security_groups", "egress"),
    m.ModelSizing: published("parameters", "precision", "optimizer"),
}


def job_hash(job: m.JobSpec, *, env: str, source_sha256: str, image_uris: dict[str, str]) -> str:
    """Content address of a job: its spec's identity, its code and its images. 10 hex characters."""
    payload: dict[str, object] = {
        "job": identity(job, PUBLISHED),
        "env": env,
        "source": source_sha256,
        "images": image_uris,
        **launch_contract(job).identity(),
    }
    return content_hash(payload)[:10]
