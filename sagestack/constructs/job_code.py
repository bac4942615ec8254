"""A training job's code where SageMaker reads it: the source archive (the toolkit contract's
`sagemaker_submit_directory`) as one deterministic asset per folder, and, for `launcher: drivers`, the
job's launch files (the code unpacked and the SDK's drivers) unpacked under a content-addressed
prefix of the artifact bucket. Each is staged once per content in the cloud assembly."""

from __future__ import annotations

import shutil
import weakref
from pathlib import Path
from typing import Any

from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

from sagestack.constructs.artifact_bucket import ArtifactBucketBase
from sagestack.constructs.execution_role import ExecutionRoleBase
from sagestack.constructs.grants import first_time
from sagestack.constructs.prefix_deployment import deploy_to_prefix
from sagestack.constructs.read_once import attribute, stack_of, stage_of
from sagestack.core.layout import launch_files_key
from sagestack.core.names import Names
from sagestack.core.sourcedir import SourceArchive, pack_source_dir
from sagestack.training.launch_contract import launch_contract
from sagestack.training.models import JobSpec

_ARCHIVES: weakref.WeakKeyDictionary[Any, dict[Path, SourceArchive]] = weakref.WeakKeyDictionary()
_ASSETS: weakref.WeakKeyDictionary[Any, dict[Path, s3_assets.Asset]] = weakref.WeakKeyDictionary()
_LAUNCH_FILES: weakref.WeakKeyDictionary[Any, dict[str, s3_deployment.BucketDeployment]] = (
    weakref.WeakKeyDictionary()
)


def _archive(scope: Construct, code: Path) -> SourceArchive:
    """The folder's deterministic archive: jobs of one folder share it, packed once per stage."""
    stage = stage_of(scope)
    packed = _ARCHIVES.setdefault(stage if stage is not None else stack_of(scope), {})
    return packed.get(code.resolve()) or packed.setdefault(code.resolve(), pack_source_dir(code))


def _staging(scope: Construct, folder: str) -> Path:
    """A folder of the cloud assembly's outdir that files are staged in before CDK takes them."""
    stage = stage_of(scope)
    return Path(attribute(stage, "outdir") if stage is not None else ".") / folder


def source_asset(scope: Construct, key: str, code: Path) -> tuple[s3_assets.Asset, str]:
    """The code as one deterministic archive per folder, written once per synth, and its sha256."""

    archive = _archive(scope, code)
    outdir = _staging(scope, ".sagestack-sources")
    outdir.mkdir(parents=True, exist_ok=True)
    tarball = outdir / f"sourcedir-{archive.sha256[:16]}.tar.gz"
    if not tarball.exists():
        tarball.write_bytes(archive.data)
    # In the parent scope, as the stacks always created it (keeps asset IDs stable); jobs of one
    # folder in one stack share the first one's asset, as they share its file (an Asset is two calls
    # into jsii and a staging per job; the template names the same object either way).
    assets = _ASSETS.setdefault(scope, {})
    if tarball not in assets:
        assets[tarball] = s3_assets.Asset(scope, f"Source-{key}", path=str(tarball))
    return assets[tarball], archive.sha256


def launch_files(
    scope: Construct,
    key: str,
    names: Names,
    job: JobSpec,
    code: Path,
    artifacts: ArtifactBucketBase,
    execution_role: ExecutionRoleBase,
) -> tuple[str, s3_deployment.BucketDeployment] | None:
    """launcher: drivers — the job's code (the archive's files, unpacked) and drivers, staged once per
    content in the assembly's outdir and unpacked under code/jobs/<digest>/ of the artifact bucket at
    deploy; the execution role may read that prefix. Returns the digest and the deployment."""
    files = launch_contract(job).launch_files(job, _archive(scope, code))
    if files is None:
        return None
    staged = _staging(scope, ".sagestack-launch-files") / files.digest
    if not staged.exists():
        partial_dir = staged.with_name(f"{files.digest}.partial")
        shutil.rmtree(partial_dir, ignore_errors=True)
        files.write(partial_dir)
        partial_dir.rename(staged)
    prefix = launch_files_key(files.digest)
    # One deployment per content and stack: jobs whose files are the same share the prefix.
    deployed = _LAUNCH_FILES.setdefault(stack_of(scope), {})
    if prefix not in deployed:
        deployed[prefix] = deploy_to_prefix(
            scope,
            f"LaunchFiles-{files.digest}",
            source=str(staged),
            artifacts=artifacts,
            prefix=prefix,
            what=f"The launch files (code and SageMaker SDK drivers) of training job '{key}'",
            role_description=f"Copies the launch files of sagestack {names.prefix} training jobs",
            role_id="LaunchFilesDeployRole",
            retain_on_delete=True,  # content-addressed: a job started before a deploy may still read them
        )
    if first_time(execution_role, "launch files", prefix):
        execution_role.grant_prefix_read(
            artifacts.bucket, prefix, "A drivers-contract job's code and SageMaker SDK drivers"
        )
    return files.digest, deployed[prefix]
