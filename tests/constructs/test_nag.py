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


# ------------------------------------------------------------------ compliance packs (issue 26, item 18)

COMPLIANCE = "compliance: [nist-800-53-r5, hipaa, pci-dss-3.2.1]\n"
PIN = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/3"
OTHER = "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-prod/7"
# Every kind of thing sagestack alarms on: a real-time endpoint rolled out under error and latency
# alarms, with capture and a monitor; an async one that wakes from zero; serverless; components; a
# pinned transform; a tuning search.
SERVING_BREADTH = f"""\
tuning:
  search:
    job: classifier
    objective: {{metric: loss, type: Minimize}}
    ranges: {{lr: {{continuous: [1.0e-4, 1.0e-1]}}}}
    max_jobs: 4
    max_parallel_jobs: 2
endpoints:
  realtime:
    model_package: "{PIN}"
    instance_type: ml.m5.large
    autoscaling: {{min: 1, max: 4}}
    data_capture: {{}}
    monitor: {{}}
    rollout: {{traffic: linear, canary_percent: 25, max_latency_ms: 50}}
  queued:
    model_package: "{PIN}"
    instance_type: ml.m5.xlarge
    async: {{max_concurrent_invocations_per_instance: 4}}
    autoscaling: {{min: 0, max: 3, backlog_per_instance: 2}}
  small:
    model_package: "{PIN}"
    serverless: {{memory_mb: 3072, max_concurrency: 8}}
  shared:
    instance_type: ml.g5.12xlarge
    autoscaling: {{min: 1, max: 4}}
    components:
      small-model: {{model_package: "{PIN}", memory_mb: 4096, cpu_cores: 2, accelerators: 1}}
      large-model: {{model_package: "{OTHER}", memory_mb: 16384, accelerators: 2}}
transforms:
  score:
    model_package: "{PIN}"
    instance_type: [ml.m5.xlarge]
"""


CLUSTER_AND_DELIVERY = """\
clusters:
  research:
    instance_groups:
      controller: {instance_type: ml.m5.xlarge, node_type: Controller}
      workers: {instance_type: ml.p5.48xlarge, count: 2, partitions: [gpu]}
delivery:
  account: "333333333333"
  source: {connection: "arn:aws:codeconnections:us-east-1:333333333333:connection/0a1b", repository: o/r, branch: main}
  environments: [prod]
"""


@pytest.fixture(scope="module")
def compliant(tmp_path_factory):
    """The example, the broad project (its config chooses the packs), a project with every serving
    kind and one with a cluster and the delivery pipeline, each synthesized with the three
    compliance packs on: BuiltApp fails on any finding neither fixed nor acknowledged."""
    import shutil

    from tests.conftest import REPO, Project
    from tests.constructs.test_template_meaning import BASELINE
    from tests.support.cdk_app import BuiltApp

    example = tmp_path_factory.mktemp("example") / "p"
    Project(example)
    shutil.rmtree(example / "config")
    shutil.copytree(REPO / "config", example / "config")
    shutil.copytree(REPO / "containers", example / "containers")
    spec = example / "config/sagestack.yaml"
    spec.write_text(spec.read_text() + COMPLIANCE)
    serving = Project(tmp_path_factory.mktemp("serving") / "p")
    serving.spec(
        MINIMAL.replace(
            "instance_type: ml.m5.xlarge",
            "instance_type: ml.m5.xlarge\n    metric_definitions: {loss: 'l=(.*)'}",
        )
        + COMPLIANCE
        + SERVING_BREADTH
    )
    serving.env("prod", 'account: "111111111111"\n')
    assert "compliance:" in (BASELINE / "broad/config/sagestack.yaml").read_text()
    return {
        "example": BuiltApp(example, tmp_path_factory.mktemp("example-out")),
        "broad": BuiltApp(BASELINE / "broad", tmp_path_factory.mktemp("broad-out")),
        "serving": BuiltApp(serving.root, tmp_path_factory.mktemp("serving-out"), ["prod"]),
        "cluster-delivery": BuiltApp(
            _cluster_and_delivery(tmp_path_factory), tmp_path_factory.mktemp("cd-out")
        ),
    }


def _cluster_and_delivery(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A HyperPod cluster (its VPC, lifecycle-script deployment) and the delivery pipeline."""
    from importlib import resources

    from tests.conftest import Project

    project = Project(tmp_path_factory.mktemp("cluster-delivery") / "p")
    project.spec(MINIMAL + COMPLIANCE + CLUSTER_AND_DELIVERY)
    project.env("prod", 'account: "111111111111"\n')
    script = project.root / "cluster_src" / "on_create.sh"
    script.parent.mkdir()
    script.write_text(resources.files("sagestack.templates").joinpath("on_create.sh").read_text())
    script.chmod(0o755)
    return project.root


@pytest.mark.parametrize("name", ["example", "broad", "serving", "cluster-delivery"])
def test_the_compliance_packs_run_and_leave_no_finding_unanswered(compliant, name):
    from sagestack.constructs.nag import unacknowledged_findings

    built = compliant[name]
    assert unacknowledged_findings(built.assembly.directory) == []
    for stage in built.stages.values():  # each environment's stage runs the packs its spec chose
        ran = {p.name for p in stage.policy_validation_beta1}
        assert ran == {"NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321"}, (stage.plan.env, ran)
    # the app runs AwsSolutions over everything, and the packs over the delivery stack, when there is one
    on_app = {p.name for p in built.app.policy_validation_beta1}
    delivery = {"NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321"} if name == "cluster-delivery" else set()
    assert on_app == {"AwsSolutions"} | delivery, on_app


def _templates(built) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    import json
    from pathlib import Path

    return [
        (p.name, json.loads(p.read_text()))
        for p in sorted(Path(built.assembly.directory).glob("assembly-*/*.template.json"))
    ]


@pytest.mark.parametrize("name", ["example", "broad", "serving"])
def test_every_alarm_notifies_the_environment_s_topic_which_cloudwatch_may_publish_to(compliant, name):
    alarms = 0
    for path, template in _templates(compliant[name]):
        resources = template["Resources"]
        topics = {
            k
            for k, r in resources.items()
            if r["Type"] == "AWS::SNS::Topic" and k.startswith("Notifications")
        }
        for key, alarm in resources.items():
            if alarm["Type"] != "AWS::CloudWatch::Alarm":
                continue
            alarms += 1
            notified = {a["Ref"] for a in alarm["Properties"].get("AlarmActions", []) if "Ref" in a} & topics
            assert notified, f"{path}: alarm {key} notifies no topic of its environment"
            (topic,) = notified
            policies = [
                s
                for r in resources.values()
                if r["Type"] == "AWS::SNS::TopicPolicy" and {"Ref": topic} in r["Properties"]["Topics"]
                for s in r["Properties"]["PolicyDocument"]["Statement"]
            ]
            assert any(
                s["Effect"] == "Allow"
                and s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
                and s["Action"] == "sns:Publish"
                and "aws:SourceAccount" in s["Condition"]["StringEquals"]
                for s in policies
            ), f"{path}: CloudWatch may not publish to {topic}"
    assert alarms >= (10 if name == "serving" else 1)


@pytest.mark.parametrize("name", ["example", "serving"])
def test_the_project_key_lets_cloudwatch_publish_to_the_topics_it_encrypts(compliant, name):
    for path, template in _templates(compliant[name]):
        for key in (r for r in template["Resources"].values() if r["Type"] == "AWS::KMS::Key"):
            (statement,) = [
                s
                for s in key["Properties"]["KeyPolicy"]["Statement"]
                if s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
            ]
            assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"], path
            assert ":alarm:*" in str(statement["Condition"]["ArnLike"]["aws:SourceArn"]), path


def test_a_pack_chosen_by_one_environment_checks_that_environment_alone(tmp_path):
    """cdk-nag hands its packs the whole app; ScopedPack keeps each to the stage that chose it."""
    from aws_cdk import App, Stack, Stage, Validations
    from aws_cdk import aws_s3 as s3

    from sagestack.app.builder import UnacknowledgedFindings, synth_checked
    from sagestack.constructs.compliance import compliance_packs

    app = App(outdir=str(tmp_path))
    chosen, other = Stage(app, "chosen"), Stage(app, "other")
    for stage in (chosen, other):
        s3.Bucket(Stack(stage, "Data"), "Plain", enforce_ssl=True)
    Validations.of(chosen).add_plugins(*compliance_packs(["hipaa"], chosen))
    with pytest.raises(UnacknowledgedFindings) as info:
        synth_checked(app)
    findings = info.value.findings
    assert any(
        f.startswith("chosen/Data/Plain/Resource: HIPAA.Security-S3BucketVersioningEnabled") for f in findings
    )
    assert not any(f.startswith("other/") for f in findings), findings


def test_the_packs_the_spec_offers_are_the_packs_there_are():
    import typing

    import cdk_nag

    from sagestack.constructs.compliance import PACKS
    from sagestack.project.models import CompliancePack

    assert set(typing.get_args(CompliancePack)) == set(PACKS)
    for cls, prefix in PACKS.values():
        assert getattr(cdk_nag, cls)().read_pack_name == prefix
