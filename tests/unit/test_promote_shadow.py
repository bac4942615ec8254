"""`sagestack promote --shadow` pins a candidate as an endpoint's shadow variant in the target
overlay; a plain `sagestack promote` of an endpoint with a shadow then makes the candidate
production and removes the shadow. On a copy of the example project, against a moto registry:
the overlay's text after each step (comments kept), and the result loads, validates and renders."""

from __future__ import annotations

import pytest

from sagestack.ops.promote import PromotionError, promote
from tests.support.moto_server import running_moto

PROD_PIN = "arn:aws:sagemaker:us-east-1:222222222222:model-package/digits-staging/3"


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
    client.create_model_package_group(ModelPackageGroupName="digits-staging")
    return client


def _package(sm, status: str, instance_types=("ml.c5.large", "ml.c5.xlarge")) -> str:
    arn: str = sm.create_model_package(
        ModelPackageGroupName="digits-staging",
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
    assert spec.model_package == PROD_PIN
    assert spec.shadow is not None and spec.shadow.model_package == candidate
    # the same candidate again changes nothing
    assert not promote(
        example_project.root, "digits", None, "prod", package_arn=candidate, shadow=True
    ).changed

    step2 = promote(example_project.root, "digits", None, "prod")
    assert step2.changed and step2.package_arn == candidate and step2.previous == PROD_PIN
    assert step2.changes == [
        f"endpoints.digits.model_package: {PROD_PIN} → {candidate}",
        f"endpoints.digits.shadow: removed (it tested {candidate})",
    ]
    assert prod.read_text() == before.replace(f'"{PROD_PIN}"', f'"{candidate}"')
    spec = _validates(example_project, "prod").endpoints["digits"]
    assert spec.model_package == candidate and spec.shadow is None


def test_the_candidate_can_come_from_a_source_environments_pin(example_project, sm):
    candidate = _package(sm, "Approved")
    staging = example_project.root / "config/envs/staging.yaml"
    # staging's overlay already has an endpoints: section (its LLM endpoint); the pin joins it
    staging.write_text(
        staging.read_text().replace(
            "endpoints:\n", f'endpoints:\n  digits:\n    model_package: "{candidate}"\n'
        )
    )
    result = promote(example_project.root, "digits", "staging", "prod", shadow=True)
    assert result.package_arn == candidate
    assert _validates(example_project, "prod").endpoints["digits"].shadow.model_package == candidate


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
    result = promote(example_project.root, "digits", None, "prod")
    assert result.changes[-1] == f"endpoints.digits.shadow: removed (it tested {candidate})"
    assert prod.read_text() == before.replace(f'"{PROD_PIN}"', f'"{candidate}"').replace(
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
    with pytest.raises(PromotionError, match="is already production at 'digits' in 'prod'"):
        promote(root, "digits", None, "prod", package_arn=PROD_PIN, shadow=True, offline=False)
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
    assert refused.exit_code == 1 and "give --from ENV or --package ARN" in refused.output
    assert "Traceback" not in refused.output


def test_an_endpoints_package_must_support_every_instance_pool(project, sm):
    """SageMaker may place the variant on any of its pools: a package built for the first only is
    refused, naming the pool it lacks."""
    from tests.conftest import MINIMAL

    project.spec(
        MINIMAL + "endpoints:\n  web:\n    model: {from: classifier}\n"
        "    instance_type: [ml.c5.xlarge, ml.g5.xlarge]\n"
    ).env("dev").env("prod", 'account: "111111111111"\n')
    arn = _package(sm, "Approved", instance_types=("ml.c5.xlarge",))
    with pytest.raises(PromotionError, match=r"not ml\.g5\.xlarge \(endpoints\.web\.instance_type in prod\)"):
        promote(project.root, "web", "dev", "prod", package_arn=arn)
