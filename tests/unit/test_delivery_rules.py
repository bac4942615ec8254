"""Rules of delivery (the CDK Pipelines stack) and of MLflow tracking, each passing and failing."""

from __future__ import annotations

from tests.conftest import MINIMAL
from tests.unit.test_rules import findings

DELIVERY = (
    MINIMAL
    + """\
delivery:
  account: "333333333333"
  source: {bucket: my-sources, key: digits.zip}
  environments: ENVS
  approval: APPROVAL
"""
)


def _delivery(envs: str, approval: str = "[prod]") -> str:
    return DELIVERY.replace("ENVS", envs).replace("APPROVAL", approval)


def test_delivery_environments(project):
    project.env("dev").env("staging").env("prod")
    assert findings(project, "delivery-environments", _delivery("[dev, staging, prod]")) == []
    assert findings(
        project, "delivery-environments", _delivery("[dev, stagin, prod, dev]", "[production]")
    ) == [
        "delivery.environments.1: no environment 'stagin' (config/envs/stagin.yaml); did you mean 'staging'?; "
        "environments: dev, prod, staging",
        "delivery.environments.3: 'dev' is deployed twice; list it once",
        "delivery.approval.0: 'production' is not one of the environments the pipeline deploys "
        "(dev, stagin, prod, dev)",
    ]


def test_delivery_approval(project):
    project.env("dev").env("prod")
    assert findings(project, "delivery-approval", _delivery("[dev, prod]")) == []
    assert findings(project, "delivery-approval", _delivery("[dev, prod]", "[]")) == [
        "delivery.environments.1: 'prod' deploys without a manual approval; add it to delivery.approval"
    ]


def test_tracking_requirements(project):
    tracked = MINIMAL + "tracking: {mlflow: {}}\n"
    assert findings(project, "tracking-requirements", MINIMAL) == []  # tracking off: nothing to install
    assert findings(project, "tracking-requirements", tracked) == [
        "jobs.classifier.source_dir: tracking.mlflow is on but training_src/requirements.txt does not list "
        "mlflow and sagemaker-mlflow: the training container has no MLflow client, so the job would log "
        "nothing (train.py goes on without it); add them"
    ]
    project.write(
        "training_src/requirements.txt", "# pinned\nmlflow-skinny==3.18.0\nsagemaker_mlflow==0.5.0\n"
    )
    assert findings(project, "tracking-requirements", tracked) == []
