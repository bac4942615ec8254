"""The artifact bucket's layout: every key sagestack reads or writes, spelled once.

As `Names` spells every physical name, `S3Layout` spells every S3 location: the requests, the
pipelines' states, the IAM grants and lifecycle rules (scoped to PREFIXES) and the local emulation
(`.sagestack/local/<env>/s3/<bucket>/<key>`) all take their keys from here. `bucket` may be a
CloudFormation token, a stand-in or the local bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

# The top-level prefixes, each with what lies under it. IAM grants and lifecycle rules are scoped to
# them (ArtifactBucket refuses any other).
PREFIXES: dict[str, str] = {
    "code": "source archives, launch files (code/jobs/<hash>/: code and sm_drivers) and cluster "
    "lifecycle scripts",
    "data": "training channels (data/<channel>/)",
    "checkpoints": "spot checkpoints (checkpoints/<job>/<hash>/)",
    "models": "compiled models (models/compiled/<endpoint>/) and packages promoted from another account "
    "(models/promoted/<entry>/<digest>/)",
    "optimized": "LLMs written by optimization jobs (optimized/<endpoint>/<job>/)",
    "output": "training outputs (output/<job>/<training job>/output/model.tar.gz)",
    "profiler": "SageMaker Profiler data",
    "debugger": "SageMaker Debugger tensors",
    "tensorboard": "TensorBoard event files",
    "capture": "endpoint data capture",
    "async": "asynchronous inference inputs, outputs and failures",
    "transform": "batch transform inputs and outputs",
    "monitoring": "Model Monitor baselines and reports",
    "mlflow": "the MLflow tracking server's artifacts",
}
SOURCE_ARCHIVE = "code/sourcedir.tar.gz"
# What a rendered request names in place of a job's launch files' content hash (launcher: drivers).
STAND_IN_LAUNCH_FILES = "launch-files"


@dataclass(frozen=True)
class S3Layout:
    bucket: str

    def uri(self, key: str = "") -> str:
        """s3://<bucket>/<key>."""
        return f"s3://{self.bucket}/{key}"

    # training
    def output(self, job: str) -> str:
        return self.uri(f"output/{job}/")

    def checkpoints(self, job: str, digest: str) -> str:
        return self.uri(f"checkpoints/{job}/{digest}/")

    def tensorboard(self, job: str, digest: str) -> str:
        return self.uri(f"tensorboard/{job}/{digest}/")

    def debugger(self, job: str) -> str:
        return self.uri(f"debugger/{job}/")

    def profiler(self, job: str) -> str:
        return self.uri(f"profiler/{job}/")

    def channel(self, prefix: str) -> str:
        """A training channel's data: data/<prefix>/."""
        return self.uri(f"data/{prefix.strip('/')}/")

    def source_archive(self) -> str:
        return self.uri(SOURCE_ARCHIVE)

    def launch_files(self, digest: str = STAND_IN_LAUNCH_FILES) -> str:
        """A drivers-contract job's unpacked code and SDK drivers: code/jobs/<hash>/ (content-addressed:
        the same files, the same prefix), with `code/` and `sm_drivers/` under it."""
        return self.uri(launch_files_key(digest))

    # serving
    def compiled_models(self, endpoint: str) -> str:
        return self.uri(f"models/compiled/{endpoint}/")

    def promoted(self, entry: str, digest: str) -> str:
        """A package promoted from another account, copied here (the target owns what it serves):
        models/promoted/<entry>/<digest>/ with the source's file names."""
        return self.uri(f"models/promoted/{entry}/{digest}/")

    def optimized(self, endpoint: str, job: str) -> str:
        """What an LLM optimization job writes (uncompressed files, served as an S3 prefix)."""
        return self.uri(f"optimized/{endpoint}/{job}/")

    def async_prefix(self, endpoint: str) -> str:
        return self.uri(f"async/{endpoint}")

    # batch transform
    def transform_input(self, key: str) -> str:
        return self.uri(f"transform/{key}/input/")

    def transform_output(self, key: str, job_name: str) -> str:
        """The output of one transform job ('{}' for a name the state machine formats in)."""
        return self.uri(f"transform/{key}/output/{job_name}/")

    # monitoring
    def baseline_data(self, endpoint: str) -> str:
        return self.uri(f"monitoring/{endpoint}/baseline-data/")

    def baseline(self, endpoint: str) -> str:
        return self.uri(f"monitoring/{endpoint}/baseline")

    def reports(self, endpoint: str) -> str:
        return self.uri(f"monitoring/{endpoint}/reports")

    # clusters
    @staticmethod
    def cluster_lifecycle_key(cluster: str) -> str:
        """Where a cluster's lifecycle scripts lie (under code/)."""
        return f"code/clusters/{cluster}/"

    def cluster_lifecycle(self, cluster: str) -> str:
        return self.uri(self.cluster_lifecycle_key(cluster))


def launch_files_key(digest: str = STAND_IN_LAUNCH_FILES) -> str:
    """The key of a drivers job's launch files: code/jobs/<digest>/ (S3Layout.launch_files' URI)."""
    return f"code/jobs/{digest}/"
