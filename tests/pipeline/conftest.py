"""A moto server and the example project's dev app, built once for the pipeline tests."""

from __future__ import annotations

import json

import pytest

from tests.support.cdk_app import BuiltApp
from tests.support.cfn import resolve
from tests.support.moto_server import ACCOUNT, REGION, running_moto

ROLE = f"arn:aws:iam::{ACCOUNT}:role/digits-dev-execution"
BUCKET = "digits-dev-artifacts"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
MLFLOW = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:mlflow-tracking-server/digits-dev-mlflow"


@pytest.fixture(scope="module")
def moto():
    with running_moto() as server:
        yield server


def example_copy(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A throwaway copy of the example project's config and containers (a stub training_src)."""
    import shutil

    from tests.conftest import REPO, Project

    root = tmp_path_factory.mktemp("proj") / "p"
    project = Project(root)
    shutil.rmtree(root / "config")
    shutil.copytree(REPO / "config", root / "config")
    shutil.copytree(REPO / "containers", root / "containers")
    return project


@pytest.fixture(scope="module")
def dev_app(tmp_path_factory):
    project = example_copy(tmp_path_factory)
    root = project.root
    dev = root / "config/envs/dev.yaml"
    dev.write_text(dev.read_text() + "pipeline: {poll_interval: 1s, backoff: 1s}\n")
    # A quota snapshot that knows the second candidate's quota code only.
    (root / "config/envs/dev.quotas.json").write_text(
        json.dumps(
            {
                "quotas": [
                    {
                        "QuotaName": "ml.m5.xlarge for training job usage",
                        "QuotaCode": "L-E7898792",
                        "Value": 4.0,
                    }
                ]
            }
        )
    )
    built = BuiltApp(project.root, tmp_path_factory.mktemp("out"), ["dev"])
    built.root = project.root  # type: ignore[attr-defined]
    return built


def definition(
    app: BuiltApp, machine_name: str, topic_arn: str, *, env: str = "dev", stack: str = "training"
) -> str:
    """The synthesized definition of a state machine, its tokens resolved with stand-in values."""
    from aws_cdk.assertions import Template

    resources = Template.from_stack(getattr(app.stages[env], stack)).to_json()["Resources"]
    (machine,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::StepFunctions::StateMachine"
        and r["Properties"]["StateMachineName"] == machine_name
    ]

    def ref(name: str) -> str:
        pseudo = {
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": REGION,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        if resources[name]["Type"] == "AWS::SNS::Topic":
            return topic_arn
        raise KeyError(name)

    def import_value(export: str) -> str:
        for fragment, value in (
            ("ExecutionRole", ROLE),
            ("Artifacts", BUCKET),
            ("Key", KEY),
            ("TrackingServerArn", MLFLOW),
        ):
            if fragment in export:
                return value
        raise KeyError(export)

    return resolve(machine["Properties"]["DefinitionString"], ref, lambda r, a: ref(r), import_value)
