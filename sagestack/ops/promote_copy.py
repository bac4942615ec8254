"""The copy side of `sagestack promote` across accounts: the target owns what it serves.

The source package's artifacts (its ModelDataUrl object, or every object under an S3 prefix) are
read through the source's promotion reader role, written into the target's artifact bucket under
`S3Layout.promoted(entry, digest)` with the target's credentials (encrypted by the bucket's default,
the target's key), re-read and verified by digest, and registered as a package of the target's own
group: the same InferenceSpecification pointing at the copy, the same approval status, and the
lineage in CustomerMetadataProperties (`sagestack:promoted-from`, `sagestack:promoted-digest`, and
the source's own metadata). A second promotion of the same source package finds that copy.

The digest: sha256 over the sorted '<relative key>\\t<sha256 of its bytes>' lines, 16 hex digits.
"""

from __future__ import annotations

import copy
import hashlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.catalog.service_model import RequestValidationError, validate_request
from sagestack.core.layout import S3Layout
from sagestack.ops.account import aws_client
from sagestack.ops.promote_registry import Credentials, PromotionError, denied, packages

CHUNK = 8 * 1024 * 1024
PROMOTED_FROM = "sagestack:promoted-from"
PROMOTED_DIGEST = "sagestack:promoted-digest"
# Container members that describe the source's copy, not the model (read-only in a new package)
NOT_COPIED = ("ModelDataETag",)


@dataclass(frozen=True)
class Artifact:
    container: int
    rel: str  # the name under the copy's prefix
    bucket: str
    key: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Copied:
    arn: str  # the target's own package
    digest: str
    prefix: str  # s3://<target bucket>/models/promoted/<entry>/<digest>/
    objects: int
    bytes: int
    reused: bool  # an earlier promotion of the same source package was found


def split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _locations(description: dict[str, Any]) -> list[tuple[int, str, bool]]:
    """(container index, S3 URI, whether it is a prefix) of each artifact the package serves."""
    out: list[tuple[int, str, bool]] = []
    containers = (description.get("InferenceSpecification") or {}).get("Containers") or []
    for i, c in enumerate(containers):
        if c.get("ModelDataUrl"):
            out.append((i, str(c["ModelDataUrl"]), False))
        source = (c.get("ModelDataSource") or {}).get("S3DataSource")
        if source:
            out.append((i, str(source["S3Uri"]), source.get("S3DataType") == "S3Prefix"))
    return out


def digest_of(artifacts: list[Artifact]) -> str:
    lines = sorted(f"{a.rel}\t{a.sha256}\n" for a in artifacts)
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:16]


def _stream(s3: Any, bucket: str, key: str) -> Iterator[bytes]:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    yield from body.iter_chunks(CHUNK)


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    return sorted(keys)


def fetch(reader_s3: Any, description: dict[str, Any], into: Path, creds: Credentials) -> list[Artifact]:
    """Every artifact of the package, read through the reader role into `into` and hashed."""
    from botocore.exceptions import BotoCoreError, ClientError

    many = len({i for i, _, _ in _locations(description)}) > 1
    artifacts: list[Artifact] = []
    for index, uri, is_prefix in _locations(description):
        bucket, key = split_s3(uri)
        try:
            keys = _keys(reader_s3, bucket, key) if is_prefix else [key]
            if not keys:
                raise PromotionError(f"{uri} holds no objects: nothing to promote")
            for k in keys:
                rel = (f"{index}/" if many else "") + (k[len(key) :] if is_prefix else k.rsplit("/", 1)[-1])
                path = into / str(len(artifacts))
                h, size = hashlib.sha256(), 0
                with path.open("wb") as f:
                    for chunk in _stream(reader_s3, bucket, k):
                        h.update(chunk)
                        size += len(chunk)
                        f.write(chunk)
                artifacts.append(Artifact(index, rel, bucket, k, h.hexdigest(), size))
        except (ClientError, BotoCoreError) as e:
            hint = f"; {creds.reader_needs()}" if denied(e) else ""
            raise PromotionError(f"cannot read {uri} as {creds.reader_role_arn}: {e}{hint}") from None
    return artifacts


def target_bucket(cloudformation: Any, stack: str, creds: Credentials) -> str:
    """The target's artifact bucket: its FoundationStack's ArtifactsBucketName output."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except (ClientError, BotoCoreError) as e:
        hint = creds.needs() if denied(e) else f"deploy it first: cdk deploy '{creds.target}/*'"
        raise PromotionError(f"cannot read stack {stack} ({e}); {hint}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if "ArtifactsBucketName" not in outputs:
        raise PromotionError(
            f"stack {stack} has no ArtifactsBucketName output; redeploy it: cdk deploy '{creds.target}/*'"
        )
    return str(outputs["ArtifactsBucketName"])


def existing_copy(sm: Any, group: str, source_arn: str) -> dict[str, Any] | None:
    """A package of the target's group promoted from `source_arn` already (newest first)."""
    for d in packages(sm, group, approved_only=False):
        if (d.get("CustomerMetadataProperties") or {}).get(PROMOTED_FROM) == source_arn:
            return d
    return None


def _write_and_verify(
    s3: Any, artifacts: list[Artifact], staged: Path, bucket: str, prefix: str, creds: Credentials
) -> None:
    """Upload each staged artifact under `prefix`, then re-read every copy and hash it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        for n, a in enumerate(artifacts):
            s3.upload_file(str(staged / str(n)), bucket, prefix + a.rel)
        for a in artifacts:
            h = hashlib.sha256()
            for chunk in _stream(s3, bucket, prefix + a.rel):
                h.update(chunk)
            if h.hexdigest() != a.sha256:
                raise PromotionError(
                    f"the copy s3://{bucket}/{prefix}{a.rel} does not read back as s3://{a.bucket}/{a.key} "
                    f"(sha256 {h.hexdigest()[:12]}, not {a.sha256[:12]}); nothing was registered, try again"
                )
    except (ClientError, BotoCoreError) as e:
        hint = f"; {creds.needs()}" if denied(e) else ""
        raise PromotionError(f"cannot write the copy under s3://{bucket}/{prefix}: {e}{hint}") from None


def copied_request(
    description: dict[str, Any],
    *,
    group: str,
    prefix_uri: str,
    digest: str,
    artifacts: list[Artifact],
    target_env: str,
    tags: dict[str, str],
) -> dict[str, Any]:
    """CreateModelPackage of the copy: the source's InferenceSpecification pointing at `prefix_uri`,
    its approval status, its metadata plus where it was promoted from."""
    source_arn = str(description["ModelPackageArn"])
    spec = copy.deepcopy(description["InferenceSpecification"])
    many = len({a.container for a in artifacts}) > 1
    for i, c in enumerate(spec.get("Containers") or []):
        for member in NOT_COPIED:
            c.pop(member, None)
        base = prefix_uri + (f"{i}/" if many else "")
        if c.get("ModelDataUrl"):
            rel = next(a.rel for a in artifacts if a.container == i)
            c["ModelDataUrl"] = prefix_uri + rel
        source = (c.get("ModelDataSource") or {}).get("S3DataSource")
        if source:
            prefix = source.get("S3DataType") == "S3Prefix"
            source["S3Uri"] = (
                base if prefix else prefix_uri + next(a.rel for a in artifacts if a.container == i)
            )
            source.pop("ETag", None)
    meta = dict(description.get("CustomerMetadataProperties") or {})
    meta.update({PROMOTED_FROM: source_arn, PROMOTED_DIGEST: digest})
    request: dict[str, Any] = {
        # the same source and copy register once, however often the call is retried
        "ClientToken": hashlib.md5(
            f"{group}/{source_arn}/{digest}".encode(), usedforsecurity=False
        ).hexdigest(),
        "ModelPackageGroupName": group,
        "ModelPackageDescription": f"sagestack {target_env}: promoted from {source_arn} (digest {digest})"[
            :1024
        ],
        "ModelApprovalStatus": str(description.get("ModelApprovalStatus", "PendingManualApproval")),
        "InferenceSpecification": spec,
        "CustomerMetadataProperties": meta,
    }
    if tags:
        request["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
    return request


def copy_package(
    description: dict[str, Any],
    *,
    reader_s3: Any,
    entry: str,
    group: str,
    stack: str,
    target_env: str,
    tags: dict[str, str],
    creds: Credentials,
) -> Copied:
    """Copy `description`'s package into the target (the caller's credentials): verified objects
    under models/promoted/<entry>/<digest>/ and a package of `group` naming them."""
    from botocore.exceptions import BotoCoreError, ClientError

    source_arn = str(description["ModelPackageArn"])
    own_images = [
        c["Image"]
        for c in description["InferenceSpecification"].get("Containers", [])
        if str(c.get("Image", "")).startswith(f"{creds.source_account}.dkr.ecr.")
    ]
    if own_images:
        raise PromotionError(
            f"{source_arn} serves {own_images[0]}, an image in {creds.source}'s own registry: "
            f"{target_env} would depend on {creds.source}'s ECR for as long as it serves. Serve an AWS "
            f"image, or push the image to {target_env}'s account and register a package naming it there"
        )
    sm, s3 = aws_client("sagemaker", creds.region), aws_client("s3", creds.region)
    try:
        found = existing_copy(sm, group, source_arn)
    except (ClientError, BotoCoreError) as e:
        raise PromotionError(f"cannot list group {group}: {e}. {creds.needs()}") from None
    if found is not None:
        meta = found.get("CustomerMetadataProperties") or {}
        return Copied(str(found["ModelPackageArn"]), str(meta.get(PROMOTED_DIGEST, "")), "", 0, 0, True)
    bucket = target_bucket(aws_client("cloudformation", creds.region), stack, creds)
    with tempfile.TemporaryDirectory(prefix="sagestack-promote-") as tmp:
        artifacts = fetch(reader_s3, description, Path(tmp), creds)
        digest = digest_of(artifacts)
        prefix_uri = S3Layout(bucket).promoted(entry, digest)
        _write_and_verify(s3, artifacts, Path(tmp), bucket, split_s3(prefix_uri)[1], creds)
    request = copied_request(
        description,
        group=group,
        prefix_uri=prefix_uri,
        digest=digest,
        artifacts=artifacts,
        target_env=target_env,
        tags=tags,
    )
    try:
        validate_request("CreateModelPackage", request)
    except RequestValidationError as e:
        raise PromotionError(f"{source_arn} cannot be registered again as it is described: {e}") from None
    try:
        arn = str(sm.create_model_package(**request)["ModelPackageArn"])
    except (ClientError, BotoCoreError) as e:
        hint = f" {creds.needs()}" if denied(e) else ""
        raise PromotionError(f"cannot register the copy in group {group}: {e}.{hint}") from None
    return Copied(arn, digest, prefix_uri, len(artifacts), sum(a.size for a in artifacts), False)
