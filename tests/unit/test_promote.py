"""`sagestack promote` within one account (moto's default account holds every environment here),
against a moto server holding a registry: the pin is written into the target overlay with its
comments kept, the package is the entry's own, and packages that must not be served are refused.
Across accounts: test_promote_accounts.py."""

from __future__ import annotations

import pytest

from sagestack.ops.promote import PromotionError, promote
from tests.conftest import MINIMAL
from tests.support.moto_server import running_moto

SPEC = (
    MINIMAL
    + """\
endpoints:
  digits:
    model: {from: classifier}
    compile: {target_device: ml_c5, framework_version: "2.0", input_shapes: {input0: [1, 1, 8, 8]}}
    instance_type: ml.c5.xlarge
"""
)
STAGING = """\
# staging: reviewed before prod
account: "123456789012"   # the staging account
endpoints:
  digits:
    autoscaling: {min: 1, max: 2}   # keep it small
"""
PROD = """\
account: "123456789012"
require_approved_models: true  # only reviewed models reach prod
"""


@pytest.fixture(scope="module")
def registry():
    with running_moto() as server:
        yield server


@pytest.fixture
def sm(registry, monkeypatch):
    registry.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", registry.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = registry.client("sagemaker")
    client.create_model_package_group(ModelPackageGroupName="digits-dev")
    return client


def _package(
    sm, status: str, instance_types=("ml.c5.large", "ml.c5.xlarge"), entry: str | None = "digits"
) -> str:
    """A package as sagestack's pipelines register one for `entry` (None: registered elsewhere)."""
    arn: str = sm.create_model_package(
        **({"CustomerMetadataProperties": {"sagestack:endpoint": entry}} if entry else {}),
        ModelPackageGroupName="digits-dev",
        ModelApprovalStatus=status,
        InferenceSpecification={
            "Containers": [
                {"Image": "123.dkr.ecr.us-east-1.amazonaws.com/x:1", "ModelDataUrl": "s3://b/m.tar.gz"}
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedRealtimeInferenceInstanceTypes": list(instance_types),
        },
    )["ModelPackageArn"]
    return arn


@pytest.fixture
def proj(project):
    return project.spec(SPEC).env("dev").env("staging", STAGING).env("prod", PROD)


def test_promotion_writes_the_pin_and_keeps_comments(proj, sm):
    arn = _package(sm, "PendingManualApproval")
    result = promote(proj.root, "digits", "dev", "staging", package_arn=arn)
    assert result.changed and result.status == "PendingManualApproval" and result.previous is None
    text = (proj.root / "config/envs/staging.yaml").read_text()
    assert text.startswith("# staging: reviewed before prod\n")
    assert '"123456789012"   # the staging account' in text
    assert "autoscaling: {min: 1, max: 2}   # keep it small" in text
    assert proj.load("staging").spec.endpoints["digits"].model_package == arn
    # promoting it again changes nothing
    assert not promote(proj.root, "digits", "dev", "staging", package_arn=arn).changed


def test_prod_takes_approved_packages_only(proj, sm):
    pending = _package(sm, "PendingManualApproval")
    with pytest.raises(
        PromotionError, match="is PendingManualApproval, and 'prod' takes Approved packages only"
    ):
        promote(proj.root, "digits", "staging", "prod", package_arn=pending)
    assert "model_package" not in (proj.root / "config/envs/prod.yaml").read_text()
    approved = _package(sm, "Approved")
    result = promote(proj.root, "digits", "staging", "prod", package_arn=approved)
    assert result.status == "Approved"
    assert proj.load("prod").spec.endpoints["digits"].model_package == approved


def test_rejected_packages_are_never_promoted(proj, sm):
    rejected = _package(sm, "Rejected")
    with pytest.raises(PromotionError, match="is Rejected"):
        promote(proj.root, "digits", "dev", "staging", package_arn=rejected)


def test_without_a_package_the_newest_approved_of_the_source_group_is_taken(proj, sm):
    _package(sm, "Approved")
    newest = _package(sm, "Approved")
    _package(sm, "PendingManualApproval")
    assert promote(proj.root, "digits", "dev", "staging").package_arn == newest


def test_the_newest_approved_package_is_the_entrys_own(project, sm):
    """One group holds every entry's packages (issue 38, item 1): a transform's and another
    endpoint's packages lying newer are not taken for 'digits'; nor one that records no entry."""
    proj = (
        project.spec(
            SPEC + "  other:\n    model: {from: classifier}\n    instance_type: ml.c5.xlarge\n"
            "transforms:\n  score:\n    model: {from: classifier}\n    instance_type: [ml.m5.xlarge]\n"
        )
        .env("dev")
        .env("staging", STAGING)
    )
    own = _package(sm, "Approved")
    _package(sm, "Approved", entry="other")  # a real-time endpoint's, for ml.c5.xlarge too
    _package(sm, "Approved", entry=None)
    transform: str = sm.create_model_package(
        ModelPackageGroupName="digits-dev",
        ModelApprovalStatus="Approved",
        CustomerMetadataProperties={"sagestack:transform": "score"},
        InferenceSpecification={
            "Containers": [
                {"Image": "123.dkr.ecr.us-east-1.amazonaws.com/x:1", "ModelDataUrl": "s3://b/t.tar.gz"}
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedTransformInstanceTypes": ["ml.m5.xlarge"],
        },
    )["ModelPackageArn"]
    assert promote(proj.root, "digits", "dev", "staging").package_arn == own
    assert promote(proj.root, "score", "dev", "staging").package_arn == transform
    with pytest.raises(
        PromotionError, match=r"was registered for transform 'score'; 'digits' is a real-time"
    ) as e:
        promote(proj.root, "digits", "dev", "staging", package_arn=transform)
    assert e.value.exit_code == 2 and f"its newest Approved package is {own}" in str(e.value)


def test_a_package_for_another_instance_family_is_refused(proj, sm):
    arn = _package(sm, "Approved", instance_types=("ml.inf1.xlarge",))
    with pytest.raises(PromotionError, match=r"supports ml\.inf1\.xlarge, not ml\.c5\.xlarge"):
        promote(proj.root, "digits", "dev", "staging", package_arn=arn)


def test_offline_promotion_is_refused_where_approval_is_required(proj, sm):
    arn = _package(sm, "Approved")
    with pytest.raises(PromotionError, match="cannot be checked with --offline"):
        promote(proj.root, "digits", "staging", "prod", package_arn=arn, offline=True)
    assert promote(proj.root, "digits", "dev", "staging", package_arn=arn, offline=True).status is None


def test_unknown_endpoint_and_wrong_region_are_refused(proj, sm):
    with pytest.raises(PromotionError, match="has no endpoint, component or transform 'digit'"):
        promote(proj.root, "digit", "dev", "staging")
    with pytest.raises(PromotionError, match="not a model package ARN in us-east-1"):
        promote(
            proj.root,
            "digits",
            "dev",
            "staging",
            package_arn="arn:aws:sagemaker:eu-west-1:123456789012:model-package/digits-dev/1",
        )


def test_cli_reports_a_refusal_without_a_traceback(proj, sm):
    from typer.testing import CliRunner

    from sagestack.cli import app

    rejected = _package(sm, "Rejected")
    result = CliRunner().invoke(
        app,
        [
            "promote",
            "digits",
            "--from",
            "dev",
            "--to",
            "staging",
            "--package",
            rejected,
            "--root",
            str(proj.root),
        ],
    )
    assert result.exit_code == 1
    assert "not promoted" in result.output and "Rejected" in result.output
    assert "Traceback" not in result.output


def test_a_component_and_a_transform_are_promoted_like_endpoints(project, sm):
    package = _package(sm, "Approved", instance_types=("ml.g5.12xlarge",), entry=None)
    transform_package: str = sm.create_model_package(
        ModelPackageGroupName="digits-dev",
        CustomerMetadataProperties={"sagestack:transform": "score"},
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [
                {"Image": "123.dkr.ecr.us-east-1.amazonaws.com/x:1", "ModelDataUrl": "s3://b/m.tar.gz"}
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedTransformInstanceTypes": ["ml.m5.xlarge"],
        },
    )["ModelPackageArn"]
    spec = (
        MINIMAL
        + "endpoints:\n  shared:\n    instance_type: ml.g5.12xlarge\n    components:\n"
        + f'      small: {{model_package: "{package}", memory_mb: 4096, accelerators: 1}}\n'
        + "transforms:\n  score:\n    model: {from: classifier}\n    instance_type: [ml.m5.xlarge, ml.c5.xlarge]\n"
    )
    proj = project.spec(spec).env("dev").env("prod", PROD)
    newer = _package(sm, "Approved", instance_types=("ml.g5.12xlarge",), entry=None)
    result = promote(proj.root, "shared/small", "dev", "prod", package_arn=newer)
    assert result.previous == package and result.changed
    assert proj.load("prod").spec.endpoints["shared"].components["small"].model_package == newer
    assert proj.load("dev").spec.endpoints["shared"].components["small"].model_package == package
    # the transform's package must support every candidate: ml.c5.xlarge is missing
    with pytest.raises(
        PromotionError, match=r"not ml\.c5\.xlarge \(transforms\.score\.instance_type in prod\)"
    ):
        promote(proj.root, "score", "dev", "prod", package_arn=transform_package)
    proj.spec(spec.replace("[ml.m5.xlarge, ml.c5.xlarge]", "[ml.m5.xlarge]"))
    promote(proj.root, "score", "dev", "prod", package_arn=transform_package)
    pinned = proj.load("prod").spec.transforms["score"]
    assert pinned.model_package == transform_package and pinned.model is not None  # dev trains, prod pins
    with pytest.raises(PromotionError, match=r"there: shared, shared/small, score"):
        promote(proj.root, "shared/large", "dev", "prod", package_arn=newer)
