"""launcher: drivers renders the SDK v3's contract (the field-by-field judge is ModelTrainer itself:
tests/conformance/test_drivers_oracle.py); here: what changes with the launcher and what does not, the
tuning job's trials, and the sm_drivers channel packed deterministically from the pinned SDK."""

from __future__ import annotations

import json
from typing import Any

from sagestack.core.catalog import validate_request
from sagestack.core.drivers import DriversConfig, pack_drivers, train_script
from sagestack.core.names import Names
from sagestack.training.context import RequestContext
from sagestack.training.launcher import drivers_config, pack_job_drivers
from sagestack.training.models import JobSpec
from sagestack.training.rendered import RenderedJob, resolve_training_job
from sagestack.tuning.models import TuningSpec
from sagestack.tuning.request import render_tuning_request
from tests.unit.test_training_requests import DEPLOYMENT

OWN = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/trainer:7"
LAUNCH = "s3://bucket/code/jobs/0123456789abcdef/"


def plan(job: dict[str, Any]) -> RenderedJob:
    spec = JobSpec.model_validate({"image": "train", **job})

    def ctx(_: str) -> RequestContext:
        return RequestContext(DEPLOYMENT, "s3://cdk-assets/abc.tar.gz", OWN, launch_files_s3_uri=LAUNCH)

    return resolve_training_job(
        names=Names("digits", "dev"),
        key="own",
        job=spec,
        source_sha256="0" * 64,
        image_uris={t: OWN for t in spec.instance_type},
        context=ctx,
    )


TORCHRUN = {
    "instance_type": ["ml.g5.12xlarge"],
    "instance_count": 2,
    "distribution": {"torch_distributed": {}},
    "hyperparameters": {"epochs": 3, "arch": "resnet", "lr": 0.001, "amp": True},
    "metric_definitions": {"val_accuracy": "val_accuracy=([0-9.]+)"},
    "checkpoint": {"every_steps": 50},
    "use_spot_instances": True,
}


def test_the_launcher_changes_only_what_modeltrainer_sends_differently() -> None:
    toolkit = plan(TORCHRUN).candidates[0].request
    drivers_plan = plan({**TORCHRUN, "launcher": "drivers"})
    drivers = drivers_plan.candidates[0].request
    validate_request("CreateTrainingJob", drivers)
    assert drivers["AlgorithmSpecification"] == {
        **toolkit["AlgorithmSpecification"],
        "ContainerEntrypoint": ["/bin/bash"],
        "ContainerArguments": [
            "-c",
            "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh",
        ],
    }
    # the script's arguments only, strings unquoted (safe_serialize); no sagemaker_* key
    assert drivers["HyperParameters"] == {
        "arch": "resnet",
        "checkpoint_every_steps": "50",
        "checkpoint_keep_last": "3",
        "epochs": "3",
        "lr": "0.001",
        "amp": "true",
    }
    assert (
        toolkit["HyperParameters"]["arch"] == '"resnet"' and "sagemaker_program" in toolkit["HyperParameters"]
    )
    assert [c["ChannelName"] for c in drivers["InputDataConfig"]] == ["code", "sm_drivers"]
    assert [c["DataSource"]["S3DataSource"]["S3Uri"] for c in drivers["InputDataConfig"]] == [
        f"{LAUNCH}code/",
        f"{LAUNCH}sm_drivers/",
    ]
    assert drivers["OutputDataConfig"] == {**toolkit["OutputDataConfig"], "CompressionType": "GZIP"}
    # the job's content hash names it, its tags and its checkpoint prefix
    hashed = {"TrainingJobName", "Tags", "CheckpointConfig"}
    same = set(toolkit) - {"AlgorithmSpecification", "HyperParameters", "OutputDataConfig", *hashed}
    assert drivers["CheckpointConfig"]["S3Uri"].endswith(f"/{drivers_plan.digest}/")
    assert {k: drivers.get(k) for k in same} == {k: toolkit[k] for k in same}
    # the launcher is part of the job's identity: another contract, another name
    assert drivers["TrainingJobName"] != toolkit["TrainingJobName"]


def test_a_tuning_jobs_trials_run_the_toolkit_contract() -> None:
    job = plan({**TORCHRUN, "launcher": "drivers"})
    tuning = TuningSpec.model_validate(
        {
            "job": "own",
            "objective": {"metric": "val_accuracy", "type": "Maximize"},
            "ranges": {"lr": {"continuous": [0.0001, 0.1]}},
            "max_jobs": 4,
        }
    )
    request = render_tuning_request(tuning, key="search", names=Names("digits", "dev"), job_plan=job)
    validate_request("CreateHyperParameterTuningJob", request)
    definition = request["TrainingJobDefinition"]
    assert "ContainerEntrypoint" not in definition["AlgorithmSpecification"]  # the API has none
    assert definition["StaticHyperParameters"]["sagemaker_program"] == '"train.py"'
    assert "sm_drivers" not in {c["ChannelName"] for c in definition.get("InputDataConfig", [])}


def test_the_drivers_channel_is_deterministic_and_says_what_to_run() -> None:
    job = JobSpec.model_validate({"image": "train", **TORCHRUN, "launcher": "drivers"})
    packed = pack_job_drivers(job, ["train.py", "requirements.txt"])
    assert packed == pack_job_drivers(job, ["requirements.txt", "train.py"])
    assert not any("__pycache__" in path or path.endswith(".pyc") for path in packed.files)
    assert {"sm_train.sh", "sourcecode.json", "distributed.json", "scripts/environment.py"} <= set(
        packed.files
    )
    assert b"torchrun_driver.py" in packed.files["sm_train.sh"]
    assert b"install_requirements.py requirements.txt" in packed.files["sm_train.sh"]
    without = pack_job_drivers(job, ["train.py"])
    assert without.sha256 != packed.sha256 and b"install_requirements" not in without.files["sm_train.sh"]
    mpi = JobSpec.model_validate(
        {
            "image": "train",
            "instance_type": ["ml.g5.12xlarge"],
            "launcher": "drivers",
            "distribution": {"mpi": {"processes_per_host": 2, "custom_mpi_options": "-x FOO=1"}},
        }
    )
    config = drivers_config(mpi, requirements=False)
    assert config.distributed() == {"process_count_per_node": 2, "mpi_additional_options": ["-x", "FOO=1"]}
    assert "Running MPI Driver" in train_script(config)
    assert pack_drivers(DriversConfig("train.py", "training_src")).files["distributed.json"] == b"{}"


def test_the_pinned_sdk_is_part_of_a_drivers_jobs_name(monkeypatch) -> None:
    import sagestack.training.launch_contract as contract

    job = {**TORCHRUN, "launcher": "drivers"}
    before = plan(job).digest
    monkeypatch.setattr(contract, "SDK_VERSION", "1.28.0")  # other drivers, another job
    assert plan(job).digest != before
    toolkit = plan(TORCHRUN).digest
    monkeypatch.undo()
    assert plan(TORCHRUN).digest == toolkit  # a toolkit job does not depend on the SDK v3's pin


def test_the_preferred_drivers_job_sends_no_toolkit_key() -> None:
    job = {k: v for k, v in TORCHRUN.items() if k not in ("use_spot_instances", "checkpoint")}
    rendered = plan({**job, "launcher": "drivers", "instance_type": ["ml.g5.12xlarge", "ml.g6.12xlarge"]})
    assert rendered.preferred is not None
    assert rendered.preferred.request["HyperParameters"] == rendered.candidates[0].request["HyperParameters"]
    toolkit = plan({**job, "instance_type": ["ml.g5.12xlarge", "ml.g6.12xlarge"]}).preferred
    assert toolkit is not None and toolkit.request["HyperParameters"]["sagemaker_job_name"].startswith('"')


def test_lineage_names_a_drivers_jobs_code_and_entry() -> None:
    from sagestack.ops.lineage import launch_facts

    drivers = plan({**TORCHRUN, "launcher": "drivers"}).candidates[0].request
    assert launch_facts(drivers, drivers["HyperParameters"]) == [
        ("code", f"{LAUNCH}code/"),
        ("entry point", "sm_train.sh (launcher: drivers; the script is named in sm_drivers/sourcecode.json)"),
    ]
    toolkit = plan(TORCHRUN).candidates[0].request
    assert launch_facts(toolkit, toolkit["HyperParameters"]) == [
        ("code", "s3://cdk-assets/abc.tar.gz"),
        ("entry point", "train.py"),
    ]


def test_the_drivers_digest_names_each_files_path_as_well_as_its_bytes(monkeypatch) -> None:
    """The sha256 is the channel's address (S3Layout.launch_files): two channels that differ only in
    where a file lies (a driver renamed or moved by a new sagemaker-train) must not share it, or the
    job would read the old layout from the prefix it already uploaded."""
    import sagestack.core.drivers as drivers

    config = DriversConfig("train.py", "training_src")

    def packed(*files: tuple[str, bytes]) -> str:
        monkeypatch.setattr(drivers, "_sdk_files", lambda: files)
        return pack_drivers(config).sha256

    first = packed(("scripts/a.py", b"same bytes"))
    assert packed(("scripts/a.py", b"same bytes")) == first
    assert packed(("scripts/b.py", b"same bytes")) != first  # renamed
    assert packed(("distributed_drivers/a.py", b"same bytes")) != first  # moved
    assert packed(("scripts/a.py", b"other bytes")) != first
    # the same bytes under two names: swapping which path holds which is a change
    swapped = packed(("scripts/a.py", b"1"), ("scripts/b.py", b"2"))
    assert packed(("scripts/a.py", b"2"), ("scripts/b.py", b"1")) != swapped


def test_the_launch_files_prefix_follows_the_code_and_the_drivers() -> None:
    from sagestack.training.launch_files import DIGEST_LENGTH, launch_files_digest

    code, drivers = "1" * 64, "2" * 64
    digest = launch_files_digest(code, drivers)
    assert len(digest) == DIGEST_LENGTH == 16 and int(digest, 16) >= 0
    assert launch_files_digest(code, drivers) == digest
    assert launch_files_digest("3" * 64, drivers) != digest  # the code changed
    assert launch_files_digest(code, "3" * 64) != digest  # the drivers changed
    assert launch_files_digest(drivers, code) != digest  # which is which matters


def test_the_launch_files_folder_is_the_archives_code_beside_the_drivers(tmp_path) -> None:
    """What the constructs upload under code/jobs/<digest>/: code/ holds exactly what the source
    archive packs (no .env), sm_drivers/ exactly the packed drivers, and nothing else."""
    from sagestack.core.sourcedir import pack_source_dir
    from sagestack.training.launch_files import job_launch_files, launch_files_digest

    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print(1)\n")
    (src / "requirements.txt").write_text("numpy\n")
    (src / "pkg" / "util.py").write_text("X = 1\n")
    (src / ".env").write_text("SECRET=1\n")
    job = JobSpec.model_validate({"image": "train", **TORCHRUN, "launcher": "drivers"})
    archive = pack_source_dir(src)
    files = job_launch_files(job, archive)
    assert files.drivers == pack_job_drivers(job, archive.files)  # requirements.txt seen: installed
    assert b"install_requirements.py requirements.txt" in files.drivers.files["sm_train.sh"]
    assert files.digest == launch_files_digest(archive.sha256, files.drivers.sha256)

    def tree(folder):  # type: ignore[no-untyped-def]
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    dest = tmp_path / "out"
    for _ in range(2):  # a second write over the first (the same digest deployed again) is the same
        files.write(dest)
        assert sorted(p.name for p in dest.iterdir()) == ["code", "sm_drivers"]
        assert tree(dest / "code") == {
            "pkg/util.py": b"X = 1\n",
            "requirements.txt": b"numpy\n",
            "train.py": b"print(1)\n",
        }
        assert tree(dest / "sm_drivers") == files.drivers.files


def test_sourcecode_distributed_and_mp_parameters_are_what_the_pinned_sdk_writes() -> None:
    """The judge is sagemaker-train itself (the pinned SDK v3's own config models): sourcecode.json
    is SourceCode.model_dump(), distributed.json the DistributedConfig's, mp_parameters SMP's."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from sagemaker.train.configs import SourceCode
        from sagemaker.train.distributed import MPI, SMP, Torchrun

    smp = {"hybrid_shard_degree": 2, "tensor_parallel_degree": 2}
    cases = [
        (
            DriversConfig(
                "train.py",
                "src",
                requirements="requirements.txt",
                driver="torchrun",
                process_count_per_node=4,
                smp=smp,
            ),
            SourceCode(source_dir="src", entry_script="train.py", requirements="requirements.txt"),
            Torchrun(process_count_per_node=4, smp=SMP(**smp)),
        ),
        (
            DriversConfig(
                "run.py", "code", driver="mpi", process_count_per_node=2, mpi_additional_options=("-x", "A=1")
            ),
            SourceCode(source_dir="code", entry_script="run.py"),
            MPI(process_count_per_node=2, mpi_additional_options=["-x", "A=1"]),
        ),
        (
            DriversConfig("run.py", "code", driver="mpi"),
            SourceCode(source_dir="code", entry_script="run.py"),
            MPI(),
        ),
        (
            DriversConfig("t.py", "s", driver="torchrun"),
            SourceCode(source_dir="s", entry_script="t.py"),
            Torchrun(),
        ),
    ]
    for config, source, distributed in cases:
        assert config.source_code() == source.model_dump()
        assert config.distributed() == distributed.model_dump()
        packed = pack_drivers(config).files
        assert json.loads(packed["sourcecode.json"]) == source.model_dump()
        assert json.loads(packed["distributed.json"]) == distributed.model_dump()
    assert cases[0][0].mp_parameters() == SMP(**smp)._to_mp_hyperparameters()["mp_parameters"]
    assert cases[1][0].mp_parameters() is None and DriversConfig("t.py", "s").distributed() == {}


def test_the_channel_is_laid_out_as_s3_downloads_it(tmp_path) -> None:
    from sagestack.core.drivers import write_drivers

    files = {"sm_train.sh": b"#!/bin/bash\n", "scripts/environment.py": b"x = 1\n", "a/b/c.py": b""}
    write_drivers(files, tmp_path / "sm_drivers")
    written = {
        p.relative_to(tmp_path / "sm_drivers").as_posix(): p.read_bytes()
        for p in (tmp_path / "sm_drivers").rglob("*")
        if p.is_file()
    }
    assert written == files
    write_drivers(files, tmp_path / "sm_drivers")  # over an existing folder: the same


def test_the_basic_script_enters_the_code_and_runs_the_basic_driver_with_nothing_to_install() -> None:
    """ModelTrainer's sm_train.sh for a source_dir without requirements: cd into the code channel,
    no install step, then the basic script driver (the rendering the oracle compares field by field)."""
    script = train_script(DriversConfig("train.py", "training_src"))
    assert (
        "\ncd /opt/ml/input/data/code \n\n\n\n"
        'echo "Running Basic Script driver"\n'
        "$SM_PYTHON_CMD /opt/ml/input/data/sm_drivers/distributed_drivers/basic_script_driver.py\n"
    ) in script
    assert "None" not in script


def test_a_missing_or_unpinned_sagemaker_train_is_explained(monkeypatch) -> None:
    import pytest

    import sagestack.core.drivers as drivers

    monkeypatch.setattr(drivers, "SDK_DISTRIBUTION", "sagestack-no-such-distribution")
    with pytest.raises(drivers.DriversUnavailable) as missing:
        drivers._installed_version()
    assert str(missing.value) == (
        "launcher: drivers needs sagestack-no-such-distribution (the SDK v3's container drivers), which "
        "is not installed here; install sagestack's train extra: pip install 'sagestack[train]'"
    )
    monkeypatch.undo()
    monkeypatch.setattr(drivers, "SDK_VERSION", "0.0.1")
    with pytest.raises(drivers.DriversUnavailable) as other:
        drivers.drivers_folder()
    installed = drivers._installed_version()
    assert str(other.value) == (
        f"launcher: drivers renders the drivers of sagemaker-train==0.0.1, but {installed} is installed; "
        "install the pinned one: pip install 'sagemaker-train==0.0.1'"
    )


def test_a_hyperparameter_the_drivers_cannot_pass_intact_is_named_with_its_variable() -> None:
    """environment.py exports SM_HP_<KEY>='value' and SM_HPS='{json}' unescaped (drivers-shell-values)."""
    from sagestack.core.drivers import hyperparameter_exports, hyperparameter_problem

    assert hyperparameter_exports("warm-up", "3") == ("SM_HP_WARM_UP", ("3", '{"warm-up": 3}'))
    assert hyperparameter_exports("arch", "resnet") == ("SM_HP_ARCH", ("resnet", '{"arch": "resnet"}'))
    assert hyperparameter_problem("warm-up", "3") is None
    assert hyperparameter_problem("arch", '"res net"') is None
    assert hyperparameter_problem("warm up", "3") == (
        "its key becomes SM_HP_WARM UP, a name bash refuses (letters, digits, '_' and '-' only)"
    )
    assert hyperparameter_problem("note", "it's") == (
        "SM_HP_NOTE='…' holds a ' (it ends the shell's quoted string: the rest runs as shell code)"
    )
    # a NUL survives SM_HPS's JSON (as \u0000) but not SM_HP_NOTE's raw text: the first problem counts
    assert hyperparameter_problem("note", "a\0b") == "SM_HP_NOTE='…' holds a NUL character (bash drops it)"
