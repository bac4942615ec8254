"""`sagestack promote --shadow` pins a candidate as an endpoint's shadow variant in the target
overlay; a plain `sagestack promote` of an endpoint with a shadow then makes the candidate
production and removes the shadow. On a copy of the example project, against a moto registry:
the overlay's text after each step (comments kept), and the result loads, validates and renders."""

from __future__ import annotations

import re

import pytest

from sagestack.ops.promote import PromotionError, promote
from tests.support.accounts import account
from tests.support.moto_server import running_moto

PROD = "111111111111"  # the example's prod account: the candidates are prod's own packages


@pytest.fixture(scope="module")
def registry():
    with running_moto() as server:
        yield server


@pytest.fixture
def sm(registry, monkeypatch):
    registry.reset()
    prod = account(registry, PROD)
    prod.use(monkeypatch)
    client = prod.client("sagemaker")
    client.create_model_package_group(ModelPackageGroupName="digits-prod")
    return client


def _prod_pin(example) -> str:
    """What the example's prod serves (its pin, a package of prod's own group)."""
    pin = example.load("prod").spec.endpoints["digits"].model_package
    assert pin is not None and pin.split(":")[4] == PROD
    return str(pin)


def _package(sm, status: str, instance_types=("ml.c5.large", "ml.c5.xlarge")) -> str:
    arn: str = sm.create_model_package(
        ModelPackageGroupName="digits-prod",
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


def _validates(example, env: str):
    """The overlay loads with every rule, and every request of the environment renders."""
    from sagestack.project import resolve_environment
    from sagestack.project.requests import render_environment

    loaded = example.load(env)
    render_environment(resolve_environment(loaded), example.root)
    return loaded.spec


def test_a_shadow_then_its_full_promotion_on_the_example(example_project, sm):
    prod_pin = _prod_pin(example_project)
    prod = example_project.root / "config/envs/prod.yaml"
    before = prod.read_text()
    candidate = _package(sm, "Approved")

    step1 = promote(example_project.root, "digits", None, "prod", package_arn=candidate, shadow=True)
    assert step1.changed and step1.status == "Approved" and step1.previous is None
    assert step1.changes == [f"endpoints.digits.shadow.model_package: (none) → {candidate}"]
    assert prod.read_text() == before.replace(
        "    autoscaling: {min: 2, max: 10}\n",
        f'    autoscaling: {{min: 2, max: 10}}\n    shadow:\n      model_package: "{candidate}"\n',
    )
    spec = _validates(example_project, "prod").endpoints["digits"]
    assert spec.model_package == prod_pin
    assert spec.shadow is not None and spec.shadow.model_package == candidate
    # the same candidate again changes nothing
    assert not promote(
        example_project.root, "digits", None, "prod", package_arn=candidate, shadow=True
    ).changed

    step2 = promote(example_project.root, "digits", None, "prod")
    assert step2.changed and step2.package_arn == candidate and step2.previous == prod_pin
    assert step2.changes == [
        f"endpoints.digits.model_package: {prod_pin} → {candidate}",
        f"endpoints.digits.shadow: removed (it tested {candidate})",
    ]
    assert prod.read_text() == before.replace(f'"{prod_pin}"', f'"{candidate}"')
    spec = _validates(example_project, "prod").endpoints["digits"]
    assert spec.model_package == candidate and spec.shadow is None


def test_the_candidate_can_come_from_a_source_environments_pin(example_project, registry, sm):
    """Staging's pin is a package of staging's account: prod shadow-tests its own copy of it, and
    the full promotion after it takes that copy (staging's pin names the same model)."""
    staging = account(registry, "222222222222")
    bucket = staging.foundation("digits", "staging")
    staging.reader_role("digits", "staging", trusted=PROD)
    account(registry, PROD).foundation_stack("digits", "prod")
    staging.client("s3").put_object(Bucket=bucket, Key="models/compiled/digits/model.tar.gz", Body=b"m")
    candidate = staging.client("sagemaker").create_model_package(
        ModelPackageGroupName="digits-staging",
        ModelApprovalStatus="Approved",
        InferenceSpecification={
            "Containers": [
                {
                    "Image": "123.dkr.ecr.us-east-1.amazonaws.com/x:1",
                    "ModelDataUrl": f"s3://{bucket}/models/compiled/digits/model.tar.gz",
                }
            ],
            "SupportedContentTypes": ["application/json"],
            "SupportedResponseMIMETypes": ["application/json"],
            "SupportedRealtimeInferenceInstanceTypes": ["ml.c5.xlarge"],
        },
        CustomerMetadataProperties={"sagestack:endpoint": "digits"},
    )["ModelPackageArn"]
    staging_file = example_project.root / "config/envs/staging.yaml"
    # staging's overlay already has an endpoints: section (its LLM endpoint, and digits measured on
    # registration, which a pinned package has none of): the pin takes digits' place there
    overlay = re.sub(r"  digits:\n(    .*\n)*", "", staging_file.read_text())
    staging_file.write_text(
        overlay.replace("endpoints:\n", f'endpoints:\n  digits:\n    model_package: "{candidate}"\n')
    )
    result = promote(example_project.root, "digits", "staging", "prod", shadow=True)
    copy = result.package_arn
    assert copy.split(":")[4] == PROD and result.copied is not None
    assert _validates(example_project, "prod").endpoints["digits"].shadow.model_package == copy
    full = promote(example_project.root, "digits", "staging", "prod")
    assert full.kind == "shadow-promoted" and full.package_arn == copy


def test_a_shadow_in_the_project_file_is_switched_off_in_the_overlay(example_project, sm):
    """The full promotion removes shadow: where the overlay sets it; one the project file sets is
    overridden with `shadow: null`, so the promoted environment runs no shadow."""
    candidate = _package(sm, "Approved")
    spec_file = example_project.root / "config/sagestack.yaml"
    spec_file.write_text(
        spec_file.read_text().replace(
            "    batching: {max_batch_size: 16, max_delay_ms: 5}\n",
            "    batching: {max_batch_size: 16, max_delay_ms: 5}\n"
            f'    shadow: {{model_package: "{candidate}", sampling_percent: 20}}\n',
        )
    )
    prod = example_project.root / "config/envs/prod.yaml"
    before = prod.read_text()
    prod_pin = _prod_pin(example_project)
    result = promote(example_project.root, "digits", None, "prod")
    assert result.changes[-1] == f"endpoints.digits.shadow: removed (it tested {candidate})"
    assert prod.read_text() == before.replace(f'"{prod_pin}"', f'"{candidate}"').replace(
        "    autoscaling: {min: 2, max: 10}\n", "    autoscaling: {min: 2, max: 10}\n    shadow: null\n"
    )
    assert _validates(example_project, "prod").endpoints["digits"].shadow is None


PACKAGE = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "    model_package: PIN\n    serverless: {memory_mb: 2048}\n",
            "a serverless endpoint cannot have a shadow variant",
        ),
        (
            "    instance_type: ml.g5.12xlarge\n    components:\n"
            "      small: {model_package: PIN, memory_mb: 4096, accelerators: 1}\n",
            "an endpoint with inference components cannot have a shadow variant",
        ),
        (
            "    model_package: PIN\n    instance_type: ml.c5.xlarge\n    async: {}\n",
            "an asynchronous endpoint cannot have a shadow variant",
        ),
        (
            "    model: {from: classifier}\n    instance_type: ml.c5.xlarge\n",
            "'dev' serves no production model at 'web' yet (no model_package pinned)",
        ),
    ],
)
def test_endpoints_that_cannot_have_a_shadow_are_refused(project, sm, body, message):
    from tests.conftest import MINIMAL

    project.spec(MINIMAL + "endpoints:\n  web:\n" + body.replace("PIN", f'"{PACKAGE}"')).env("dev")
    before = (project.root / "config/envs/dev.yaml").read_text()
    with pytest.raises(PromotionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        promote(project.root, "web", None, "dev", package_arn=_package(sm, "Approved"), shadow=True)
    assert (project.root / "config/envs/dev.yaml").read_text() == before


def test_what_is_already_production_rejected_or_unapproved_is_not_shadowed(example_project, sm):
    root = example_project.root
    prod_pin = _prod_pin(example_project)
    with pytest.raises(PromotionError, match="is already production at 'digits' in 'prod'"):
        promote(root, "digits", None, "prod", package_arn=prod_pin, shadow=True, offline=False)
    with pytest.raises(PromotionError, match="is Rejected"):
        promote(root, "digits", None, "prod", package_arn=_package(sm, "Rejected"), shadow=True)
    with pytest.raises(PromotionError, match="'prod' takes Approved packages only"):
        promote(root, "digits", None, "prod", package_arn=_package(sm, "PendingManualApproval"), shadow=True)
    with pytest.raises(PromotionError, match="only an endpoint has a shadow variant; 'score' is a transform"):
        promote(root, "score", None, "prod", package_arn=_package(sm, "Approved"), shadow=True)
    with pytest.raises(PromotionError, match="give --from ENV or --package ARN"):
        promote(root, "digits", None, "prod", shadow=True)
    assert "shadow" not in (root / "config/envs/prod.yaml").read_text()


def test_a_different_package_is_refused_while_a_shadow_is_under_test(example_project, sm):
    root = example_project.root
    candidate, other = _package(sm, "Approved"), _package(sm, "Approved")
    promote(root, "digits", None, "prod", package_arn=candidate, shadow=True)
    with pytest.raises(PromotionError, match="has a shadow under test"):
        promote(root, "digits", None, "prod", package_arn=other)
    assert promote(root, "digits", None, "prod", package_arn=candidate).package_arn == candidate


def test_the_cli_prints_each_step(example_project, sm):
    from typer.testing import CliRunner

    from sagestack.cli import app

    candidate = _package(sm, "Approved")
    root = ["--root", str(example_project.root)]
    runner = CliRunner()
    first = runner.invoke(
        app,
        ["promote", "digits", "--to", "prod", "--shadow", "--package", candidate, *root],
        env={"COLUMNS": "300"},
    )
    assert first.exit_code == 0, first.output
    assert "✓ shadow test: digits in prod copies 100% of its requests to" in first.output
    assert f"endpoints.digits.shadow.model_package: (none) → {candidate}" in first.output
    second = runner.invoke(app, ["promote", "digits", "--to", "prod", *root], env={"COLUMNS": "300"})
    assert second.exit_code == 0, second.output
    assert "✓ promoted the shadow of digits to production in prod (Approved)" in second.output
    assert f"endpoints.digits.shadow: removed (it tested {candidate})" in second.output
    refused = runner.invoke(app, ["promote", "digits", "--to", "prod", "--shadow", *root])
    assert refused.exit_code == 2 and "give --from ENV or --package ARN" in refused.output
    assert "Traceback" not in refused.output


def test_an_endpoints_package_must_support_every_instance_pool(project, sm):
    """SageMaker may place the variant on any of its pools: a package built for the first only is
    refused, naming the pool it lacks."""
    from tests.conftest import MINIMAL

    project.spec(
        MINIMAL + "endpoints:\n  web:\n    model: {from: classifier}\n"
        "    instance_type: [ml.c5.xlarge, ml.g5.xlarge]\n"
    ).env("dev").env("prod", f'account: "{PROD}"\n')
    arn = _package(sm, "Approved", instance_types=("ml.c5.xlarge",))
    with pytest.raises(PromotionError, match=r"not ml\.g5\.xlarge \(endpoints\.web\.instance_type in prod\)"):
        promote(project.root, "web", "dev", "prod", package_arn=arn)
