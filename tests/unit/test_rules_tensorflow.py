"""The TensorFlow distribution rules and the job rules made right for them: each with a spec that
passes and one that fails, the finding's message, severity and place (file:line:column, key)."""

from __future__ import annotations

import pytest

from sagestack.core.errors import SpecError
from tests.unit.test_rules import findings

BASE = """\
project: digits
region: us-east-1
images:
  tf: {dlc: {framework: tensorflow, version: "2.19", py_version: py312}}
  torch: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
  own: {dockerfile: containers/training}
jobs:
  big:
"""
TORCH_URI = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker"
TF_URI = "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.8.0-gpu-py39-cu112-ubuntu20.04-sagemaker"
MWMS = "distribution: {multi_worker_mirrored_strategy: {}}"
PS = "distribution: {parameter_server: {}}"


def job(body: str, images: str = "") -> str:
    """BASE's job `big` (line 9 on) with `body`; `images` replaces the image entries' lines."""
    text = BASE + "".join(f"    {line}\n" for line in body.strip().splitlines())
    return text.replace("images:\n", f"images:\n{images}") if images else text


def located(project, text: str, rule_id: str) -> list[str]:
    """The rule's findings as a full load reports them: `file:line:col: [severity: ]key: message`."""
    project.write("containers/training/Dockerfile", "FROM python:3.11\n")
    try:
        issues = project.spec(text).load().warnings
    except SpecError as e:
        issues = e.issues
    return [i.format() for i in issues if i.rule == rule_id]


def test_tensorflow_distribution_needs_tensorflow(project):
    rule = "tensorflow-distribution-needs-tensorflow"
    for image in ("tf", "own"):  # a TensorFlow DLC; an image whose framework sagestack cannot know
        ok = job(f"image: {image}\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{MWMS}")
        assert findings(project, rule, ok) == []
    bad = job(f"image: torch\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{MWMS}")
    message = (
        "multi_worker_mirrored_strategy is launched by SageMaker's TensorFlow container, but images.torch is "
        "PyTorch 2.5: its container ignores the setting and runs the script once per host with no TF_CONFIG, so "
        "each of the 2 host(s) trains alone; use distribution: {torch_distributed: {}} with this image, or a "
        "TensorFlow image"
    )
    assert findings(project, rule, bad) == [
        f"jobs.big.distribution.multi_worker_mirrored_strategy: {message}"
    ]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:12:52: jobs.big.distribution.multi_worker_mirrored_strategy: {message} [{rule}]"
    ]
    # a PyTorch DLC named by its URI, and a Hugging Face (PyTorch) DLC, for parameter servers too
    uri = job(
        f"image: byuri\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}",
        f"  byuri: {{uri: {TORCH_URI}}}\n",
    )
    (found,) = findings(project, rule, uri)
    assert found.startswith(
        "jobs.big.distribution.parameter_server: parameter_server is launched by SageMaker's"
    )
    assert "images.byuri is PyTorch 2.5:" in found
    hf = job(
        f"image: hf\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}",
        '  hf: {dlc: {framework: huggingface, version: "4.49", py_version: py311}}\n',
    )
    (found,) = findings(project, rule, hf)
    assert "images.hf is a Hugging Face (PyTorch) DLC:" in found


def test_tensorflow_no_pytorch_distribution(project):
    rule = "tensorflow-no-pytorch-distribution"
    ok = job(f"image: tf\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n{MWMS}")
    assert findings(project, rule, ok) == []
    assert (
        findings(
            project,
            rule,
            ok.replace("image: tf", "image: torch").replace(MWMS[14:], "{torch_distributed: {}}"),
        )
        == []
    )
    bad = job(
        "image: tf\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\ndistribution: {torch_distributed: {}}"
    )
    message = (
        "torch_distributed launches the script with torchrun, which only the PyTorch container does; images.tf "
        "is TensorFlow 2.19, whose container runs the script once per host with no cluster (each host trains "
        "alone); use distribution: {multi_worker_mirrored_strategy: {}} (or {mpi: {}} for Horovod)"
    )
    assert findings(project, rule, bad) == [f"jobs.big.distribution.torch_distributed: {message}"]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:12:39: jobs.big.distribution.torch_distributed: {message} [{rule}]"
    ]
    smp = job(
        "image: tf\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {smp: {parameters: {hybrid_shard_degree: 16}}}"
    )
    assert findings(project, rule, smp) == [
        "jobs.big.distribution.smp: the SageMaker model parallelism library (smp) runs in PyTorch containers "
        "only (v2 discontinued TensorFlow) and images.tf is TensorFlow 2.19; use distribution: "
        "{multi_worker_mirrored_strategy: {}} (or {mpi: {}} for Horovod), or use a PyTorch image"
    ]
    smddp = job("image: tf\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\ndistribution: {smddp: {}}")
    assert findings(project, rule, smddp) == [
        "jobs.big.distribution.smddp: SMDDP discontinued TensorFlow: SageMaker's SDK accepts it with TensorFlow "
        "2.3 to 2.11 only, and images.tf is TensorFlow 2.19; use distribution: "
        "{multi_worker_mirrored_strategy: {}} (or {mpi: {}} for Horovod)"
    ]
    # TensorFlow 2.11 is the last SMDDP ran with
    assert (
        findings(
            project,
            rule,
            smddp.replace('version: "2.19", py_version: py312', 'version: "2.11", py_version: py39'),
        )
        == []
    )


def test_mwms_framework_version(project):
    rule = "mwms-framework-version"
    ok = job(f"image: tf\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n{MWMS}")
    assert findings(project, rule, ok) == []
    bad = ok.replace('version: "2.19", py_version: py312', 'version: "2.8", py_version: py39')
    message = (
        "MultiWorkerMirroredStrategy needs TensorFlow >= 2.9 on SageMaker, and images.tf is TensorFlow 2.8; use "
        "a TensorFlow 2.9 or later image"
    )
    assert findings(project, rule, bad) == [
        f"jobs.big.distribution.multi_worker_mirrored_strategy: {message}"
    ]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:12:52: jobs.big.distribution.multi_worker_mirrored_strategy: {message} [{rule}]"
    ]
    assert findings(project, rule, bad.replace('"2.8"', '"2.9"')) == []
    # the version of a TensorFlow DLC given by its URI is read from its tag
    uri = job(
        f"image: byuri\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n{MWMS}",
        f"  byuri: {{uri: {TF_URI}}}\n",
    )
    assert findings(project, rule, uri) == [
        "jobs.big.distribution.multi_worker_mirrored_strategy: MultiWorkerMirroredStrategy needs TensorFlow >= "
        "2.9 on SageMaker, and images.byuri is TensorFlow 2.8; use a TensorFlow 2.9 or later image"
    ]


def test_parameter_server_single_host(project):
    rule = "parameter-server-single-host"
    ok = job(f"image: tf\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}")
    assert findings(project, rule, ok) == []
    bad = job(f"image: tf\ninstance_type: ml.g5.2xlarge\n{PS}")
    message = (
        "the TensorFlow container starts parameter servers only on 2 or more hosts: on 1 host it sets no "
        "TF_CONFIG and runs the script once, as with no distribution; use distribution: "
        "{multi_worker_mirrored_strategy: {}} to use the host's GPUs, or instance_count: 2 or more"
    )
    assert findings(project, rule, bad) == [f"jobs.big.distribution.parameter_server: {message}"]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:11:38: warning: jobs.big.distribution.parameter_server: {message} [{rule}]"
    ]
    # …and distribution-on-single-cpu leaves a single host with parameter servers to this rule
    cpu = bad.replace("ml.g5.2xlarge", "ml.m5.xlarge")
    assert len(findings(project, rule, cpu)) == 1
    assert findings(project, "distribution-on-single-cpu", cpu) == []
    assert findings(project, "distribution-on-single-cpu", cpu.replace(PS, MWMS)) == [
        "jobs.big.distribution: distribution on a single ml.m5.xlarge (no accelerator) starts one process; drop "
        "it, or use more instances or an accelerated type"
    ]


def test_parameter_server_gpus_per_host(project):
    rule = "parameter-server-gpus-per-host"
    ok = job(f"image: tf\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}")
    assert findings(project, rule, ok) == []
    bad = job(f"image: tf\ninstance_type: [ml.g5.2xlarge, ml.g5.12xlarge]\ninstance_count: 2\n{PS}")
    message = (
        "parameter_server on ml.g5.12xlarge (4 GPUs): the TensorFlow container starts one worker per host and its "
        "parameter server on the CPU, so 3 of the 4 GPUs idle unless the script mirrors over them; use "
        "distribution: {multi_worker_mirrored_strategy: {}}, or a single-GPU type (e.g. ml.g5.xlarge)"
    )
    assert findings(project, rule, bad) == [f"jobs.big.instance_type.1: {message}"]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:10:36: warning: jobs.big.instance_type[1]: {message} [{rule}]"
    ]
    assert findings(project, rule, bad.replace(PS, MWMS)) == []


def test_parameter_server_keras3(project):
    rule = "parameter-server-keras3"
    old = job(f"image: tf\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}").replace(
        'version: "2.19", py_version: py312', 'version: "2.14", py_version: py310'
    )
    assert findings(project, rule, old) == []
    unknown = job(f"image: own\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}")
    assert findings(project, rule, unknown) == []
    bad = job(f"image: tf\ninstance_type: ml.g5.2xlarge\ninstance_count: 2\n{PS}")
    message = (
        "images.tf is TensorFlow 2.19: the container's TF_CONFIG names the first host's task `master` "
        "(tf.estimator's name; it is gone from 2.16), which TF 2's ParameterServerStrategy refuses, and Keras 3's "
        "model.fit has no parameter-server support; use distribution: {multi_worker_mirrored_strategy: {}}, or "
        "rename master to chief in the script and train with a ClusterCoordinator loop"
    )
    assert findings(project, rule, bad) == [f"jobs.big.distribution.parameter_server: {message}"]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:12:38: warning: jobs.big.distribution.parameter_server: {message} [{rule}]"
    ]


HPS = "hyperparameters: {lr: 0.001, batch_size_per_device: 64}"


def test_data_parallel_learning_rate(project):
    rule = "data-parallel-learning-rate"
    alone = job(f"image: torch\ninstance_type: ml.g5.2xlarge\n{HPS}")
    assert findings(project, rule, alone) == []
    bad = job(
        f"image: torch\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n"
        f"distribution: {{torch_distributed: {{}}}}\n{HPS}"
    )
    message = (
        "8 data-parallel replicas (2x ml.g5.12xlarge) make the global batch 8x batch_size_per_device=64 = 512: "
        "scale lr with it (linear: 0.001 -> 0.008) and warm it up, unless the script does; or keep the global "
        "batch (a smaller per-device batch, gradient accumulation)"
    )
    assert findings(project, rule, bad) == [f"jobs.big.hyperparameters.lr: {message}"]
    assert located(project, bad, rule) == [
        f"config/sagestack.yaml:13:27: info: jobs.big.hyperparameters.lr: {message} [{rule}]"
    ]
    # the AWS PyTorch examples' spellings (learning-rate, batch-size; the value quoted) are the same names
    spelt = bad.replace(HPS, "hyperparameters: {learning-rate: '0.001', batch-size: '64'}")
    assert findings(project, rule, spelt) == [
        "jobs.big.hyperparameters.learning-rate: "
        + message.replace("batch_size_per_device", "batch-size").replace("scale lr", "scale learning-rate")
    ]
    assert findings(project, rule, spelt.replace("batch-size", "warmup-steps")) == []
    # MWMS runs one process per host but mirrors over its 4 GPUs: the same 8 replicas
    mwms = bad.replace("image: torch", "image: tf").replace("distribution: {torch_distributed: {}}", MWMS)
    assert findings(project, rule, mwms) == [f"jobs.big.hyperparameters.lr: {message}"]
    # Horovod: hosts x processes per host; parameter servers update asynchronously, one worker's batch a step
    mpi = bad.replace("{torch_distributed: {}}", "{mpi: {processes_per_host: 2}}")
    assert findings(project, rule, mpi)[0].startswith("jobs.big.hyperparameters.lr: 4 data-parallel replicas")
    assert (
        findings(
            project,
            rule,
            bad.replace("image: torch", "image: tf").replace(
                "{torch_distributed: {}}", "{parameter_server: {}}"
            ),
        )
        == []
    )
    # the job says how it scales (a hyperparameter), or its script declares an option for it
    assert findings(project, rule, bad.replace("lr: 0.001,", "lr: 0.001, reference_batch: 64,")) == []
    project.write("training_src/train.py", 'p.add_argument("--warmup_steps", type=int, default=-1)\n')
    assert findings(project, rule, bad) == []


def test_the_tensorflow_scale_up_and_multi_host_advice(project):
    # MWMS across single-GPU hosts: one multi-GPU host, which MWMS mirrors over
    mwms = job(f"image: tf\ninstance_type: ml.g5.2xlarge\ninstance_count: 4\n{MWMS}")
    scale_up = (
        "jobs.big.instance_type.0: 4x ml.g5.2xlarge puts one A10G on each host, so every gradient exchange "
        "crosses the network; 1x ml.g5.12xlarge has the same 4 A10Gs on one host (NVLink/PCIe) and is usually "
        "faster"
    )
    assert findings(project, "prefer-one-multi-accelerator-instance", mwms) == [scale_up]
    # parameter servers do not run on one host: the advice names the strategy that does
    assert findings(project, "prefer-one-multi-accelerator-instance", mwms.replace(MWMS, PS)) == [
        scale_up
        + "; use distribution: {multi_worker_mirrored_strategy: {}} there (parameter servers run only across hosts)"
    ]
    rule = "multi-host-without-distribution"
    tail = " to train one model across them, or use instance_count: 1"
    for image, add in (
        ("tf", "distribution: {multi_worker_mirrored_strategy: {}}"),
        ("torch", "distribution: {torch_distributed: {}}"),
        (
            "own",
            "distribution: {torch_distributed: {}} (a PyTorch container) or {multi_worker_mirrored_strategy: {}} (a TensorFlow one)",
        ),
    ):
        (found,) = findings(
            project, rule, job(f"image: {image}\ninstance_type: ml.g5.2xlarge\ninstance_count: 2")
        )
        assert found.endswith(f"; add {add}{tail}"), found
    assert findings(project, rule, mwms) == []


@pytest.mark.parametrize(
    ("distribution", "processes"),
    [("{torch_distributed: {}}", 4), ("{multi_worker_mirrored_strategy: {}}", 1)],
)
def test_data_loader_workers_count_the_tensorflow_worker_once(project, distribution, processes):
    # ml.g5.12xlarge: 48 vCPUs, 4 GPUs; the TensorFlow container starts one worker per host
    text = job(
        f"image: tf\ninstance_type: ml.g5.12xlarge\ndistribution: {distribution}\nhyperparameters: {{num_workers: 16}}"
    )
    found = findings(project, "dataloader-workers-per-cpu", text)
    if processes == 1:  # one worker has the host's 48 vCPUs for its 16 data-loader workers
        assert found == []
    else:  # torchrun's 4 processes have 12 vCPUs each
        (message,) = found
        assert "48 vCPUs for 4 training process(es) (12 each)" in message


def test_sagestack_rules_explains_each_tensorflow_rule():
    from typer.testing import CliRunner

    from sagestack.cli import app

    runner = CliRunner()
    listing = runner.invoke(app, ["rules"], terminal_width=200).stdout
    for rule_id in (
        "tensorflow-distribution-needs-tensorflow",
        "tensorflow-no-pytorch-distribution",
        "mwms-framework-version",
        "parameter-server-single-host",
        "parameter-server-gpus-per-host",
        "parameter-server-keras3",
        "data-parallel-learning-rate",
    ):
        assert rule_id in listing
        out = runner.invoke(app, ["rules", "--explain", rule_id])
        assert out.exit_code == 0 and "Why:" in out.stdout and "What to do:" in out.stdout, out.stdout
    assert "data-parallel-learning-rate (info)" in listing


def test_validate_shows_an_info_on_one_line_and_passes(project):
    import json

    from tests.unit.test_schema_and_cli import run_cli

    project.write("containers/training/Dockerfile", "FROM python:3.11\n")
    project.spec(
        job(
            "image: torch\ninstance_type: ml.g5.12xlarge\ninstance_count: 2\n"
            f"distribution: {{torch_distributed: {{}}}}\n{HPS}"
        )
    )
    result = run_cli("validate", "--root", str(project.root))
    assert result.returncode == 0, result.stderr
    (line,) = result.stderr.splitlines()  # the headline alone: no excerpt under advice
    assert line.startswith("config/sagestack.yaml:13:27: info: jobs.big.hyperparameters.lr: 8 data-parallel")
    assert line.endswith("[data-parallel-learning-rate]")
    document = json.loads(run_cli("validate", "--json", "--root", str(project.root)).stdout)
    (env,) = document["environments"]
    assert env["ok"] and env["warnings"] == []
    assert [(i["rule"], i["severity"], i["line"]) for i in env["infos"]] == [
        ("data-parallel-learning-rate", "info", 13)
    ]


def test_smp_on_a_tensorflow_image_is_one_error_not_a_pytorch_version(project):
    v1 = job(
        "image: tf\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\n"
        "distribution: {smp: {version: 1, parameters: {partitions: 2}}}"
    )
    (found,) = findings(project, "tensorflow-no-pytorch-distribution", v1)
    assert found.startswith(
        "jobs.big.distribution.smp: the SageMaker model parallelism library (smp) runs in"
    )
    # SMP v1's PyTorch <= 2.0 check does not call TensorFlow 2.19 a PyTorch version
    assert findings(project, "smp-version-parameters", v1) == []


def test_spot_on_a_tensorflow_image_needs_a_checkpoint_folder_not_an_interval(project):
    rule = "spot-checkpoint"
    spot = "instance_type: ml.g5.2xlarge\nuse_spot_instances: true\nmax_wait: 2h\n"
    # the Keras script init writes backs up every epoch: a checkpoint folder is what it needs
    assert findings(project, rule, job(f"image: tf\n{spot}checkpoint: {{}}")) == []
    assert findings(project, rule, job(f"image: torch\n{spot}checkpoint: {{}}")) == [
        "jobs.big.checkpoint: spot training needs checkpoint.every_steps, so the script saves progress it can "
        "resume from"
    ]
    (found,) = findings(project, rule, job(f"image: tf\n{spot}"))
    assert found.startswith("jobs.big.use_spot_instances: spot training without a checkpoint location")
