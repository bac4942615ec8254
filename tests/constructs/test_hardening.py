"""Resource hardening (issue 26, item 17): the artifact bucket refuses uploads encrypted under any key
but the project's (while clients that rely on its default encryption, and SageMaker writing with the
project key, still pass); the cluster's flow logs are encrypted with the project key."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.synth

KEY_ARN = {"Fn::GetAtt": ["Key961B73FD", "Arn"]}
SSE = "s3:x-amz-server-side-encryption"
KEY_ID = "s3:x-amz-server-side-encryption-aws-kms-key-id"
SSE_C = "s3:x-amz-server-side-encryption-customer-algorithm"


def _denies(statement: dict[str, Any], headers: dict[str, Any]) -> bool:
    """Whether a Deny statement's conditions all hold for a PutObject with these headers (condition
    key -> value), by IAM's documented rules for a key the request lacks: a negated operator
    (StringNotEquals) holds, *IfExists holds, a positive one (StringEquals) does not, and Null
    compares the key's absence with 'true'/'false'. So a Deny that must spare a request without the
    header pairs its test with Null 'false'."""
    for op, tests in statement.get("Condition", {}).items():
        for key, expected in tests.items():
            present = key in headers
            if op == "Null":
                holds = (not present) == (expected == "true")
            elif op == "StringEquals":
                holds = present and headers[key] == expected
            elif op in ("StringNotEquals", "StringNotEqualsIfExists"):
                holds = not present or headers[key] != expected
            else:
                raise AssertionError(f"an operator this test does not know: {op}")
            if not holds:
                return False
    return True


def _put_denied(statements: list[dict[str, Any]], headers: dict[str, Any]) -> bool:
    return any(
        s["Effect"] == "Deny"
        and "s3:PutObject" in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        and _denies(s, headers)
        for s in statements
    )


def _bucket_policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The artifact bucket's policy (its access-log bucket's is another)."""
    (policy,) = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy"
        and r["Properties"]["Bucket"].get("Ref", "").startswith("Artifacts")
        and "AccessLogs" not in r["Properties"]["Bucket"]["Ref"]
    ]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_the_bucket_refuses_uploads_under_any_key_but_the_project_s():
    from aws_cdk import App, Stack
    from aws_cdk import aws_kms as kms
    from aws_cdk.assertions import Template

    from sagestack.constructs import ArtifactBucket

    stack = Stack(App(), "Bare")
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    ArtifactBucket(stack, "Artifacts", encryption_key=key)
    statements = _bucket_policy_statements(Template.from_stack(stack).to_json())
    other_key = "arn:aws:kms:us-east-1:999999999999:key/0000"
    # clients that rely on the bucket's default encryption send no header: allowed
    assert not _put_denied(statements, {})
    # SageMaker writing a job's output with OutputDataConfig.KmsKeyId = the project key: allowed
    assert not _put_denied(statements, {SSE: "aws:kms", KEY_ID: KEY_ARN})
    assert not _put_denied(statements, {KEY_ID: KEY_ARN})
    # another key, the AWS managed key (aws:kms without a key id), SSE-S3, DSSE, SSE-C: refused
    assert _put_denied(statements, {SSE: "aws:kms", KEY_ID: other_key})
    assert _put_denied(statements, {KEY_ID: other_key})
    assert _put_denied(statements, {SSE: "aws:kms"})
    assert _put_denied(statements, {SSE: "AES256"})
    assert _put_denied(statements, {SSE: "aws:kms:dsse", KEY_ID: KEY_ARN})
    assert _put_denied(statements, {SSE_C: "AES256"})


def _kms_key_values(node: Any) -> list[Any]:
    """Every value a template gives a KmsKeyId, as a property or inside a state machine definition
    (a Fn::Join whose string part ends with '"KmsKeyId":"' is followed by the value's token)."""
    found: list[Any] = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("KmsKeyId", "VolumeKmsKeyId"):
                found.append(v)
            elif k == "Fn::Join":
                parts = v[1]
                for part, following in pairwise(parts):
                    if isinstance(part, str) and part.endswith(('"KmsKeyId":"', '"VolumeKmsKeyId":"')):
                        found.append(following)
                found += _kms_key_values(parts)
            else:
                found += _kms_key_values(v)
    elif isinstance(node, list):
        for v in node:
            found += _kms_key_values(v)
    return found


def test_every_sagemaker_write_names_the_key_the_bucket_policy_allows(example_app):
    """The Deny compares the header with the project key's ARN, so every KmsKeyId a SageMaker request
    (job output, transform output, capture, async results, monitoring) carries must be that ARN: the
    Foundation's Key.Arn itself, or another stack's import of exactly that export."""
    out = Path(example_app.assembly.directory)
    checked = 0
    for env, stage in example_app.stages.items():
        foundation = json.loads(
            (out / f"assembly-{env}" / f"{stage.foundation.artifact_id}.template.json").read_text()
        )
        statements = _bucket_policy_statements(foundation)
        assert _put_denied(statements, {KEY_ID: "arn:aws:kms:us-east-1:999999999999:key/0000"})
        assert not _put_denied(statements, {SSE: "aws:kms", KEY_ID: KEY_ARN}), env
        exports = {
            o["Export"]["Name"]
            for o in foundation.get("Outputs", {}).values()
            if o.get("Value") == KEY_ARN and "Export" in o
        }
        for path in (out / f"assembly-{env}").glob("*.template.json"):
            for value in _kms_key_values(json.loads(path.read_text())):
                assert value == KEY_ARN or value.get("Fn::ImportValue") in exports, (path.name, value)
                checked += 1
    assert checked >= 20
