"""The launch-contract rules: each with a spec that passes and one that fails, and the message."""

from __future__ import annotations

import json
import shlex

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


# Names an entry point may be given: sagemaker-training's own validate_entry_point is the judge.
ENTRY_POINTS = [
    "train.py",
    "bin/train.sh",
    "my-job_v2.1+cpu.py",
    "_private.py",
    ".hidden.py",
    "x;touch y.sh",
    "$(touch pwned).sh",
    "`id`.sh",
    "it's.py",
    "two words.py",
    "-rf.sh",
    "+x.sh",
    "./train.py",
    "bin/./train.sh",
    "bin//train.sh",
    "bin/",
    "trän.py",
    "a\nb.sh",
]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_entry_point_name_is_what_the_toolkit_accepts(project, entry: str):
    """Refused under both contracts exactly when sagemaker-training refuses it; what is accepted is
    read by the drivers' `sh -c` as itself; the suggestion is a name both accept."""
    process = pytest.importorskip("sagemaker_training.process")
    from sagestack.training.rules_launcher import suggested_entry_point

    try:
        process.validate_entry_point(entry)
        toolkit_refuses = False
    except process.errors.ClientError:
        toolkit_refuses = True
    for launcher in ("toolkit", "drivers"):
        spec = job(
            f"image: dlc\ninstance_type: ml.g5.2xlarge\nlauncher: {launcher}\nentry_point: {json.dumps(entry)}"
        )
        found = findings(project, "entry-point-name", spec)
        assert bool(found) == toolkit_refuses, (launcher, found)
    if toolkit_refuses:
        plain = suggested_entry_point(entry)
        process.validate_entry_point(plain)  # the suggestion works as printed
        assert found[0].startswith(f"jobs.big.entry_point: {entry!r} has ")
        assert found[0].endswith(f"rename the script and set entry_point: {plain}")
    else:  # the basic driver's shell command reads the name as one word, unchanged
        assert shlex.split(f"chmod +x {entry} && ./{entry}") == ["chmod", "+x", entry, "&&", f"./{entry}"]


def test_entry_point_name_messages(project):
    def one(entry: str) -> str:
        spec = job(
            f"image: dlc\ninstance_type: ml.g5.2xlarge\nlauncher: drivers\nentry_point: {json.dumps(entry)}"
        )
        (found,) = findings(project, "entry-point-name", spec)
        return found.split(": ", 1)[1]

    assert one("x;touch y.sh") == (
        "'x;touch y.sh' has the character(s) ' ' ';': an entry point is a plain file name (letters, digits, "
        "'.', '_', '+', '-', '/'), which sagemaker-training refuses otherwise and the drivers' shell would "
        "read as code; rename the script and set entry_point: x_touch_y.sh"
    )
    assert one("-rf.sh").startswith("'-rf.sh' has a leading '-', which a launcher reads as an option")
    assert one("./train.py").startswith("'./train.py' has a '.' or '..' part")
    assert one("./train.py").endswith("set entry_point: train.py")
    # entry-point-in-source-dir reports these; one error each
    for other in ("/abs/train.py", "../train.py", "a\\b.py"):
        spec = job(f"image: dlc\ninstance_type: ml.g5.2xlarge\nentry_point: {json.dumps(other)}")
        assert findings(project, "entry-point-name", spec) == []


# AWS's environment.py writes the file sm_train.sh sources; run it, source its file with bash as
# sm_train.sh does (set -e), and read back what a script would see.
_SET_ENV = r"""
import json, os, sys
drivers, case = sys.argv[1], json.loads(sys.argv[2])
sys.path[:0] = [drivers, drivers + "/scripts"]
os.environ.update(case["environment"], TRAINING_JOB_NAME="job")
import environment
environment.read_source_code_json = lambda: {"entry_script": "train.py"}
environment.read_distributed_json = lambda: case["distributed"]
resources = {"current_host": "algo-1", "current_instance_type": "ml.m5.large", "hosts": ["algo-1"],
             "network_interface_name": "eth0"}
environment.set_env(resources, case["channels"], case["hyperparameters"], output_file=case["file"])
"""


def _what_the_script_sees(tmp_path, case: dict) -> dict[str, str] | None:
    """The SM_* environment after sm_train.sh's `source`, or None when the job fails there."""
    import subprocess
    import sys

    from sagestack.core.drivers import drivers_folder

    case = {**case, "file": str(tmp_path / "sm_training.env")}
    made = subprocess.run(
        [sys.executable, "-c", _SET_ENV, str(drivers_folder()), json.dumps(case)], capture_output=True
    )
    if made.returncode != 0:
        return None
    seen = tmp_path / "seen.json"
    dump = f"{sys.executable} -c 'import json, os, sys; open(sys.argv[1], \"w\").write(json.dumps(dict(os.environ)))'"
    sourced = subprocess.run(
        ["bash", "-c", f'set -e\nsource "$1"\n{dump} "$2"', "_", case["file"], str(seen)],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    return json.loads(seen.read_text()) if sourced.returncode == 0 else None


SHELL_CASES = [  # (the job's lines, refused: AWS's drivers fail the job or change the value)
    ("hyperparameters: {note: plain, lr: 0.001, amp: true, layers: 3}", False),
    ("""hyperparameters: {note: "it's"}""", True),
    ("""hyperparameters: {note: "x'; echo injected >&2; echo '"}""", True),
    ("""hyperparameters: {note: '"\\u0027"'}""", True),  # JSON text that decodes to '
    ("""hyperparameters: {note: '{"a": "\\u0027"}'}""", True),  # in SM_HPS only
    ("""hyperparameters: {note: "$(echo no) `id` \\" \\\\ é\\nsecond line"}""", False),  # all intact
    ("""hyperparameters: {note: "a\\0b"}""", True),
    ("hyperparameters: {model.lr: 0.1}", True),
    ("hyperparameters: {batch-size: 8, Batch_Size2: 9}", False),
    ("""hyperparameters: {"x PATH": 1}""", True),
    ("hyperparameters: {é: 1}", True),
    ("channels: {train_2: {s3_uri: 's3://b/p'}}", False),
    ("channels: {my-data: {s3_uri: 's3://b/p'}}", True),
    ("channels: {my.data: {s3_uri: 's3://b/p'}}", True),
    ("channels: {train: {s3_uri: 's3://b/p', content_type: 'text/csv; header=present'}}", False),
    ("""channels: {train: {s3_uri: 's3://b/p', content_type: "text/csv; x='1'"}}""", True),
    ("distribution: {mpi: {processes_per_host: 2, custom_mpi_options: '-x NCCL_DEBUG=INFO'}}", False),
    ("""distribution: {mpi: {processes_per_host: 2, custom_mpi_options: "-x 'NOTE=a b'"}}""", False),
    ("""distribution: {mpi: {processes_per_host: 2, custom_mpi_options: "-x \\"NOTE=it's\\""}}""", True),
    ("""distribution: {smp: {parameters: {hybrid_shard_degree: 2}}}""", False),
    ("""distribution: {smp: {parameters: {hybrid_shard_degree: "it's"}}}""", True),
    ("environment: {SM_LOG_LEVEL: '10'}", False),
    ("environment: {SM_LOG_LEVEL: DEBUG}", True),
]


@pytest.mark.parametrize(("body", "refused"), SHELL_CASES)
def test_drivers_shell_values_refuses_what_the_drivers_cannot_pass(
    project, tmp_path, body: str, refused: bool
):
    """Refused exactly when AWS's environment.py + sm_train.sh's `source` fail the job or change a
    value: every hyperparameter as SM_HP_<KEY> and in SM_HPS, every channel, the distribution."""
    from sagestack.core.drivers import hyperparameter_exports, safe_deserialize, safe_serialize
    from sagestack.training.launcher import drivers_config

    spec = job(f"image: registry\ninstance_type: ml.p4d.24xlarge\nlauncher: drivers\n{body}")
    found = findings(project, "drivers-shell-values", spec)
    loaded = project.spec(spec).load(run_rules=False).spec.jobs["big"]
    sent = {k: safe_serialize(v) for k, v in loaded.hyperparameters.items()}
    channels = {
        name: {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
        | ({} if c.content_type is None else {"ContentType": c.content_type})
        for name, c in loaded.channels.items()
    }
    distributed = drivers_config(loaded, requirements=False).distributed()
    seen = _what_the_script_sees(
        tmp_path,
        {
            "hyperparameters": sent,
            "channels": channels,
            "distributed": distributed,
            "environment": loaded.environment,
        },
    )
    intact = seen is not None and all(
        seen.get(hyperparameter_exports(k, v)[0]) == safe_serialize(safe_deserialize(v))
        and json.loads(seen["SM_HPS"])[k] == safe_deserialize(v)
        for k, v in sent.items()
    )
    intact = intact and seen is not None and json.loads(seen["SM_INPUT_DATA_CONFIG"]) == channels
    intact = intact and seen is not None and all(f"SM_CHANNEL_{c.upper()}" in seen for c in channels)
    if distributed:
        intact = intact and seen is not None and json.loads(seen["SM_DISTRIBUTED_CONFIG"]) == distributed
    assert (not intact) == refused  # AWS's drivers, as this case expects them
    assert bool(found) == refused, found
    assert len(found) <= 1, found  # one error for one value


def test_drivers_shell_values_messages(project):
    def one(body: str) -> str:
        spec = job(f"image: registry\ninstance_type: ml.g5.2xlarge\nlauncher: drivers\n{body}")
        (found,) = findings(project, "drivers-shell-values", spec)
        return found

    assert one("""hyperparameters: {note: "it's"}""") == (
        "jobs.big.hyperparameters.note: \"it's\": environment.py writes it into sm_train.sh's environment as "
        "SM_HP_NOTE='…' and it holds a ' (it ends the shell's quoted string: the rest runs as shell code); "
        "write it without ' (the typographic apostrophe \u2019 reads the same), or put the text in a file of "
        "source_dir and pass the file's name"
    )
    assert one("hyperparameters: {model.lr: 0.1}") == (
        "jobs.big.hyperparameters.model.lr: key 'model.lr': environment.py exports it as SM_HP_MODEL.LR, a "
        "name bash refuses (a key holds letters, digits, '_' and '-' only), and the job fails before the "
        "script starts, or a crafted key runs as shell code; name it model_lr"
    )
    assert one("channels: {my-data: {s3_uri: 's3://b/p'}}").endswith("name the channel my_data")
    assert one("environment: {SM_LOG_LEVEL: DEBUG}").endswith(
        "give a logging level number, e.g. 20 (INFO) or 10 (DEBUG)"
    )
    # the toolkit contract passes these through its own files: not this rule's
    toolkit = job("""image: dlc\ninstance_type: ml.g5.2xlarge\nhyperparameters: {note: "it's"}""")
    assert findings(project, "drivers-shell-values", toolkit) == []
