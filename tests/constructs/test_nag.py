"""cdk-nag: the example app has no unacknowledged finding, and a finding does fail the synth."""

from __future__ import annotations

import pytest

from tests.conftest import MINIMAL

pytestmark = pytest.mark.synth


def test_example_app_is_nag_clean(example_app):
    from sagestack.constructs.nag import unacknowledged_findings

    assert unacknowledged_findings(example_app.assembly.directory) == []


def test_an_unacknowledged_finding_fails_the_synth(tmp_path):
    from aws_cdk import App, Stack, Validations
    from aws_cdk import aws_s3 as s3
    from cdk_nag import AwsSolutionsChecks

    from sagestack.app.builder import UnacknowledgedFindings, synth_checked

    app = App(outdir=str(tmp_path))
    s3.Bucket(Stack(app, "Plain"), "Bucket")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(UnacknowledgedFindings) as info:
        synth_checked(app)
    assert any("Plain/Bucket/Resource: AwsSolutions-S1" in f for f in info.value.findings)
    assert any("AwsSolutions-S10" in f for f in info.value.findings)


def test_project_without_dockerfile_images_has_no_docker_asset(project, tmp_path):
    """The e2e environment has no Docker engine: a DLC-only project must publish no image."""
    from tests.support.cdk_app import BuiltApp

    project.spec(MINIMAL).env("dev", "retain_data: false\n")
    built = BuiltApp(project.root, tmp_path / "out", ["dev"])
    assert "dockerImages" not in built.assets("dev") or built.assets("dev")["dockerImages"] == {}
    built.template("dev").resource_count_is("AWS::SageMaker::ModelPackageGroup", 1)
