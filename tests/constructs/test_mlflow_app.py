"""tracking.mlflow.app: a serverless MLflow App per environment instead of a tracking server. Its
role is held to the bucket's mlflow/ prefix through the project key; the execution role may call
that App only, with the one action IAM's data lists for it (sagemaker:CallMlflowAppApi), and every
job's MlflowConfig names it. Synthesized with an account (prod) and without (dev), cdk-nag clean."""

from __future__ import annotations

import json

import pytest

from tests.conftest import MINIMAL

pytestmark = pytest.mark.synth

SPEC = MINIMAL + "tracking:\n  mlflow: {app: true, automatic_model_registration: true}\n"


@pytest.fixture(scope="module")
def app_project(tmp_path_factory):
    from tests.conftest import Project
    from tests.support.cdk_app import BuiltApp

    project = Project(tmp_path_factory.mktemp("mlflow-app") / "p")
    project.spec(SPEC).env("dev").env("prod", 'account: "111111111111"\n')
    # fails on any unacknowledged cdk-nag finding
    return BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev", "prod"])


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_app_replaces_the_tracking_server_and_only_it_is_granted(app_project, env):
    t = app_project.template(env)
    assert not t.find_resources("AWS::SageMaker::MlflowTrackingServer")
    ((app_id, app),) = t.find_resources("AWS::SageMaker::MlflowApp").items()
    props = app["Properties"]
    assert props["Name"] == f"digits-{env}-mlflow"
    assert props["ModelRegistrationMode"] == "AutoModelRegistrationEnabled"
    assert json.dumps(props["ArtifactStoreUri"]).endswith('"/mlflow"]]}')
    policies = t.find_resources("AWS::IAM::Policy")
    statements = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    mlflow = [s for s in statements if "mlflow" in json.dumps(s["Action"]).lower()]
    (calls,) = mlflow  # no sagemaker-mlflow:* (a tracking server's actions) anywhere
    assert calls["Action"] == "sagemaker:CallMlflowAppApi"
    arn = json.dumps(calls["Resource"])
    assert ":mlflow-app/" in arn and json.dumps({"Fn::GetAtt": [app_id, "MlflowAppId"]}) in arn
    role = props["RoleArn"]["Fn::GetAtt"][0]
    (own,) = [p for p in policies.values() if {"Ref": role} in p["Properties"]["Roles"]]
    own_statements = own["Properties"]["PolicyDocument"]["Statement"]
    objects = [s["Resource"] for s in own_statements if "s3:PutObject" in s["Action"]]
    assert objects and all("/mlflow/*" in json.dumps(r) for r in objects)
    keys = [s for s in own_statements if "kms:GenerateDataKey" in json.dumps(s["Action"])]
    assert keys, "the App's role writes artifacts through the project key"
    registration = [s for s in own_statements if "sagemaker:CreateModelPackage" in json.dumps(s["Action"])]
    assert registration, "automatic model registration lets the App's role register packages"


def test_jobs_log_to_the_app(app_project):
    """The job's request (the training pipeline's CreateTrainingJob) names the App's ARN."""
    from aws_cdk.assertions import Template

    text = json.dumps(Template.from_stack(app_project.stages["prod"].training).to_json())
    assert "MlflowResourceArn" in text and ":mlflow-app/" in text
    assert "mlflow-tracking-server" not in text


def test_the_apps_lint_clean(app_project):
    from tests.support.cfn import cfn_lint

    stack = app_project.stages["dev"].foundation
    artifact = app_project.assembly.get_stack_artifact(stack.artifact_id)
    code, output = cfn_lint([artifact.template_full_path])
    assert code == 0, output
