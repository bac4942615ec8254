"""What only a deployment knows, as one type with three kinds of instance.

A request is rendered once, by its feature's renderer, from the spec and a `Deployment`:
- `Deployment.stand_ins(...)`: concrete stand-ins (core.standins) — what `plan`, `render`, `lock`
  and synth validation render with, so every request validates against botocore's model;
- tokens: the constructs build one from CloudFormation tokens (the execution role's ARN, the
  bucket's name, the key's ARN) — what the templates hold;
- `Deployment.local(...)`: the local emulation's values (`sagestack local …`), whose bucket is the
  folder `.sagestack/local/<env>/s3/sagestack-local/`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sagestack.core.layout import S3Layout
from sagestack.core.standins import SAMPLE_ACCOUNT, STAND_IN_BUCKET, stand_in_key_arn, stand_in_role_arn

LOCAL_ACCOUNT = "000000000000"
LOCAL_BUCKET = "sagestack-local"  # what s3://<bucket>/ is called locally


@dataclass(frozen=True)
class Deployment:
    region: str
    account: str
    role_arn: str  # the execution role
    bucket: str  # the artifact bucket
    kms_key_id: str  # the project key
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def s3(self) -> S3Layout:
        return S3Layout(self.bucket)

    def tagged(self, key: str, value: str) -> Deployment:
        """This deployment with one more request tag (e.g. the endpoint a request belongs to),
        the tags kept in key order as the stack's tags render."""
        return replace(self, tags=tuple(sorted({**dict(self.tags), key: value}.items())))

    @classmethod
    def stand_ins(
        cls, *, region: str, account: str | None = None, tags: tuple[tuple[str, str], ...] = ()
    ) -> Deployment:
        """Stand-ins for an environment (its account when it names one, else a sample account)."""
        account = account or SAMPLE_ACCOUNT
        return cls(
            region=region,
            account=account,
            role_arn=stand_in_role_arn(account),
            bucket=STAND_IN_BUCKET,
            kms_key_id=stand_in_key_arn(account, region),
            tags=tags,
        )

    @classmethod
    def local(cls, *, region: str, tags: tuple[tuple[str, str], ...] = ()) -> Deployment:
        """The local emulation's values: nothing here reaches AWS."""
        return cls(
            region=region,
            account=LOCAL_ACCOUNT,
            role_arn=f"arn:aws:iam::{LOCAL_ACCOUNT}:role/sagestack-local",
            bucket=LOCAL_BUCKET,
            kms_key_id=f"arn:aws:kms:{region}:{LOCAL_ACCOUNT}:key/local",
            tags=tags,
        )
