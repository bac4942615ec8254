"""`sagestack cluster submit` on an EKS cluster applies the HyperPodPyTorchJob it prints: a
kubeconfig of the run's own (endpoint and certificate from EKS's DescribeCluster on the moto server,
a bearer token as aws-iam-authenticator makes it), then `kubectl apply -f -` — here a stand-in
kubectl on the PATH that records what it was given. Without kubectl or credentials it says how to
do it by hand; --dry-run applies nothing."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from tests.constructs.test_clusters import _lifecycle
from tests.constructs.test_clusters_eks import EKS_SPEC
from tests.support.moto_server import REGION, running_moto

KUBECTL = """#!/bin/sh
# a stand-in kubectl: records its arguments, its kubeconfig and the object it was given
out="$RECORD"
printf '%s\\n' "$@" > "$out/argv"
cp "$2" "$out/kubeconfig"
cat > "$out/stdin"
echo "hyperpodpytorchjob.sagemaker.amazonaws.com/digits-dev-llm created"
"""


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        server.client("eks").create_cluster(
            name="digits-dev-shared-eks",
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-0a1b2c3d4e5f60718"]},
        )
        yield server


@pytest.fixture
def eks_project(project):
    project.spec(EKS_SPEC).env("dev", "retain_data: false\n")
    _lifecycle(project.root)
    return project


SUBMIT = (sys.executable, "-m", "sagestack.cli", "cluster", "submit", "llm", "--cluster", "shared")
SUBMIT += ("--team", "research")


def _submit(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SUBMIT, *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _without_kubectl(folder: Path) -> Path:
    """The system's programs (bash, git, …) but the machine's own kubectl, as links in `folder`."""
    folder.mkdir(exist_ok=True)
    for program in Path("/usr/bin").iterdir():
        if program.name != "kubectl" and not (folder / program.name).exists():
            (folder / program.name).symlink_to(program)
    return folder


def _env(tmp_path: Path, moto=None, *, kubectl: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if kubectl:
        (bin_dir / "kubectl").write_text(KUBECTL)
        (bin_dir / "kubectl").chmod(0o755)
    record = tmp_path / "record"
    record.mkdir(exist_ok=True)
    env |= {
        # without the stand-in, the system's programs but its own kubectl, out of reach
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:"
        + ("/bin:/usr/bin" if kubectl else str(_without_kubectl(tmp_path / "system"))),
        "RECORD": str(record),
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    if moto is not None:
        env |= {
            "AWS_ENDPOINT_URL": moto.url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    return env


def test_submit_applies_the_printed_object_with_a_kubeconfig_of_its_own(eks_project, moto, tmp_path):
    done = _submit(eks_project.root, _env(tmp_path, moto))
    assert done.returncode == 0, done.stderr
    record = tmp_path / "record"
    argv = (record / "argv").read_text().split()
    assert argv[0] == "--kubeconfig" and argv[2:] == ["apply", "-f", "-"]
    assert not Path(argv[1]).exists(), "the run's kubeconfig is removed after it"
    assert yaml.safe_load((record / "stdin").read_text()) == yaml.safe_load(done.stdout)
    config = yaml.safe_load((record / "kubeconfig").read_text())
    described = moto.client("eks").describe_cluster(name="digits-dev-shared-eks")["cluster"]
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == described["endpoint"]
    assert cluster["cluster"]["certificate-authority-data"] == described["certificateAuthority"]["data"]
    bearer = config["users"][0]["user"]["token"]
    assert bearer.startswith("k8s-aws-v1.")
    encoded = bearer.removeprefix("k8s-aws-v1.")
    url = urlparse(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    query = parse_qs(url.query)
    assert url.hostname == f"sts.{REGION}.amazonaws.com" and query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert "created (on digits-dev-shared-eks)" in done.stderr


def test_without_kubectl_or_credentials_it_says_how_by_hand_and_dry_run_applies_nothing(
    eks_project, moto, tmp_path
):
    by_hand = "aws eks update-kubeconfig --name digits-dev-shared-eks --region us-east-1 && kubectl apply"
    no_kubectl = _submit(eks_project.root, _env(tmp_path, moto, kubectl=False))
    assert no_kubectl.returncode == 1 and "kubectl is not on the PATH" in no_kubectl.stderr
    assert by_hand in no_kubectl.stderr and "Traceback" not in no_kubectl.stderr
    no_credentials = _submit(eks_project.root, _env(tmp_path))
    assert no_credentials.returncode == 1 and "no AWS credentials" in no_credentials.stderr
    assert by_hand in no_credentials.stderr
    dry = _submit(eks_project.root, _env(tmp_path, moto), "--dry-run")
    assert dry.returncode == 0 and not (tmp_path / "record" / "argv").exists()
    assert json.loads(json.dumps(yaml.safe_load(dry.stdout)))["kind"] == "HyperPodPyTorchJob"
