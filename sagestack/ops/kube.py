"""Applying a rendered Kubernetes object to an EKS cluster, as `aws eks update-kubeconfig` and
`kubectl apply` would, without the AWS CLI: the cluster's endpoint and certificate from EKS's
DescribeCluster, a bearer token as aws-iam-authenticator makes it (a presigned STS
GetCallerIdentity URL bound to the cluster's name, `k8s-aws-v1.` + base64url), written into a
kubeconfig of the run's own (the user's ~/.kube/config is not touched), then `kubectl apply`.
boto3 is not imported here: the caller passes the session."""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

TOKEN_PREFIX = "k8s-aws-v1."
TOKEN_SECONDS = 60  # how long the presigned URL is good for: EKS accepts it for 15 minutes at most


class NoKubectl(LookupError):
    """kubectl is not on the PATH."""


def token(session: Any, cluster: str, region: str) -> str:
    """An EKS bearer token for `cluster`: STS GetCallerIdentity presigned with the x-k8s-aws-id header."""
    from botocore.signers import RequestSigner

    sts = session.client("sts", region_name=region)
    signer = RequestSigner(
        sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(), session.events
    )
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {"x-k8s-aws-id": cluster},
            "context": {},
        },
        region_name=region,
        expires_in=TOKEN_SECONDS,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def kubeconfig(eks: Any, cluster: str, bearer: str) -> dict[str, Any]:
    """A kubeconfig for one cluster, read from DescribeCluster (endpoint and certificate authority)."""
    described = eks.describe_cluster(name=cluster)["cluster"]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": described["endpoint"],
                    "certificate-authority-data": described["certificateAuthority"]["data"],
                },
            }
        ],
        "users": [{"name": cluster, "user": {"token": bearer}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
    }


def apply(manifest: str, config: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -f -` of `manifest` against `config` (a kubeconfig of this run only)."""
    import yaml  # type: ignore[import-untyped]

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise NoKubectl("kubectl is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="sagestack-kube-") as folder:
        path = Path(folder) / "config"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return subprocess.run(
            [kubectl, "--kubeconfig", str(path), "apply", "-f", "-"],
            input=manifest,
            capture_output=True,
            text=True,
            check=False,
        )
