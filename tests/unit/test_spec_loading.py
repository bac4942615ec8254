"""Loading the spec: locations, messages, suggestions, collecting every error, overlays."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagestack.core.errors import SpecError
from sagestack.core.types import parse_duration
from tests.conftest import MINIMAL


def test_minimal_spec_loads_with_defaults(project):
    spec = project.spec().load().spec
    job = spec.jobs["classifier"]
    assert job.instance_type == ["ml.m5.xlarge"]  # a single type becomes a one-candidate list
    assert job.volume_size_gb == 30 and job.max_run == 86400 and job.instance_count == 1
    assert spec.retain_data is True and spec.account is None


def test_unknown_key_names_location_and_closest_key(project):
    errors = project.spec(MINIMAL + "    instance_cont: 2\n").errors()
    assert errors == [
        "config/sagestack.yaml:9:5: jobs.classifier.instance_cont: unknown key 'instance_cont'; "
        "did you mean 'instance_count'? (allowed here: " + errors[0].split("(allowed here: ")[1]
    ]
    assert "max_wait" in errors[0]


def test_unknown_instance_type_suggests_the_real_one(project):
    errors = project.spec(MINIMAL.replace("ml.m5.xlarge", "[ml.g5.xlarge, ml.p4d.24xl]")).errors()
    assert errors == [
        "config/sagestack.yaml:8:35: jobs.classifier.instance_type[1]: 'ml.p4d.24xl' is not a SageMaker "
        "training job instance type; did you mean 'ml.p4d.24xlarge'?"
    ]


def test_hosting_only_instance_type_is_refused_for_training(project):
    errors = project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.inf2.xlarge")).errors()
    assert "'ml.inf2.xlarge' exists but SageMaker does not offer it for training jobs" in errors[0]


def test_every_error_of_a_file_is_reported_together(project):
    bad = (
        MINIMAL.replace("us-east-1", "us-est-1").replace("project: digits", "project: Digits")
        + "    max_run: 4 hours\n    input_mode: file\n"
    )
    errors = project.spec(bad).errors()
    assert len(errors) == 4
    assert errors[0].startswith("config/sagestack.yaml:1:10: project: 'Digits' is not a valid project name")
    assert errors[1] == (
        "config/sagestack.yaml:2:9: region: 'us-est-1' is not a region where SageMaker is available; "
        "did you mean 'us-west-1'?"
    )
    assert errors[2].startswith(
        "config/sagestack.yaml:9:14: jobs.classifier.max_run: '4 hours' is not a duration"
    )
    assert errors[3] == (
        "config/sagestack.yaml:10:17: jobs.classifier.input_mode: 'file' is not allowed; expected one of: "
        "File, Pipe, FastFile; did you mean 'File'?"
    )


def test_missing_required_key_points_at_its_parent(project):
    errors = project.spec(MINIMAL.replace("    instance_type: ml.m5.xlarge\n", "")).errors()
    assert errors == [
        "config/sagestack.yaml:6:3: jobs.classifier.instance_type: missing required key 'instance_type'"
    ]


@pytest.mark.parametrize(
    ("account", "message"),
    [
        ("12345", "account 12345 is not 12 digits; quote account ids"),
        ("'12345678901a'", "'12345678901a' is not an AWS account id (12 digits, quoted)"),
    ],
)
def test_account_must_be_twelve_digits(project, account, message):
    errors = project.spec(MINIMAL + f"account: {account}\n").errors()
    assert errors[0].startswith("config/sagestack.yaml:9:10: account: ") and message in errors[0]


def test_unquoted_twelve_digit_account_is_accepted(project):
    assert project.spec(MINIMAL + "account: 111111111111\n").load().spec.account == "111111111111"


def test_invalid_yaml_reports_line(project):
    errors = project.spec(MINIMAL + "  bad: [unclosed\n").errors()
    assert len(errors) == 1 and errors[0].startswith("config/sagestack.yaml:") and "invalid YAML" in errors[0]


def test_duplicate_key_is_an_error(project):
    errors = project.spec(MINIMAL + "region: us-west-2\n").errors()
    assert "invalid YAML" in errors[0] and "duplicate key" in errors[0]


def test_image_needs_exactly_one_source(project):
    errors = project.spec(
        MINIMAL.replace('{dlc: {framework: pytorch, version: "2.5", py_version: py311}}', "{}")
    ).errors()
    assert errors == [
        "config/sagestack.yaml:4:10: images.train: an image needs exactly one of dlc, dockerfile, uri; got none"
    ]


def test_hyperparameter_values_must_be_scalars(project):
    errors = project.spec(MINIMAL + "    hyperparameters: {lr: {nested: 1}}\n").errors()
    assert errors == [
        "config/sagestack.yaml:9:27: jobs.classifier.hyperparameters.lr: a hyperparameter value must be a "
        "string, number or boolean (SageMaker passes each as a string)"
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("4h", 14400), ("90m", 5400), ("1h30m", 5400), ("2d", 172800), ("45s", 45), (3600, 3600), ("120", 120)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@given(st.integers(0, 27), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_duration_parts_add_up(d, h, m, s):
    text = f"{d}d{h}h{m}m{s}s"
    assert parse_duration(text) == ((d * 24 + h) * 60 + m) * 60 + s


# ---------------------------------------------------------------- overlays


def test_overlay_merges_mappings_and_replaces_lists(project):
    project.spec(
        MINIMAL.replace("ml.m5.xlarge", "[ml.g5.xlarge, ml.m5.xlarge]")
        + "    hyperparameters: {lr: 0.1, epochs: 3}\n"
    )
    project.env(
        "prod",
        'account: "111111111111"\njobs:\n  classifier:\n    instance_type: [ml.c5.xlarge]\n'
        "    hyperparameters: {lr: 0.2}\n",
    )
    spec = project.load("prod").spec
    job = spec.jobs["classifier"]
    assert job.instance_type == ["ml.c5.xlarge"]  # list replaced, not appended
    assert job.hyperparameters == {"lr": 0.2, "epochs": 3}  # mapping merged
    assert spec.account == "111111111111" and job.image == "train"


def test_overlay_errors_point_into_the_overlay_file(project):
    project.spec().env("dev", "jobs:\n  classifier:\n    instance_count: -1\n")
    assert project.errors("dev") == [
        "config/envs/dev.yaml:3:21: jobs.classifier.instance_count: Input should be greater than or equal to 1 "
        "(given: -1)"
    ]


def test_overlay_naming_an_unknown_job_is_an_error(project):
    project.spec().env("dev", "jobs:\n  clasifier: {instance_count: 2}\n")
    assert project.errors("dev") == [
        "config/envs/dev.yaml:2:3: jobs.clasifier: the environment overrides job 'clasifier', which "
        "config/sagestack.yaml does not define; did you mean 'classifier'? (defined: classifier)"
    ]


def test_overlay_cannot_rename_the_project(project):
    project.spec().env("dev", "project: other\n")
    assert project.errors("dev") == [
        "config/envs/dev.yaml:1:1: project: an environment cannot rename the project (it is set in "
        "config/sagestack.yaml)"
    ]


def test_unknown_environment_suggests_a_known_one(project):
    project.spec().env("prod").env("dev")
    errors = project.errors("prd")
    assert len(errors) == 1
    assert "no environment 'prd': config/envs/prd.yaml does not exist; did you mean 'prod'?" in errors[0]


def test_overlay_and_project_errors_are_reported_together(project):
    project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xl")).env(
        "dev", "jobs: {nope: {}}\nregion: eu-west-9\n"
    )
    errors = project.errors("dev")
    assert [e.split(": ")[0] for e in errors] == [
        "config/envs/dev.yaml:1:8",
        "config/envs/dev.yaml:2:9",
        "config/sagestack.yaml:8:20",
    ]


def test_spec_error_report_counts_errors(project):
    with pytest.raises(SpecError) as info:
        project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.m5.xl")).load()
    assert str(info.value).endswith("1 error in the spec")
