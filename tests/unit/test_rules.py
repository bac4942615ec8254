"""Each semantic rule with a spec that passes it and one that fails it (the message asserted)."""

from __future__ import annotations

from pathlib import Path

from sagestack.project.rules import RULES, RuleContext, run_rule
from tests.conftest import MINIMAL


def findings(project, rule_id: str, text: str, env: str | None = None) -> list[str]:
    """Run one rule on a spec that passes the schema; messages with their key paths."""
    spec = project.spec(text).load(run_rules=False).spec
    ctx = RuleContext(spec=spec, env=env, root=project.root)
    return [f"{'.'.join(map(str, f.path))}: {f.message}" for f in run_rule(rule_id, ctx)]


def test_every_rule_has_a_test():
    source = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*rules*.py"))
    untested = [r for r in RULES if f'"{r}"' not in source]
    assert untested == []


# The foundation checks the references between sections (a job's image, a tuning entry's job; an
# endpoint's model source is endpoints' endpoint-model-source); every other rule lives with the
# feature its id names.
OWNERS = {
    "cluster-": "clusters",
    "delivery-": "delivery",
    "tracking-": "tracking",
    "transform-": "transforms",
    "tuning-": "tuning",
    "endpoint-": "endpoints",
}
REFERENCES = ("image-reference", "tuning-job-reference")


def test_every_feature_owns_its_rules():
    from tests.unit.test_layers import FEATURES

    for rule_id, r in RULES.items():
        _, feature, module = r.check.__module__.split(".")
        assert feature in FEATURES and module.startswith("rules"), (rule_id, r.check.__module__)
        owner = next((f for prefix, f in OWNERS.items() if rule_id.startswith(prefix)), None)
        if owner is not None and rule_id not in REFERENCES:
            assert feature == owner, (rule_id, r.check.__module__)
    assert {RULES[r].check.__module__ for r in REFERENCES} == {"sagestack.foundation.rules"}


def test_image_reference(project):
    assert findings(project, "image-reference", MINIMAL) == []
    assert findings(project, "image-reference", MINIMAL.replace("image: train", "image: trian")) == [
        "jobs.classifier.image: image 'trian' is not defined under images:; did you mean 'train'? (defined: train)"
    ]


TUNING = (
    MINIMAL
    + """\
tuning:
  search:
    job: classifier
    objective: {metric: val_accuracy, type: Maximize}
    ranges: {lr: {continuous: [0.0001, 0.1]}}
    max_jobs: 4
"""
)


def test_tuning_job_reference(project):
    assert findings(project, "tuning-job-reference", TUNING) == []
    assert findings(project, "tuning-job-reference", TUNING.replace("job: classifier", "job: clasifier")) == [
        "tuning.search.job: job 'clasifier' is not defined under jobs:; did you mean 'classifier'?"
    ]


DOCKER = MINIMAL.replace(
    '  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}',
    "  train: {dockerfile: containers/training}",
)


def test_dockerfile_exists(project):
    assert findings(project, "dockerfile-exists", DOCKER) == [
        "images.train.dockerfile: containers/training/Dockerfile does not exist (paths are relative to the project root)"
    ]
    project.write("containers/training/Dockerfile", "FROM scratch\n")
    assert findings(project, "dockerfile-exists", DOCKER) == []


def test_source_dir_exists(project):
    assert findings(project, "source-dir-exists", MINIMAL) == []
    assert findings(project, "source-dir-exists", MINIMAL + "    source_dir: src\n") == [
        "jobs.classifier.source_dir: folder 'src' does not exist"
    ]
    assert findings(project, "source-dir-exists", MINIMAL + "    entry_point: trian.py\n") == [
        "jobs.classifier.entry_point: 'trian.py' is not in training_src/; did you mean 'train.py'?"
    ]


def test_prod_retains_data(project):
    assert findings(project, "prod-retains-data", MINIMAL + "retain_data: false\n", env="dev") == []
    assert findings(project, "prod-retains-data", MINIMAL, env="prod") == []
    assert findings(project, "prod-retains-data", MINIMAL + "retain_data: false\n", env="prod") == [
        "retain_data: environment 'prod' must retain its data (checkpoints, models, keys); "
        "remove retain_data: false from its overlay"
    ]


def test_dlc_in_region(project):
    assert findings(project, "dlc-in-region", MINIMAL) == []
    bad = MINIMAL.replace('version: "2.5"', 'version: "9.9"')
    (msg,) = findings(project, "dlc-in-region", bad)
    assert msg.startswith(
        "images.train.dlc: no pytorch container for ml.m5.xlarge in us-east-1: Unsupported pytorch version: 9.9."
    )
    assert "2.5" in msg  # the supported versions are listed


def test_dlc_in_region_checks_neuron_images_for_trainium(project):
    trn = MINIMAL.replace("ml.m5.xlarge", "ml.trn1.32xlarge")
    (msg,) = findings(project, "dlc-in-region", trn)
    assert msg == (
        "images.train.dlc: no pytorch container for ml.trn1.32xlarge in us-east-1: the Neuron-x pytorch 2.5 "
        "container ships py310, not py311"
    )
    assert findings(project, "dlc-in-region", trn.replace("py311", "py310")) == []


def test_tag_limits(project):
    assert findings(project, "tag-limits", MINIMAL + "tags: {team: ml}\n") == []
    assert findings(project, "tag-limits", MINIMAL + "tags: {'aws:owner': me}\n") == [
        "tags.aws:owner: tag keys starting with 'aws:' are reserved by AWS"
    ]


def test_tag_limits_count_the_tags_sagestack_adds(project):
    """50 a resource with sagestack's own: a job's training jobs carry four more (the environment's
    two, sagestack:job, sagestack:spec-hash), a search's five, an endpoint's resources three."""
    import botocore.session
    from botocore.validate import validate_parameters

    from sagestack.project import load_project, resolve_environment
    from sagestack.project.requests import render_training

    def tags(n: int) -> str:
        return "tags:\n" + "".join(f"  t{i}: x\n" for i in range(n))

    assert findings(project, "tag-limits", MINIMAL + tags(46)) == []
    assert findings(project, "tag-limits", MINIMAL + tags(47)) == [
        "tags.t46: 47 tags given; with the 4 sagestack adds to job classifier's training jobs, "
        "AWS's 50 a resource leave room for 46: drop this one"
    ]
    # what the rule lets through is a request botocore's model accepts, at its limit: 46 + 4 = 50
    # (botocore checks a list's minimum only, so the maximum is read off the model)
    project.spec(MINIMAL + tags(46)).env("dev")
    rendered = render_training(resolve_environment(load_project(project.root, "dev")), project.root)
    request = rendered.jobs["classifier"].candidates[0].request
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob")
    validate_parameters(request, shape.input_shape)
    assert len(request["Tags"]) == shape.input_shape.members["Tags"].metadata["max"] == 50
    searched = MINIMAL + "tuning:\n  search:\n    job: classifier\n"
    searched += (
        "    objective: {metric: loss, type: Minimize}\n    ranges: {lr: {continuous: [0.001, 0.1]}}\n"
    )
    searched += "    max_jobs: 2\n"
    assert [f.split(":")[0] for f in findings(project, "tag-limits", searched + tags(46))] == ["tags.t45"]
    endpoint = MINIMAL.replace(
        "jobs:\n  classifier:\n    image: train\n    instance_type: ml.m5.xlarge\n", ""
    )
    endpoint += (
        "endpoints:\n  web:\n    model_package: arn:aws:sagemaker:us-east-1:111111111111:model-package/g/1\n"
    )
    endpoint += "    instance_type: ml.m5.large\n"
    assert findings(project, "tag-limits", endpoint + tags(47)) == []
    assert (
        "sagestack adds to an endpoint's resources" in findings(project, "tag-limits", endpoint + tags(48))[0]
    )
    # a job's own tags count on its jobs beside the project's
    own = "    tags: {" + ", ".join(f"j{i}: x" for i in range(7)) + "}\n"
    assert findings(project, "tag-limits", MINIMAL + own + tags(40)) == [
        "jobs.classifier.tags.j6: job classifier: 7 tags of its own beside the project's 40 and "
        "sagestack's; AWS's 50 a resource leave room for 6: drop this one"
    ]


def test_environment_name_overlap(project):
    """'dev' and 'dev-eu' in one account: every name of dev-eu starts with 'digits-dev-' too."""
    project.spec(MINIMAL).env("dev", "{}\n").env("dev-eu", "{}\n").env("prod", "{}\n")
    found = findings(project, "environment-name-overlap", MINIMAL, env="dev")
    assert found == [
        "project: environments 'dev' and 'dev-eu' may share one account: every name of 'dev-eu' "
        "('digits-dev-eu-…') also starts with 'digits-dev-'; rename one (e.g. 'eu-dev'), or give them "
        "different accounts"
    ]
    assert findings(project, "environment-name-overlap", MINIMAL, env="dev-eu") == found
    # 'prod' overlaps neither; 'development' is not 'dev' and a '-'
    assert findings(project, "environment-name-overlap", MINIMAL, env="prod") == []
    project.env("dev-eu", 'account: "222222222222"\n').env("development", "{}\n")
    spec = MINIMAL + 'account: "111111111111"\n'
    assert findings(project, "environment-name-overlap", spec, env="dev") == []  # two accounts
    project.env("dev-eu", 'account: "111111111111"\n')
    assert findings(project, "environment-name-overlap", spec, env="dev") == [
        "account: environments 'dev' and 'dev-eu' may share account 111111111111: every name of "
        "'dev-eu' ('digits-dev-eu-…') also starts with 'digits-dev-'; rename one (e.g. 'eu-dev'), or "
        "give them different accounts"
    ]


def test_rule_errors_carry_location_and_rule_id(project):
    errors = project.spec(MINIMAL.replace("image: train", "image: trian")).errors()
    assert errors == [
        "config/sagestack.yaml:7:12: jobs.classifier.image: image 'trian' is not defined under images:; "
        "did you mean 'train'? (defined: train) [image-reference]"
    ]


# The registry's order as it was before the rules moved to their features (main at aed13dd): the
# order `sagestack rules` lists them in and load warnings come in.
REGISTRY_ORDER = [
    "cluster-controller",
    "cluster-lifecycle-script",
    "cluster-availability-zone",
    "delivery-environments",
    "delivery-approval",
    "tracking-requirements",
    "image-reference",
    "tuning-job-reference",
    "dockerfile-exists",
    "source-dir-exists",
    "prod-retains-data",
    "dlc-in-region",
    "tag-limits",
    "environment-name-overlap",
    "endpoint-model-source",
    "endpoint-capacity",
    "endpoint-compile-target",
    "endpoint-compile-family",
    "endpoint-compile-framework",
    "endpoint-input-shapes",
    "endpoint-autoscaling",
    "endpoint-package-region",
    "endpoint-name-length",
    "endpoint-inference-image",
    "endpoint-batching-handler",
    "endpoint-async",
    "endpoint-rollout",
    "endpoint-components",
    "endpoint-monitor",
    "endpoint-shadow",
    "transform-model-source",
    "transform-payload",
    "smddp-instance-types",
    "trainium-torch-distributed",
    "p5-smddp-needs-torch-distributed",
    "mpi-processes-per-host",
    "efa-multi-node",
    "distribution-on-single-cpu",
    "spot-max-wait",
    "spot-checkpoint",
    "warm-pool-not-with-spot",
    "hyperparameter-limits",
    "metric-regex",
    "prefer-one-multi-accelerator-instance",
    "multi-host-without-distribution",
    "dataloader-workers-per-cpu",
    "requirements-need-network",
    "smp-v2-instance-types",
    "smp-version-parameters",
    "training-compiler",
    "framework-profiling-pytorch2",
    "retired-instance-type",
    "file-system-channel",
    "training-plan",
    "tuning-objective-metric",
    "tuning-range-bounds",
    "tuning-static-overlap",
    "tuning-grid-categorical",
    "tuning-hyperband",
    "tuning-budget",
]


def test_the_registry_keeps_its_order_across_the_move_to_features():
    from sagestack.project.rules import RULES

    assert list(RULES)[: len(REGISTRY_ORDER)] == REGISTRY_ORDER
