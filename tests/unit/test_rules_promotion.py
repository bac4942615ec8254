"""Promotion's spec: `promotion:` (the project file's alone; environments that exist, each once), and
an environment in an account pins only its own account's packages (issue 38)."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

ORDER = MINIMAL + "promotion: [dev, staging, prod]\n"
STAGING_PIN = "arn:aws:sagemaker:us-east-1:222222222222:model-package/digits-staging/3"
PROD_PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"


def _envs(project):
    return (
        project.env("dev", "retain_data: false\n")
        .env("staging", 'account: "222222222222"\n')
        .env("prod", 'account: "111111111111"\n')
    )


def test_promotion_environments(project):
    _envs(project)
    assert findings(project, "promotion-environments", ORDER) == []
    assert findings(project, "promotion-environments", MINIMAL) == []  # no promotion: nothing to check
    found = findings(project, "promotion-environments", MINIMAL + "promotion: [dev, stagin, prod, dev]\n")
    assert found == [
        "promotion.1: no environment 'stagin' (config/envs/stagin.yaml); did you mean 'staging'?; "
        "environments: dev, prod, staging",
        "promotion.3: 'dev' is listed twice; list each environment once",
    ]


def test_promotion_errors_are_located(project):
    _envs(project).spec(MINIMAL + "promotion: [dev, prdo]\n")
    errors = project.errors("dev")
    assert errors == [
        "config/sagestack.yaml:9:18: promotion[1]: no environment 'prdo' (config/envs/prdo.yaml); did "
        "you mean 'prod'?; environments: dev, prod, staging [promotion-environments]"
    ]


def test_an_overlay_cannot_set_the_promotion_order(project):
    _envs(project).spec(ORDER).env("prod", 'account: "111111111111"\npromotion: [staging, prod]\n')
    assert project.errors("prod") == [
        "config/envs/prod.yaml:2:1: promotion: the promotion order is the project's, not one "
        "environment's: set promotion: in config/sagestack.yaml (e.g. promotion: [dev, staging, prod]) "
        "and remove it here"
    ]
    assert project.load("staging").spec.promotion == ["dev", "staging", "prod"]


def _pinned(pin: str, where: str = "endpoint") -> str:
    if where == "endpoint":
        return f'endpoints:\n  digits:\n    model_package: "{pin}"\n    instance_type: ml.m5.large\n'
    if where == "shadow":
        return (
            f'endpoints:\n  digits:\n    model_package: "{PROD_PIN}"\n    instance_type: ml.m5.large\n'
            f'    shadow: {{model_package: "{pin}"}}\n'
        )
    if where == "component":
        return (
            "endpoints:\n  shared:\n    instance_type: ml.g5.12xlarge\n    components:\n"
            f'      small: {{model_package: "{pin}", memory_mb: 4096, accelerators: 1}}\n'
        )
    return f'transforms:\n  score:\n    model_package: "{pin}"\n    instance_type: [ml.m5.xlarge]\n'


def test_pin_own_account(project):
    _envs(project)
    own = ORDER + 'account: "111111111111"\n'
    assert findings(project, "pin-own-account", own + _pinned(PROD_PIN), env="prod") == []
    # no account: environment-agnostic, nothing to compare with
    assert findings(project, "pin-own-account", ORDER + _pinned(STAGING_PIN), env="dev") == []
    copy = (
        "the package is in account 222222222222, not this environment's (111111111111): it would be "
        "read from that account for as long as it serves; run `sagestack promote {entry} --from staging "
        "--to prod{shadow} --package " + STAGING_PIN + "` (it copies the package into prod's account and "
        "pins the copy)"
    )
    assert findings(project, "pin-own-account", own + _pinned(STAGING_PIN), env="prod") == [
        "endpoints.digits.model_package: " + copy.format(entry="digits", shadow="")
    ]
    assert findings(project, "pin-own-account", own + _pinned(STAGING_PIN, "shadow"), env="prod") == [
        "endpoints.digits.shadow.model_package: " + copy.format(entry="digits", shadow=" --shadow")
    ]
    assert findings(project, "pin-own-account", own + _pinned(STAGING_PIN, "component"), env="prod") == [
        "endpoints.shared.components.small.model_package: " + copy.format(entry="shared/small", shadow="")
    ]
    assert findings(project, "pin-own-account", own + _pinned(STAGING_PIN, "transform"), env="prod") == [
        "transforms.score.model_package: " + copy.format(entry="score", shadow="")
    ]


def test_pin_own_account_says_to_declare_the_order(project):
    """Without promotion:, a cross-account promote is refused: the fix declares the order first."""
    _envs(project)
    spec = MINIMAL + 'account: "111111111111"\n' + _pinned(STAGING_PIN)
    assert findings(project, "pin-own-account", spec, env="prod") == [
        "endpoints.digits.model_package: the package is in account 222222222222, not this environment's "
        "(111111111111): it would be read from that account for as long as it serves; add promotion: "
        "[staging, prod] to config/sagestack.yaml (the order it promotes in), then run `sagestack promote "
        f"digits --from staging --to prod --package {STAGING_PIN}` (it copies the package into prod's "
        "account and pins the copy)"
    ]
    unknown = STAGING_PIN.replace("222222222222", "333333333333").replace("digits-staging", "other")
    assert findings(project, "pin-own-account", spec.replace(STAGING_PIN, unknown), env="prod") == [
        "endpoints.digits.model_package: the package is in account 333333333333, not this environment's "
        "(111111111111), and no other environment of the project names that account or holds its group: "
        "pin a package of account 111111111111 (`sagestack promote digits --from <env> --to prod` copies "
        "one from the environment that registered it)"
    ]


def test_a_cross_account_pin_fails_the_load_located(project):
    _envs(project).spec(ORDER + _pinned(STAGING_PIN))
    (error,) = project.errors("prod")
    assert error.startswith("config/sagestack.yaml:12:20: endpoints.digits.model_package: the package is in")
    assert error.endswith("[pin-own-account]")
    assert project.load("staging").spec.endpoints["digits"].model_package == STAGING_PIN  # its own


LLM = (
    MINIMAL
    + "endpoints:\n  chat:\n    instance_type: ml.g5.2xlarge\n    llm:\n      container: djl-lmi\n"
    + "      parameters: 1.0e9\n      dtype: fp16\n"
)


def test_llm_weights_other_bucket(project):
    assert findings(project, "llm-weights-other-bucket", LLM + "      weights: {s3: models/chat/}\n") == []
    other = LLM + "      weights: {s3: s3://shared-weights/llama/}\n"
    assert findings(project, "llm-weights-other-bucket", other) == [
        "endpoints.chat.llm.weights.s3: the weights are in bucket shared-weights, not the project's: if "
        "it encrypts them with a KMS key, add weights.kms_key: <that key's ARN> (the role may then "
        "decrypt through S3), and make sure its bucket and key policies allow this account"
    ]
    key = "arn:aws:kms:us-east-1:333333333333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    named = LLM + f"      weights: {{s3: s3://shared-weights/llama/, kms_key: {key}}}\n"
    assert findings(project, "llm-weights-other-bucket", named) == []
