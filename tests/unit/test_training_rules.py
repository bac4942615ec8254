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


def test_spot_default_max_wait(project):
    # Spot without max_wait: MaxWaitTimeInSeconds is max_run doubled, at most 28 days; the spec is told
    # which wait was chosen and how to choose its own.
    body = "instance_type: ml.g5.xlarge\nuse_spot_instances: true\ncheckpoint: {every_steps: 100}\n"
    assert findings(project, "spot-default-max-wait", job(body + "max_run: 2h")) == [
        "jobs.big.use_spot_instances: spot without max_wait: sagestack renders MaxWaitTimeInSeconds 14400, "
        "max_run 2h doubled, so the job may wait up to 2h for spot capacity; say so with max_wait: 4h (or "
        "the time you choose, >= max_run)"
    ]
    assert findings(project, "spot-default-max-wait", job(body + "max_run: 1h30m\nmax_wait: 1h30m")) == []
    assert findings(project, "spot-default-max-wait", job(body + "max_run: 20d")) == [
        "jobs.big.use_spot_instances: spot without max_wait: sagestack renders MaxWaitTimeInSeconds 2419200, "
        "max_run 20d doubled (capped at 28 days), so the job may wait up to 8d for spot capacity; say so "
        "with max_wait: 28d (or the time you choose, >= max_run)"
    ]
    assert findings(project, "spot-default-max-wait", job(body + "max_run: 28d")) == [
        "jobs.big.use_spot_instances: spot without max_wait, and max_run is already 28d, SageMaker's "
        "longest: the job has no time to wait for spot capacity or across interruptions; lower max_run "
        "and set max_wait above it"
    ]
    on_demand = "instance_type: ml.g5.xlarge\nmax_run: 2h"
    assert findings(project, "spot-default-max-wait", job(on_demand)) == []


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
    assert findings(project, "dataloader-workers-per-cpu", single.replace("16}", "48}")) == []
    assert findings(project, "dataloader-workers-per-cpu", single.replace("16}", "49}")) == [
        "jobs.big.hyperparameters.num_workers: num_workers=49 data-loader workers per process, but "
        "ml.g5.12xlarge has 48 vCPUs for 1 training process(es) (48 each): the extra workers contend for "
        "the same cores and slow every step; use at most 48"
    ]


def test_dataloader_workers_in_the_spellings_the_book_and_the_examples_use(project):
    # The book's chapter 7 (and the SageMaker profiler examples) pass num-data-workers; on ml.g4dn.xlarge
    # (4 vCPUs, one process) 8 workers contend for 4 cores, whatever the spelling or quoting.
    rule = "dataloader-workers-per-cpu"
    for key, value in [
        ("num-data-workers", "8"),
        ("num_data_workers", "8"),
        ("dataloader-num-workers", "8"),
        ("dataloader_num_workers", '"8"'),
        ("workers", "8"),
        ("--num-workers", "8"),
        ("workers_per_gpu", "8"),
    ]:
        spec = job(f"instance_type: ml.g4dn.xlarge\nhyperparameters: {{'{key}': {value}, epochs: 3}}")
        assert findings(project, rule, spec) == [
            f"jobs.big.hyperparameters.{key}: {key}=8 data-loader workers per process, but ml.g4dn.xlarge has "
            "4 vCPUs for 1 training process(es) (4 each): the extra workers contend for the same cores and "
            "slow every step; use at most 4"
        ], key
        within = spec.replace(f": {value},", ": 4,")
        assert findings(project, rule, within) == [], key
    assert (
        findings(project, rule, job("instance_type: ml.g4dn.xlarge\nhyperparameters: {workers: auto}")) == []
    )


def test_hyperparameter_names_have_one_normal_form():
    from sagestack.training.hp_names import DATALOADER_WORKERS, key_named, keys_named, normalized

    assert normalized("--Num-Data-Workers") == "num_data_workers" == normalized("num_data_workers")
    hps = {"lr": 0.1, "num-data-workers": 4, "num_workers": 2}
    assert list(keys_named(hps, DATALOADER_WORKERS)) == ["num-data-workers", "num_workers"]
    assert key_named(hps, ("batch_size",)) is None


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


def test_smp_v2_instance_types(project):
    ok = job(
        "instance_type: ml.p4d.24xlarge\ninstance_count: 2\ndistribution: {smp: {parameters: {hybrid_shard_degree: 16}}}"
    )
    assert findings(project, "smp-v2-instance-types", ok) == []
    bad = ok.replace("ml.p4d.24xlarge", "ml.p3.16xlarge")
    assert findings(project, "smp-v2-instance-types", bad) == [
        "jobs.big.instance_type.0: SMP v2 (distribution: smp) does not run on ml.p3.16xlarge; it needs one of "
        "ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge, ml.p5e.48xlarge — or, for sharded data parallelism "
        "on other GPUs, torch_distributed with PyTorch FSDP"
    ]
    # SMP v1 (MPI) is not held to v2's list
    v1 = bad.replace("{smp: {", "{smp: {version: 1, ").replace("hybrid_shard_degree: 16", "partitions: 2")
    assert findings(project, "smp-v2-instance-types", v1) == []


def test_smp_version_parameters(project):
    v2 = "instance_type: ml.p4d.24xlarge\ninstance_count: 2\ndistribution: {smp: {parameters: {hybrid_shard_degree: 8}}}"
    assert findings(project, "smp-version-parameters", job(v2)) == []
    mixed = job(v2.replace("hybrid_shard_degree: 8", "partitions: 2, microbatches: 4"))
    assert findings(project, "smp-version-parameters", mixed) == [
        "jobs.big.distribution.smp.parameters.partitions: partitions, microbatches: SMP v1 parameters (pipeline "
        "parallelism over MPI); SMP v2 is built on PyTorch FSDP and takes hybrid_shard_degree, "
        "tensor_parallel_degree, sm_activation_offloading, … — rewrite for v2, or set version: 1 (archived, "
        "PyTorch <= 2.0)"
    ]
    mpi_option = job(v2.replace("{smp: {", "{smp: {processes_per_host: 8, "))
    assert findings(project, "smp-version-parameters", mpi_option) == [
        "jobs.big.distribution.smp.processes_per_host: processes_per_host configures SMP v1's mpirun; SMP v2 is "
        "launched by torchrun with one process per GPU: drop it"
    ]
    # v1 on the example's PyTorch 2.5 image: archived, refused with the way forward
    v1 = job(v2.replace("{smp: {", "{smp: {version: 1, ").replace("hybrid_shard_degree: 8", "partitions: 2"))
    assert findings(project, "smp-version-parameters", v1) == [
        "jobs.big.distribution.smp.version: SMP v1 is archived: its last release (1.15) supports PyTorch up to "
        "2.0, and images.train is PyTorch 2.5; use version: 2 (the SMP v2 container), or a PyTorch <= 2.0 image"
    ]
    assert findings(project, "smp-version-parameters", v1.replace('version: "2.5"', 'version: "2.0"')) == []


def test_training_compiler(project):
    assert (
        findings(
            project,
            "training-compiler",
            job("instance_type: ml.g5.2xlarge\nhyperparameters: {compile: true}"),
        )
        == []
    )
    bad = job("instance_type: ml.g5.2xlarge\nhyperparameters: {sagemaker_training_compiler_enabled: true}")
    (message,) = findings(project, "training-compiler", bad)
    assert message.startswith("jobs.big.hyperparameters.sagemaker_training_compiler_enabled: ")
    assert "no new releases" in message and "{compile: true}" in message


def test_training_compiler_key_is_explained_not_unknown(project):
    errors = project.spec(job("instance_type: ml.g5.2xlarge\ncompiler_config: {enabled: true}")).errors()
    assert errors == [
        "config/sagestack.yaml:9:5: jobs.big.compiler_config: SageMaker Training Compiler gets no new releases "
        "(AWS); use PyTorch's own compiler instead: hyperparameters: {compile: true} (torch.compile in "
        "training_src), with a current PyTorch image"
    ]


def test_framework_profiling_pytorch2(project):
    ok = job("instance_type: ml.g5.2xlarge\nprofiler: {system_interval_ms: 100, rules: [profiler_report]}")
    assert findings(project, "framework-profiling-pytorch2", ok) == []
    bad = job("instance_type: ml.g5.2xlarge\nprofiler: {framework: {}, dataloader: {num_steps: 3}}")
    found = findings(project, "framework-profiling-pytorch2", bad)
    assert [f.split(":")[0] for f in found] == ["jobs.big.profiler.framework", "jobs.big.profiler.dataloader"]
    assert "deprecated and not collected for PyTorch 2.0 and later (images.train is PyTorch 2.5)" in found[0]
    assert "hyperparameters: {profile: true}" in found[0]
    # PyTorch 1.13 still has them
    assert (
        findings(project, "framework-profiling-pytorch2", bad.replace('version: "2.5"', 'version: "1.13"'))
        == []
    )


def test_retired_instance_type(project):
    ok = job("instance_type: [ml.g4dn.xlarge]")
    assert findings(project, "retired-instance-type", ok) == []
    bad = job("instance_type: [ml.g4dn.xlarge, ml.p2.xlarge, ml.p2.16xlarge]")
    assert findings(project, "retired-instance-type", bad) == [
        "jobs.big.instance_type.1: ml.p2.xlarge is retired for training: K80 GPUs: the PyTorch (>= 1.13) and "
        "TensorFlow (>= 2.12) containers no longer run on P2; the closest current type is ml.g4dn.xlarge (1x T4)",
        "jobs.big.instance_type.2: ml.p2.16xlarge is retired for training: K80 GPUs: the PyTorch (>= 1.13) and "
        "TensorFlow (>= 2.12) containers no longer run on P2; the closest current type is ml.g5.48xlarge (8x A10G)",
    ]


def test_retired_instance_type_is_reported_on_the_instance_type_key_only(project):
    errors = project.spec(job("instance_type: [ml.p2.xlarge]")).errors()
    assert len(errors) == 1 and errors[0].startswith(
        "config/sagestack.yaml:8:21: jobs.big.instance_type[0]: "
    )


def test_debugger_rule_entries_report_their_own_mistakes(project):
    errors = project.spec(
        job(
            "instance_type: ml.g5.2xlarge\n"
            "debugger:\n"
            "  rules:\n"
            "    - vanishing_gradients\n"
            "    - {rule: overfit, email: [not-an-email], sms: ['12345']}"
        )
    ).errors()
    assert errors[0].startswith(
        "config/sagestack.yaml:11:11: jobs.big.debugger.rules[0].rule: 'vanishing_gradients' is not allowed;"
    )
    assert errors[0].endswith("did you mean 'vanishing_gradient'?")
    assert errors[1:] == [
        "config/sagestack.yaml:12:35: jobs.big.debugger.rules[1].email[0]: 'not-an-email' is not an email "
        "address; write e.g. ml-team@example.com",
        "config/sagestack.yaml:12:56: jobs.big.debugger.rules[1].sms[0]: '12345' is not an E.164 phone number; "
        "write e.g. '+14155550100' (quoted: YAML reads a bare + number as a number)",
    ]


FSX = "{file_system: {id: fs-0123456789abcdef0, type: FSxLustre, directory_path: /abcdefgh/digits}}"
VPC = "vpc: {subnets: [subnet-0123456789abcdef0], security_groups: [sg-0123456789abcdef0]}"


def test_file_system_channel(project):
    ok = job(f"instance_type: ml.g5.2xlarge\nchannels: {{train: {FSX}}}\n{VPC}")
    assert findings(project, "file-system-channel", ok) == []
    no_vpc = job(f"instance_type: ml.g5.2xlarge\nchannels: {{train: {FSX}}}")
    (message,) = findings(project, "file-system-channel", no_vpc)
    assert message.startswith(
        "jobs.big.channels.train.file_system: the job reaches FSx for Lustre file system"
    )
    assert "add vpc:" in message
    streamed = job(
        "instance_type: ml.g5.2xlarge\ninput_mode: FastFile\n"
        f"channels: {{train: {{file_system: {{id: fs-0123456789abcdef0, type: EFS, directory_path: /d}}, "
        f"key_prefix: digits}}}}\n{VPC}"
    )
    assert findings(project, "file-system-channel", streamed) == [
        "jobs.big.channels.train.input_mode: EFS channels are mounted: input mode File only, not FastFile",
        "jobs.big.channels.train: a file-system channel reads from fs-0123456789abcdef0; drop key_prefix (S3 settings)",
    ]


def test_a_file_system_id_and_path_are_checked_by_the_schema(project):
    project.spec(
        job(
            "instance_type: ml.g5.2xlarge\nchannels: {train: {file_system: {id: fsx-1, type: FSxLustre, directory_path: data}}}"
        )
    )
    project.env("dev")
    errors = project.errors("dev")
    assert any("channels.train.file_system.id" in e and "fs-" in e for e in errors), errors
    assert any("channels.train.file_system.directory_path" in e for e in errors), errors


PLAN = "arn:aws:sagemaker:us-east-1:111111111111:training-plan/p5-week"


def test_training_plan(project):
    ok = job(f"instance_type: [ml.p5.48xlarge, ml.p4d.24xlarge]\ntraining_plans: {{ml.p5.48xlarge: {PLAN}}}")
    assert findings(project, "training-plan", ok) == []
    bad = job(
        "instance_type: [ml.p5.48xlarge]\nuse_spot_instances: true\ncheckpoint: {every_steps: 100}\n"
        "training_plans: {ml.p5.48xlargee: arn:aws:sagemaker:us-west-2:111111111111:training-plan/x}"
    )
    assert findings(project, "training-plan", bad) == [
        "jobs.big.training_plans.ml.p5.48xlargee: 'ml.p5.48xlargee' is not a candidate of this job; did you mean "
        "'ml.p5.48xlarge'? (candidates: ml.p5.48xlarge); a plan reserves one instance type",
        "jobs.big.training_plans.ml.p5.48xlargee: the plan is in us-west-2; jobs run in us-east-1",
        "jobs.big.use_spot_instances: a training plan is reserved on-demand capacity: managed spot does not run "
        "on it; set use_spot_instances: false or drop training_plans",
    ]


def test_schedule_expressions_and_time_zones(project):
    def errors(schedule: str) -> list[str]:
        project.spec(job(f"instance_type: ml.m5.xlarge\nschedule: {schedule}"))
        return project.errors()

    for good in (
        "{expression: 'cron(0 3 ? * MON *)', timezone: Europe/Berlin}",
        "{expression: 'rate(1 day)'}",
        "{expression: 'rate(12 hours)', window: 30m, enabled: false}",
        "{expression: 'at(2027-01-01T03:00:00)'}",
    ):
        project.spec(job(f"instance_type: ml.m5.xlarge\nschedule: {good}"))
        assert project.load().spec.jobs["big"].schedule is not None, good
    (bad,) = errors("{expression: 'cron(0 3 * * MON)'}")
    assert "config/sagestack.yaml:" in bad and "jobs.big.schedule" in bad
    assert "'cron(0 3 * * MON)' is not a schedule expression" in bad and "six fields" in bad
    (plural,) = errors("{expression: 'rate(1 days)'}")
    assert "singular for 1" in plural
    (zone,) = errors("{expression: 'rate(7 days)', timezone: Europe/Berln}")
    assert "'Europe/Berln' is not an IANA time zone; did you mean 'Europe/Berlin'?" in zone


def test_a_schedule_renames_no_job(project):
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment

    project.spec(job("instance_type: ml.m5.xlarge")).env("dev")
    before = render_environment(resolve_environment(project.load("dev")), project.root).jobs["big"]
    project.spec(job("instance_type: ml.m5.xlarge\nschedule: {expression: 'rate(7 days)'}"))
    after = render_environment(resolve_environment(project.load("dev")), project.root).jobs["big"]
    assert after.digest == before.digest and after.candidates[0].request == before.candidates[0].request
