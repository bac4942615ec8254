"""The launch-contract rules: each with a spec that passes and one that fails, and the message."""

from __future__ import annotations

import pytest

from tests.unit.test_rules import findings

BASE = """\
project: digits
region: us-east-1
images:
  dlc: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}
  own: {dockerfile: containers/own}
  registry: {uri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1}
  dlc-uri: {uri: 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311}
jobs:
  big:
"""
DLC_BASE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"


def job(body: str, tail: str = "") -> str:
    return BASE + "".join(f"    {line}\n" for line in body.strip().splitlines()) + tail


@pytest.mark.parametrize(
    ("dockerfile", "verdict"),
    [
        ("FROM nvcr.io/nvidia/pytorch:25.01-py3\n", "nvcr.io/nvidia/pytorch:25.01-py3"),
        (f"ARG BASE={DLC_BASE}\nFROM ${{BASE}}\n", None),  # an ARG's default, as Docker reads it
        (f"FROM {DLC_BASE} AS build\nRUN make\nFROM build\n", None),  # a stage named earlier
        ("FROM python:3.11-slim\nRUN pip install sagemaker-training==5.1.4\n", None),  # installs the toolkit
        ("ARG BASE\nFROM $BASE\n", None),  # unknown until built: nothing said
    ],
)
def test_toolkit_needs_dlc_reads_the_dockerfile(project, dockerfile: str, verdict: str | None):
    project.write("containers/own/Dockerfile", dockerfile)
    found = findings(project, "toolkit-needs-dlc", job("image: own\ninstance_type: ml.g5.2xlarge"))
    if verdict is None:
        assert found == []
    else:
        assert found == [
            f"jobs.big.launcher: images.own: containers/own/Dockerfile builds FROM {verdict}, which is not an "
            "AWS training Deep Learning Container, and installs no sagemaker-training; set launcher: drivers"
        ]
    drivers = job("image: own\ninstance_type: ml.g5.2xlarge\nlauncher: drivers")
    assert findings(project, "toolkit-needs-dlc", drivers) == []


def test_dockerfile_base_follows_build_args_and_targets():
    from sagestack.training.rules_launcher import dockerfile_base  # after project.rules: registry order

    text = f"ARG BASE=python:3.11\nFROM $BASE AS one\nFROM {DLC_BASE} AS two\nFROM one\n"
    assert dockerfile_base(text, {}) == "python:3.11"
    assert dockerfile_base(text, {"BASE": "ubuntu:24.04"}) == "ubuntu:24.04"
    assert dockerfile_base(text, {}, target="two") == DLC_BASE


def test_toolkit_registry_image(project):
    rule = "toolkit-registry-image"
    for image in ("dlc", "dlc-uri"):
        assert findings(project, rule, job(f"image: {image}\ninstance_type: ml.g5.2xlarge")) == []
    assert (
        findings(project, rule, job("image: registry\ninstance_type: ml.g5.2xlarge\nlauncher: drivers")) == []
    )
    assert findings(project, rule, job("image: registry\ninstance_type: ml.g5.2xlarge")) == [
        "jobs.big.image: images.registry: 123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1 is not "
        "an AWS training Deep Learning Container; unless it installs sagemaker-training, set launcher: drivers"
    ]


@pytest.mark.parametrize(
    ("distribution", "message"),
    [
        ("{torch_distributed: {}}", None),
        ("{mpi: {processes_per_host: 2}}", None),
        ("{smp: {parameters: {hybrid_shard_degree: 8}}}", None),
        ("{smddp: {}}", "smddp has no driver in the SDK v3"),
        ("{smp: {version: 1, parameters: {partitions: 2}}}", "smp version 1 has no driver in the SDK v3"),
        (
            "{multi_worker_mirrored_strategy: {}}",
            "multi_worker_mirrored_strategy has no driver in the SDK v3",
        ),
    ],
)
def test_drivers_distribution(project, distribution: str, message: str | None):
    spec = job(
        f"image: registry\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\nlauncher: drivers\n"
        f"distribution: {distribution}"
    )
    found = findings(project, "drivers-distribution", spec)
    if message is None:
        assert found == []
    else:
        assert found == [
            f"jobs.big.distribution: {message} (allowed: torch_distributed, mpi, smp with smp version 2)"
        ]


def test_drivers_smp_parameters_are_the_sdks(project):
    spec = job(
        "image: registry\ninstance_type: ml.p4d.24xlarge\ninstance_count: 2\nlauncher: drivers\n"
        "distribution: {smp: {parameters: {hybrid_shard_degree: 8, microbatches: 4}}}"
    )
    (found,) = findings(project, "drivers-distribution", spec)
    assert found.startswith(
        "jobs.big.distribution.smp.parameters: microbatches: not a field of the SDK v3's SMP (allowed: "
        "hybrid_shard_degree, sm_activation_offloading,"
    )


def test_drivers_entry_point(project):
    rule = "drivers-entry-point"
    project.write("training_src/run.sh", "python train.py\n")
    plain = "image: registry\ninstance_type: ml.g5.2xlarge\nlauncher: drivers\n"
    assert findings(project, rule, job(plain + "entry_point: run.sh")) == []
    torchrun = plain + "distribution: {torch_distributed: {}}\nentry_point: run.sh"
    assert findings(project, rule, job(torchrun)) == [
        "jobs.big.entry_point: 'run.sh': the drivers run .py files here"
    ]


def test_drivers_tuning(project):
    rule = "drivers-tuning"
    tuning = (
        "tuning:\n  search:\n    job: big\n    objective: {metric: val_accuracy, type: Maximize}\n"
        "    ranges: {lr: {continuous: [0.0001, 0.1]}}\n"
    )
    body = (
        "instance_type: ml.g5.2xlarge\nlauncher: drivers\nmetric_definitions: {val_accuracy: 'acc=([0-9.]+)'}"
    )
    assert findings(project, rule, job(f"image: dlc\n{body}", tuning)) == []
    assert findings(project, rule, job(f"image: registry\n{body}", tuning)) == [
        "tuning.search.job: 'big' runs under launcher: drivers, but its trials run the toolkit contract and "
        "images.registry: 123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:1 is not an AWS training "
        "Deep Learning Container"
    ]


def test_drivers_debugger_hook(project):
    rule = "drivers-debugger-hook"
    body = "instance_type: ml.g5.2xlarge\nlauncher: drivers\ndebugger: {rules: [vanishing_gradient]}"
    assert findings(project, rule, job(f"image: dlc\n{body}")) == []
    assert findings(project, rule, job(f"image: registry\n{body.replace('drivers', 'toolkit')}")) == []
    assert findings(project, rule, job(f"image: registry\n{body}")) == [
        "jobs.big.debugger: images.registry is not an AWS Deep Learning Container: the rules read the tensors "
        "smdebug saves, so the image needs smdebug and the script its hook"
    ]
