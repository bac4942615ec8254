"""The TensorFlow toolkit judge (tests/support/tf_toolkit.py) runs AWS's TensorFlow container entry
point as SageMaker would, on host layouts written here by hand as SageMaker writes them.

Here one host runs tests/conformance/tf_probe.py, which records what it was given: the toolkit's
command, the variables it exports (S3_REGION read from the model_dir bucket's own region through the
S3 stand-in), nothing left running; and a run past its timeout leaves no namespace and no process.
The multi-host layouts (MultiWorkerMirroredStrategy, parameter servers, MPI) run through this judge
in test_tensorflow_toolkit.py, beside `sagestack local train` on the same layouts (tf_probe.py also
exercises a parameter-server cluster and a multi-worker all-reduce when its TF_CONFIG names one).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support import tf_toolkit

pytestmark = [pytest.mark.conformance, pytest.mark.train]

if (why := tf_toolkit.available()) is not None:
    pytest.skip(why, allow_module_level=True)

PROBE = Path(__file__).with_name("tf_probe.py")
JOB = "tf-judge"
REGION = "us-west-2"
BUCKET_REGION = "eu-west-1"  # the bucket's own region, which S3_REGION must report
MODEL_DIR = f"s3://sagemaker-{REGION}-123456789012/{JOB}/model"
LAYOUTS = {
    "1x1": (1, {"model_dir": MODEL_DIR}),
}


def write_layout(root: Path, hosts: int, extra: dict, *, entry_point: Path = PROBE) -> Path:
    """A finished local run's workdir as the judge reads it: request.json, sourcedir.tar.gz and
    hosts/<algo-N>/input/{config,data} as SageMaker writes them (hyperparameters JSON-encoded)."""
    names = [f"algo-{i + 1}" for i in range(hosts)]
    hyperparameters = {
        "epochs": 2,
        "sagemaker_program": entry_point.name,
        "sagemaker_submit_directory": f"s3://sagemaker-{REGION}-123456789012/{JOB}/source/sourcedir.tar.gz",
        "sagemaker_container_log_level": 20,
        "sagemaker_job_name": JOB,
        "sagemaker_region": REGION,
        **extra,
    }
    encoded = {k: json.dumps(v) for k, v in hyperparameters.items()}
    root.mkdir(parents=True)
    (root / "request.json").write_text(
        json.dumps({"TrainingJobName": JOB, "HyperParameters": encoded, "Environment": {}})
    )
    with tarfile.open(root / "sourcedir.tar.gz", "w:gz") as tar:
        tar.add(entry_point, arcname=entry_point.name)
    for host in names:
        config = root / "hosts" / host / "input" / "config"
        config.mkdir(parents=True)
        (config / "hyperparameters.json").write_text(json.dumps(encoded))
        group = {"instance_group_name": "homogeneousCluster", "instance_type": "ml.c5.xlarge", "hosts": names}
        resource = {
            "current_host": host,
            "current_instance_type": "ml.c5.xlarge",
            "current_group_name": "homogeneousCluster",
            "hosts": names,
            "instance_groups": [group],
            "network_interface_name": "eth0",
        }
        (config / "resourceconfig.json").write_text(json.dumps(resource))
        channel = {
            "TrainingInputMode": "File",
            "S3DistributionType": "FullyReplicated",
            "RecordWrapperType": "None",
        }
        (config / "inputdataconfig.json").write_text(json.dumps({"train": channel}))
        data = root / "hosts" / host / "input" / "data" / "train"
        data.mkdir(parents=True)
        (data / "part-0.csv").write_text("1,2,3\n")
    return root


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line.startswith("sgtf-")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tf_toolkit.TfToolkitHost]]:
    before = _namespaces()
    out = {}
    for name, (hosts, extra) in LAYOUTS.items():
        root = tmp_path_factory.mktemp(name)
        workdir = write_layout(root / "local", hosts, extra)
        out[name] = tf_toolkit.run_tf_toolkit(
            workdir, root / "toolkit", threads=1, bucket_region=BUCKET_REGION
        )
    assert _namespaces() == before, "a run left a network namespace behind"
    return out


def _probes(host: tf_toolkit.TfToolkitHost) -> dict[str, dict]:
    return {
        p.stem: json.loads(p.read_text())
        for p in sorted((host.base / "output" / "data").glob("probe-*.json"))
    }


def _tf_config(host: tf_toolkit.TfToolkitHost) -> dict | None:
    raw = _probes(host)["probe-0"]["env"].get("TF_CONFIG")
    return json.loads(raw) if raw is not None else None


def test_every_host_succeeds_and_leaves_nothing_running(runs) -> None:
    for name, hosts in runs.items():
        for host in hosts:
            assert host.returncode == 0, (name, host.name, host.log[-4000:])
            assert (host.base / "output" / "success").exists() or "Reporting training SUCCESS" in host.log


def test_one_host_without_distribution_runs_the_script_with_the_tf_variables(runs) -> None:
    (host,) = runs["1x1"]
    python = host.command()[0]
    assert host.command() == [python, "tf_probe.py", "--epochs", "2", "--model_dir", MODEL_DIR]
    env = _probes(host)["probe-0"]["env"]
    # s3_utils.configure: the model_dir bucket's region (asked of S3), and its two fixed settings
    assert (env["S3_REGION"], env["TF_CPP_MIN_LOG_LEVEL"], env["S3_USE_HTTPS"]) == (BUCKET_REGION, "1", "1")
    assert "TF_CONFIG" not in env
    assert host.leftover == []


def test_a_run_past_its_timeout_leaves_no_namespace_and_no_process(tmp_path: Path) -> None:
    before = _namespaces()
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(3600)\n")
    workdir = write_layout(tmp_path / "local", 2, {}, entry_point=hang)
    with pytest.raises(TimeoutError, match="ran past 20s on algo-1, algo-2"):
        tf_toolkit.run_tf_toolkit(workdir, tmp_path / "toolkit", threads=1, timeout=20)
    assert _namespaces() == before
    running = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            # every process a host starts inherits SAGESTACK_MPIRUN_LOG, a path under tmp_path
            if str(tmp_path).encode() in (proc / "environ").read_bytes():
                running.append(proc.name)
        except OSError:
            continue
    assert running == []
