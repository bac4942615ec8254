"""`compliance:` in the project spec (issue 26, item 18): the cdk-nag packs a project runs beside
AwsSolutions, per environment; a bad value is a located error that lists what is allowed."""

from __future__ import annotations

from tests.conftest import MINIMAL


def test_the_packs_load_and_an_environment_may_choose_its_own(project):
    project.spec(MINIMAL + "compliance: [hipaa]\n")
    project.env("dev").env("prod", "compliance: [nist-800-53-r5, hipaa, pci-dss-3.2.1]\n")
    assert project.load("dev").spec.compliance == ["hipaa"]
    assert project.load("prod").spec.compliance == ["nist-800-53-r5", "hipaa", "pci-dss-3.2.1"]


def test_no_pack_is_the_default(project):
    assert project.spec(MINIMAL).load().spec.compliance == []


def test_an_unknown_pack_is_a_located_error_listing_the_allowed_ones(project):
    project.spec(MINIMAL + "compliance: [nist-800-53-r5, hipa]\n")
    (error,) = project.errors()
    assert error.startswith("config/sagestack.yaml:9:")
    assert "compliance[1]: 'hipa' is not allowed" in error
    assert "nist-800-53-r5, hipaa, pci-dss-3.2.1" in error and "did you mean 'hipaa'" in error


def test_a_pack_listed_twice_is_refused(project):
    project.spec(MINIMAL + "compliance: [hipaa, hipaa]\n")
    (error,) = project.errors()
    assert "config/sagestack.yaml:9:" in error and "hipaa more than once" in error


def test_compliance_must_be_a_list(project):
    project.spec(MINIMAL + "compliance: hipaa\n")
    (error,) = project.errors()
    assert "config/sagestack.yaml:9:" in error and "compliance" in error and "list" in error
