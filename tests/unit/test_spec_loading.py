"""Loading the spec: locations, messages, suggestions, collecting every error, overlays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagestack.core.errors import Location, SpecError
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


def test_unknown_key_under_an_optional_section_names_the_closest_key(project):
    # slo: and queue: are optional (`SloSpec | None`): their misspelt keys got neither the
    # suggestion nor the keys allowed
    errors = project.spec(
        MINIMAL
        + "    queue: {name: q, shair: a}\n"
        + "endpoints:\n  digits:\n    model: {from: classifier}\n    instance_type: ml.c5.xlarge\n"
        + "    slo: {p95ms: 20}\n"
    ).errors()
    assert any(
        "jobs.classifier.queue.shair: unknown key 'shair'; did you mean 'share'? (allowed here: name, share"
        in e
        for e in errors
    ), errors
    assert any(
        "endpoints.digits.slo.p95ms: unknown key 'p95ms'; did you mean 'p95_ms'? (allowed here: p95_ms, p99_ms"
        in e
        for e in errors
    ), errors


def test_unknown_instance_type_suggests_the_real_one(project):
    errors = project.spec(MINIMAL.replace("ml.m5.xlarge", "[ml.g5.xlarge, ml.p4d.24xl]")).errors()
    assert errors == [
        "config/sagestack.yaml:8:35: jobs.classifier.instance_type[1]: 'ml.p4d.24xl' is not a SageMaker "
        "training job instance type; did you mean 'ml.p4d.24xlarge'?"
    ]


def test_hosting_only_instance_type_is_refused_for_training(project):
    errors = project.spec(MINIMAL.replace("ml.m5.xlarge", "ml.inf2.xlarge")).errors()
    assert errors == [
        "config/sagestack.yaml:8:20: jobs.classifier.instance_type[0]: 'ml.inf2.xlarge' exists but SageMaker "
        "does not offer it for training jobs; the nearest offered: ml.trn1.2xlarge (1x Trainium 32 GiB), "
        "ml.trn1.32xlarge (16x Trainium 32 GiB), ml.trn1n.32xlarge (16x Trainium 32 GiB), ml.trn2.48xlarge "
        "(16x Trainium2 96 GiB)"
    ]


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
    assert len(errors) == 1 and errors[0].startswith("config/sagestack.yaml:9:8: jobs.bad: the list opened")


def test_duplicate_key_is_an_error(project):
    errors = project.spec(MINIMAL + "region: us-west-2\n").errors()
    assert errors[0].startswith(
        "config/sagestack.yaml:9:1: region: 'region' is given twice in one mapping, on line 2 and on line 9"
    )


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
        "string, number or boolean (SageMaker passes each as a string); write a list, a mapping or null as its "
        "JSON text in quotes, e.g. '[1, 2]'"
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


# ---------------------------------------------------------------- hostile inputs (issue 26)


def python_lines(fn):  # type: ignore[no-untyped-def]
    """How many lines of Python `fn()` executes (sys.settrace's line events, every frame): a count of
    work that does not depend on the machine's speed, so a test can tell linear from quadratic."""
    import sys

    count = 0

    def local(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        if event == "line":
            count += 1
        return local

    old = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def test_merging_an_overlay_is_linear_in_its_keys():
    """An overlay of 2,000 tags took 2 s and 8,000 took 20 s: each merged key walked every location
    recorded so far. The work per key must not grow with the overlay (bench/load.py times it)."""
    from sagestack.core.yamldoc import Document, merge

    def documents(n: int) -> tuple[Document, Document]:
        base = Document({"project": "p", "tags": {"a": "b"}}, file="base.yaml")
        base.keys[("tags",)] = base.values[("tags",)] = Location("base.yaml", 2, 1)
        tags = {f"k{i}": "v" for i in range(n)}
        overlay = Document({"tags": tags, "jobs": {f"j{i}": {"x": [1, 2]} for i in range(n)}}, file="o.yaml")
        for i, name in enumerate(tags):
            overlay.keys[("tags", name)] = overlay.values[("tags", name)] = Location("o.yaml", i + 2, 3)
        return base, overlay

    small, large = (
        python_lines(lambda n=n: merge(*documents(n))) - python_lines(lambda n=n: documents(n))
        for n in (300, 1200)
    )
    assert large < 4.5 * small, f"4x the keys cost {large / small:.1f}x the work"


def test_a_merged_overlay_keeps_each_location_of_the_file_that_set_it(project):
    project.spec(MINIMAL + "tags: {team: ml, cost: a}\n").env(
        "dev", "tags: {cost: b, owner: x}\njobs:\n  classifier:\n    instance_type: [ml.c5.xlarge]\n"
    )
    doc = project.load("dev").document
    assert doc.data["tags"] == {"team": "ml", "cost": "b", "owner": "x"}
    assert doc.locate(("tags", "team")) == Location("config/sagestack.yaml", 9, 14)
    assert doc.locate(("tags", "cost")) == Location("config/envs/dev.yaml", 1, 14)
    assert doc.locate(("tags", "owner"), key=True) == Location("config/envs/dev.yaml", 1, 17)
    assert doc.locate(("jobs", "classifier", "instance_type", 0)) == Location("config/envs/dev.yaml", 4, 21)
    assert doc.locate(("jobs", "classifier", "image")) == Location("config/sagestack.yaml", 7, 12)


def _not_a_file(project, kind: str, target: str) -> Path:  # type: ignore[no-untyped-def]
    path = project.root / target
    path.unlink(missing_ok=True)
    if kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize(
    ("kind", "target", "what"),
    [
        ("symlink to /dev/zero", "config/sagestack.yaml", "a character device"),
        ("fifo", "config/sagestack.yaml", "a FIFO (named pipe)"),
        ("fifo", "config/envs/dev.yaml", "a FIFO (named pipe)"),
        ("directory", "config/envs/dev.yaml", "a directory"),
    ],
)
def test_a_spec_file_that_is_not_a_regular_file_is_refused_at_once(project, kind, target, what):
    """/dev/zero passed the size check (st_size 0) and took 2.4 GB; a FIFO hung the loader."""
    project.spec().env("dev")
    _not_a_file(project, kind, target)
    errors = project.errors("dev")
    assert errors == [
        f"{target}:1:1: (top level): {target} is {what}, not a regular file; a spec is a YAML text file"
    ]


def test_a_lock_file_that_is_a_fifo_is_refused_at_once(project):
    project.spec().env("dev")
    _not_a_file(project, "fifo", "config/envs/dev.lock.json")
    assert project.errors("dev") == [
        "config/envs/dev.lock.json:1:1: (top level): config/envs/dev.lock.json is a FIFO (named pipe), "
        "not a regular file; a lock is a JSON text file"
    ]


@pytest.mark.skipif(not Path("/proc/kallsyms").exists(), reason="needs a file whose size stat does not tell")
def test_the_size_limit_holds_for_the_bytes_read_not_the_size_stat_reports(project):
    """/proc files are regular files of st_size 0: only a bounded read sees how long they are."""
    from sagestack.core.yamldoc import read_bounded

    with pytest.raises(SpecError) as info:  # a link to it from a project is refused before (test_spec_yaml)
        read_bounded(Path("/proc/kallsyms"), "/proc/kallsyms")
    assert [i.format() for i in info.value.issues] == [
        "/proc/kallsyms:1:1: (top level): the file is more than 1 MiB; a spec is at most 1 MiB of "
        "YAML (is this the right file?)"
    ]


@pytest.mark.parametrize("section", ["jobs: 1", "jobs: [1, 2]", "jobs: true", "jobs: classifier-x", "jobs:"])
def test_an_entry_section_that_is_not_a_mapping_is_located_while_an_overlay_sets_entries(project, section):
    """An overlay naming entries of a section the project file spells as a scalar or a list raised
    TypeError / AttributeError (exit 1); a string section matched names as substrings and was
    silently replaced by the overlay's entries."""
    spec = MINIMAL.replace("jobs:\n  classifier:\n    image: train\n    instance_type: ml.m5.xlarge\n", "")
    project.spec(spec + section + "\n").env("dev", "jobs:\n  classifier: {instance_count: 2}\n")
    errors = project.errors("dev")
    assert errors[0] == (
        "config/envs/dev.yaml:2:3: jobs.classifier: the environment overrides job 'classifier', but jobs in "
        "config/sagestack.yaml is not a mapping of jobs by name"
    )
    assert (
        errors[1].startswith("config/sagestack.yaml:")
        and "jobs: Input should be a valid dictionary" in errors[1]
    )
    assert len(errors) == 2


def _entry_sections_of_the_schema() -> list[str]:
    """The project file's sections that are mappings of named entries, read from its JSON Schema
    (not from the loader): a section added to ProjectSpec later is covered here by itself."""
    from sagestack.project.models import ProjectSpec

    schema = ProjectSpec.model_json_schema(by_alias=True)
    sections = []
    for name, prop in schema["properties"].items():
        values = [prop.get("additionalProperties") or {}, *(prop.get("patternProperties") or {}).values()]
        if prop.get("type") == "object" and any("$ref" in v for v in values):
            sections.append(name)
    return sections


def test_the_schema_has_the_entry_sections_the_readme_names():
    assert {"images", "jobs", "tuning", "endpoints", "transforms", "clusters"} <= set(
        _entry_sections_of_the_schema()
    )


@pytest.mark.parametrize("section", _entry_sections_of_the_schema())
def test_an_overlay_cannot_invent_an_entry_of_any_section(project, section):
    """README: an overlay may change the entries the project defines but not invent new ones.
    `transforms:` and `clusters:` were missing from a hand-written list."""
    project.spec().env("dev", f"{section}:\n  invented: {{}}\n")
    errors = project.errors("dev")
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"config/envs/dev.yaml:2:3: {section}.invented: the environment overrides ")
    assert "'invented', which config/sagestack.yaml does not define" in errors[0]


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("source_dir", "x" * 300_000, "a path of 300000 characters; at most 1024"),
        ("entry_point", "train-" + "y" * 300 + ".py", "is a file name of 309 bytes; at most 255"),
        ("source_dir", "src\\0dir", "a path cannot hold a NUL character"),
    ],
)
def test_a_path_the_file_system_cannot_be_asked_about_is_a_located_error(project, key, value, says):
    """Fuzzing found `Path.is_file()` raising OSError (name too long) or ValueError (NUL) inside the
    rules that look for the job's source and Dockerfile: exit 1 with a traceback."""
    project.spec(MINIMAL + f'    {key}: "{value}"\n')
    (error,) = project.errors()
    assert error.startswith("config/sagestack.yaml:9:") and f"jobs.classifier.{key}:" in error
    assert says in error


def test_a_dockerfile_folder_with_a_name_too_long_is_a_located_error(project):
    spec = MINIMAL.replace(
        '  train: {dlc: {framework: pytorch, version: "2.5", py_version: py311}}',
        '  train: {dockerfile: "' + "d" * 256 + '"}',
    )
    project.spec(spec)
    (error,) = project.errors()
    assert error.startswith("config/sagestack.yaml:4:") and "is a file name of 256 bytes" in error
