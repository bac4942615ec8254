"""Training-job rules, each with a spec that passes and one that fails (message asserted)."""

from __future__ import annotations

from tests.unit.test_rules import findings

BASE = """\
project: digits
region: us-east-1
images:
  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
jobs:
  big:
    image: train
"""


def job(body: str) -> str:
    return BASE + "".join(f"    {line}\n" for line in body.strip().splitlines())


def test_smddp_instance_types(project):
    ok = job("instance_type: ml.p4d.24xlarge\ninstance_count: 2\ndistribution: {smddp: {}}")
    assert findings(project, "smddp-instance-types", ok) == []
    bad = job(
        "instance_type: [ml.p4d.24xlarge, ml.g5.48xlarge]\ninstance_count: 2\ndistribution: {smddp: {}}"
    )
    assert findings(project, "smddp-instance-types", bad) == [
        "jobs.big.instance_type.1: SMDDP (distribution: smddp) does not run on ml.g5.48xlarge; it needs one of "
        "ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p3dn.24xlarge, or use distribution: {torch_distributed: {}} (NCCL)"
    ]


def test_trainium_torch_distributed(project):
    ok = job("instance_type: ml.trn1.32xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}")
    assert findings(project, "trainium-torch-distributed", ok) == []
    bad = job("instance_type: ml.trn1.32xlarge\ninstance_count: 2\ndistribution: {mpi: {}}")
    assert findings(project, "trainium-torch-distributed", bad) == [
        "jobs.big.distribution: ml.trn1.32xlarge (Trainium) runs distributed training only with torch_distributed "
        "(torchrun over Neuron), not mpi; write distribution: {torch_distributed: {}}"
    ]


def test_p5_smddp_needs_torch_distributed(project):
    ok = job("instance_type: ml.p5.48xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}")
    assert findings(project, "p5-smddp-needs-torch-distributed", ok) == []
    bad = job("instance_type: ml.p5.48xlarge\ninstance_count: 2\ndistribution: {smddp: {}}")
    assert findings(project, "p5-smddp-needs-torch-distributed", bad) == [
        "jobs.big.distribution: on ml.p5.48xlarge, SMDDP runs under torchrun: use distribution: "
        "{torch_distributed: {}} and initialise the process group with backend 'smddp' in the script"
    ]
    # …and the SMDDP instance rule leaves p5 to this rule rather than report it twice.
    assert findings(project, "smddp-instance-types", bad) == []


def test_mpi_processes_per_host(project):
    ok = job("instance_type: ml.p3.16xlarge\ninstance_count: 2\ndistribution: {mpi: {processes_per_host: 8}}")
    assert findings(project, "mpi-processes-per-host", ok) == []
    bad = job("instance_type: ml.p3.8xlarge\ninstance_count: 2\ndistribution: {mpi: {processes_per_host: 8}}")
    assert findings(project, "mpi-processes-per-host", bad) == [
        "jobs.big.distribution.mpi.processes_per_host: 8 processes per host, but ml.p3.8xlarge has 4 "
        "accelerator(s): processes would share a device; use at most 4"
    ]


def test_efa_multi_node(project):
    ok = job("instance_type: ml.p4d.24xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}")
    assert findings(project, "efa-multi-node", ok) == []
    bad = job(
        "instance_type: ml.p4d.24xlarge\ninstance_count: 2\nefa: false\ndistribution: {torch_distributed: {}}"
    )
    assert findings(project, "efa-multi-node", bad) == [
        "jobs.big.efa: 2x ml.p4d.24xlarge with efa: false: gradients cross the network over TCP; EFA (OS-bypass, "
        "up to the instance's full bandwidth) is usually much faster"
    ]


def test_distribution_on_single_cpu(project):
    ok = job("instance_type: ml.m5.xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}")
    assert findings(project, "distribution-on-single-cpu", ok) == []
    bad = job("instance_type: ml.m5.xlarge\ndistribution: {torch_distributed: {}}")
    assert findings(project, "distribution-on-single-cpu", bad) == [
        "jobs.big.distribution: distribution on a single ml.m5.xlarge (no accelerator) starts one process; drop "
        "it, or use more instances or an accelerated type"
    ]


SPOT = "instance_type: ml.g5.xlarge\nuse_spot_instances: true\ncheckpoint: {every_steps: 100}\nmax_run: 4h\n"


def test_spot_max_wait(project):
    assert findings(project, "spot-max-wait", job(SPOT + "max_wait: 8h")) == []
    assert findings(project, "spot-max-wait", job(SPOT + "max_wait: 2h")) == [
        "jobs.big.max_wait: max_wait (7200 s) is shorter than max_run (14400 s); SageMaker requires max_wait >= "
        "max_run (it includes the time spent waiting for spot capacity)"
    ]
    assert findings(project, "spot-max-wait", job("instance_type: ml.g5.xlarge\nmax_wait: 8h")) == [
        "jobs.big.max_wait: max_wait applies only to spot training (use_spot_instances: true)"
    ]


def test_spot_checkpoint(project):
    assert findings(project, "spot-checkpoint", job(SPOT)) == []
    no_checkpoint = job("instance_type: ml.g5.xlarge\nuse_spot_instances: true")
    assert findings(project, "spot-checkpoint", no_checkpoint) == [
        "jobs.big.use_spot_instances: spot training without a checkpoint location loses all progress on every "
        "interruption; add checkpoint: {every_steps: N}"
    ]
    no_interval = job("instance_type: ml.g5.xlarge\nuse_spot_instances: true\ncheckpoint: {keep_last: 2}")
    assert findings(project, "spot-checkpoint", no_interval) == [
        "jobs.big.checkpoint: spot training needs checkpoint.every_steps, so the script saves progress it can "
        "resume from"
    ]


def test_warm_pool_not_with_spot(project):
    assert (
        findings(project, "warm-pool-not-with-spot", job("instance_type: ml.g5.xlarge\nkeep_alive: 10m"))
        == []
    )
    assert findings(project, "warm-pool-not-with-spot", job(SPOT + "keep_alive: 10m")) == [
        "jobs.big.keep_alive: SageMaker warm pools do not support managed spot training"
    ]


def test_hyperparameter_limits(project):
    few = "instance_type: ml.g5.xlarge\nhyperparameters: {" + ", ".join(f"p{i}: {i}" for i in range(89)) + "}"
    assert findings(project, "hyperparameter-limits", job(few)) == []
    many = (
        "instance_type: ml.g5.xlarge\nhyperparameters: {" + ", ".join(f"p{i}: {i}" for i in range(90)) + "}"
    )
    assert findings(project, "hyperparameter-limits", job(many)) == [
        "jobs.big.hyperparameters: 90 hyperparameters; SageMaker allows 100 and sagestack adds up to 11 "
        "(sagemaker_program, distribution keys …): at most 89"
    ]
    long_value = "instance_type: ml.g5.xlarge\nhyperparameters: {prompt: " + "x" * 2500 + "}"
    assert findings(project, "hyperparameter-limits", job(long_value)) == [
        "jobs.big.hyperparameters.prompt: value is 2502 characters once encoded; at most 2500 (pass large "
        "settings as a file in the source directory or a channel)"
    ]


def test_metric_regex(project):
    ok = job("instance_type: ml.g5.xlarge\nmetric_definitions: {val_accuracy: 'val_accuracy=([0-9.]+)'}")
    assert findings(project, "metric-regex", ok) == []
    no_group = job("instance_type: ml.g5.xlarge\nmetric_definitions: {val_accuracy: 'val_accuracy=[0-9.]+'}")
    assert findings(project, "metric-regex", no_group) == [
        "jobs.big.metric_definitions.val_accuracy: regex 'val_accuracy=[0-9.]+' has no capture group; SageMaker "
        "records the first group's match, e.g. 'val_accuracy=([0-9.]+)'"
    ]
    broken = job("instance_type: ml.g5.xlarge\nmetric_definitions: {loss: 'loss=([0-9.]+'}")
    (msg,) = findings(project, "metric-regex", broken)
    assert msg.startswith(
        "jobs.big.metric_definitions.loss: regex 'loss=([0-9.]+' does not compile: missing )"
    )


def test_prefer_one_multi_accelerator_instance(project):
    ok = job("instance_type: ml.g5.12xlarge\ninstance_count: 1")
    assert findings(project, "prefer-one-multi-accelerator-instance", ok) == []
    bad = job("instance_type: ml.g5.2xlarge\ninstance_count: 4\ndistribution: {torch_distributed: {}}")
    assert findings(project, "prefer-one-multi-accelerator-instance", bad) == [
        "jobs.big.instance_type.0: 4x ml.g5.2xlarge puts one A10G on each host, so every gradient exchange "
        "crosses the network; 1x ml.g5.12xlarge has the same 4 A10Gs on one host (NVLink/PCIe) and is usually "
        "faster"
    ]


def test_prefer_one_instance_with_at_least_n_accelerators(project):
    # three single-GPU hosts: no g5 has exactly 3 GPUs, the 4-GPU g5.12xlarge has room for them
    bad = job("instance_type: ml.g5.2xlarge\ninstance_count: 3\ndistribution: {torch_distributed: {}}")
    assert findings(project, "prefer-one-multi-accelerator-instance", bad) == [
        "jobs.big.instance_type.0: 3x ml.g5.2xlarge puts one A10G on each host, so every gradient exchange "
        "crosses the network; 1x ml.g5.12xlarge has 4 A10Gs (room for your 3) on one host (NVLink/PCIe) and "
        "is usually faster"
    ]
    # more hosts than any g5 has GPUs: nothing to suggest
    ok = job("instance_type: ml.g5.2xlarge\ninstance_count: 9\ndistribution: {torch_distributed: {}}")
    assert findings(project, "prefer-one-multi-accelerator-instance", ok) == []


def test_multi_host_without_distribution(project):
    ok = job("instance_type: ml.g5.12xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}")
    assert findings(project, "multi-host-without-distribution", ok) == []
    assert findings(project, "multi-host-without-distribution", job("instance_type: ml.g5.12xlarge")) == []
    bad = job("instance_type: ml.g5.12xlarge\ninstance_count: 2")
    assert findings(project, "multi-host-without-distribution", bad) == [
        "jobs.big.instance_count: 2 hosts and no distribution: the container runs the script 2 times "
        "independently (each host trains its own model, on its own share of a sharded channel); add "
        "distribution: {torch_distributed: {}} to train one model across them, or use instance_count: 1"
    ]


def test_dataloader_workers_per_cpu(project):
    # ml.g5.12xlarge: 48 vCPUs, 4 GPUs -> torchrun starts 4 processes, 12 vCPUs each
    ok = job(
        "instance_type: ml.g5.12xlarge\ndistribution: {torch_distributed: {}}\nhyperparameters: {num_workers: 12}"
    )
    assert findings(project, "dataloader-workers-per-cpu", ok) == []
    bad = ok.replace("num_workers: 12", "num_workers: 16")
    assert findings(project, "dataloader-workers-per-cpu", bad) == [
        "jobs.big.hyperparameters.num_workers: num_workers=16 data-loader workers per process, but "
        "ml.g5.12xlarge has 48 vCPUs for 4 training process(es) (12 each): the extra workers contend for "
        "the same cores and slow every step; use at most 12"
    ]
    # without a distribution the container starts one process per host: all 48 vCPUs are its
    single = job("instance_type: ml.g5.12xlarge\nhyperparameters: {num_workers: 16}")
    assert findings(project, "dataloader-workers-per-cpu", single) == []


def test_requirements_need_network(project):
    project.write("training_src/requirements.txt", "scikit-learn==1.9.1\n")
    isolated = job("instance_type: ml.g5.2xlarge\nnetwork_isolation: true")
    assert findings(project, "requirements-need-network", isolated) == [
        "jobs.big.network_isolation: training_src/requirements.txt is installed with pip from the network "
        "before the script starts, and network_isolation: true gives the container no network: the job would "
        "fail at that step. Vendor the wheels into the source dir (pip download -r requirements.txt -d "
        "training_src/wheels, then start requirements.txt with --no-index --find-links wheels), or bake them "
        "into a dockerfile: image"
    ]
    closed = job(
        "instance_type: ml.g5.2xlarge\nvpc: {subnets: [subnet-1], security_groups: [sg-1], egress: false}"
    )
    (message,) = findings(project, "requirements-need-network", closed)
    assert message.startswith("jobs.big.vpc.egress: ") and "(vpc.egress: false)" in message
    open_vpc = job("instance_type: ml.g5.2xlarge\nvpc: {subnets: [subnet-1], security_groups: [sg-1]}")
    assert findings(project, "requirements-need-network", open_vpc) == []
    # vendored wheels install without the network
    project.write("training_src/requirements.txt", "--no-index --find-links wheels\nscikit-learn==1.9.1\n")
    assert findings(project, "requirements-need-network", isolated) == []
    (project.root / "training_src/requirements.txt").unlink()
    assert findings(project, "requirements-need-network", isolated) == []


def test_warnings_do_not_fail_loading_and_are_kept(project):
    loaded = project.spec(
        job("instance_type: ml.g5.2xlarge\ninstance_count: 4\ndistribution: {torch_distributed: {}}")
    ).load()
    assert [w.rule for w in loaded.warnings] == ["prefer-one-multi-accelerator-instance"]
    assert (
        loaded.warnings[0]
        .format()
        .startswith("config/sagestack.yaml:8:20: warning: jobs.big.instance_type[0]")
    )
