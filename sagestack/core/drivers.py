"""The SageMaker Python SDK v3's launch contract (`launcher: drivers`): what ModelTrainer puts in a job.

ModelTrainer (sagemaker-train) runs no toolkit in the image: the job's entry point is `/bin/bash -c
"… sm_train.sh"`, read from a second input channel, `sm_drivers`, which holds the SDK's own container
drivers (`scripts/environment.py` writes the SM_* environment; `distributed_drivers/*_driver.py`
launch the script: plainly, under torchrun or under mpirun), the `sm_train.sh` its templates render,
and two files saying what to run: `sourcecode.json` and `distributed.json`. The code is a channel of
its own, `code`. Only Python is needed in the image.

The drivers here are the pinned sagemaker-train's own files, read from the installed distribution
without importing the SDK (it costs seconds); `sm_train.sh` is rendered from the SDK's own
`templates.py`, loaded as a plain module. Everything is packed deterministically and content-addressed
(`PackedDrivers.sha256`), like the source archive: the same job gives the same bytes on every machine.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

SDK_DISTRIBUTION = "sagemaker-train"
SDK_VERSION = "1.27.0"  # pyproject's train extra pins the same
DRIVERS_CHANNEL = "sm_drivers"
CODE_CHANNEL = "code"
CONTAINER_DRIVERS = "/opt/ml/input/data/sm_drivers"
CONTAINER_CODE = "/opt/ml/input/data/code"
TRAIN_SCRIPT = "sm_train.sh"
SOURCE_CODE_JSON = "sourcecode.json"
DISTRIBUTED_JSON = "distributed.json"
REQUIREMENTS_FILE = "requirements.txt"  # the toolkit installs it when the code has one; so do the drivers
# ModelTrainer's DEFAULT_CONTAINER_ENTRYPOINT / DEFAULT_CONTAINER_ARGUMENTS (train/constants.py)
CONTAINER_ENTRYPOINT = ["/bin/bash"]
CONTAINER_ARGUMENTS = [
    "-c",
    f"chmod +x {CONTAINER_DRIVERS}/{TRAIN_SCRIPT} && {CONTAINER_DRIVERS}/{TRAIN_SCRIPT}",
]
# SourceCode.ignore_patterns' default (train/configs.py), written into sourcecode.json
DEFAULT_IGNORE_PATTERNS = [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]
# The fields of the SDK's distributed configs, in their declaration order (what model_dump writes).
SMP_FIELDS = (
    "hybrid_shard_degree",
    "sm_activation_offloading",
    "activation_loading_horizon",
    "fsdp_cache_flush_warnings",
    "allow_empty_shards",
    "tensor_parallel_degree",
    "context_parallel_degree",
    "expert_parallel_degree",
    "random_seed",
)
Driver = Literal["basic", "torchrun", "mpi"]
# distributed class name (the template's "Running {name} Driver") and its script
DRIVER_SCRIPTS: dict[Driver, tuple[str, str]] = {
    "torchrun": ("Torchrun", "torchrun_driver.py"),
    "mpi": ("MPI", "mpi_driver.py"),
}


class DriversUnavailable(RuntimeError):
    """The pinned sagemaker-train is not installed here."""


@dataclass(frozen=True)
class DriversConfig:
    """What a job tells the drivers: the entry script, the requirements file, the launcher."""

    entry_script: str
    source_dir: str  # as the spec names it (sourcecode.json records it; the drivers never read it)
    requirements: str | None = None
    driver: Driver = "basic"
    process_count_per_node: int | None = None
    mpi_additional_options: tuple[str, ...] = ()
    smp: Mapping[str, Any] | None = None  # SMP v2 parameters (Torchrun(smp=SMP(...)))

    def distributed(self) -> dict[str, Any]:
        """distributed.json: the DistributedConfig's model_dump(), {} without one."""
        if self.driver == "torchrun":
            smp = None if self.smp is None else {k: self.smp.get(k) for k in SMP_FIELDS}
            return {"process_count_per_node": self.process_count_per_node, "smp": smp}
        if self.driver == "mpi":
            options = list(self.mpi_additional_options) or None
            return {"process_count_per_node": self.process_count_per_node, "mpi_additional_options": options}
        return {}

    def source_code(self) -> dict[str, Any]:
        """sourcecode.json: the SourceCode's model_dump()."""
        return {
            "source_dir": self.source_dir,
            "requirements": self.requirements,
            "entry_script": self.entry_script,
            "command": None,
            "args": None,
            "ignore_patterns": DEFAULT_IGNORE_PATTERNS,
        }

    def mp_parameters(self) -> str | None:
        """The `mp_parameters` hyperparameter SMP v2 reads (SMP._to_mp_hyperparameters)."""
        if self.smp is None:
            return None
        return json.dumps({k: self.smp[k] for k in SMP_FIELDS if self.smp.get(k) is not None})


@dataclass(frozen=True)
class PackedDrivers:
    """The sm_drivers channel's files (path relative to the channel -> bytes), in path order."""

    files: dict[str, bytes]
    sha256: str


def _site(distribution: str, relative: str) -> Path:
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise DriversUnavailable(
            f"launcher: drivers needs {distribution} (the SDK v3's container drivers), which is not "
            "installed here; install sagestack's train extra: pip install 'sagestack[train]'"
        ) from None
    return Path(str(dist.locate_file(relative)))


def drivers_folder() -> Path:
    """sagemaker/train/container_drivers of the installed sagemaker-train."""
    version = _installed_version()
    if version != SDK_VERSION:
        raise DriversUnavailable(
            f"launcher: drivers renders the drivers of {SDK_DISTRIBUTION}=={SDK_VERSION}, but "
            f"{version} is installed; install the pinned one: pip install '{SDK_DISTRIBUTION}=={SDK_VERSION}'"
        )
    return _site(SDK_DISTRIBUTION, "sagemaker/train/container_drivers")


def _installed_version() -> str:
    try:
        return metadata.version(SDK_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        _site(SDK_DISTRIBUTION, "")  # raises the explanation
        raise AssertionError("unreachable") from None


@cache
def _templates() -> ModuleType:
    """sagemaker-train's templates.py, loaded by itself (strings only; the package costs seconds)."""
    path = _site(SDK_DISTRIBUTION, "sagemaker/train/templates.py")
    spec = importlib.util.spec_from_file_location("sagestack_sdk_v3_templates", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _sdk_files() -> tuple[tuple[str, bytes], ...]:
    """The drivers as the package ships them, and sagemaker-core's install_requirements.py, which
    ModelTrainer copies in beside them (compiled caches left out)."""
    root = drivers_folder()
    files = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    install = _site("sagemaker-core", "sagemaker/core/utils/install_requirements.py")
    files["scripts/install_requirements.py"] = install.read_bytes()
    return tuple(sorted(files.items()))


def train_script(config: DriversConfig) -> str:
    """sm_train.sh as ModelTrainer._prepare_train_script renders it (source_dir given, no command)."""
    templates = _templates()
    install = ""
    if config.requirements:
        install = templates.INSTALL_REQUIREMENTS.format(requirements_file=config.requirements)
    if config.driver == "basic":
        execute = templates.EXECUTE_BASIC_SCRIPT_DRIVER
    else:
        name, script = DRIVER_SCRIPTS[config.driver]
        execute = templates.EXEUCTE_DISTRIBUTED_DRIVER.format(driver_name=name, driver_script=script)
    text: str = templates.TRAIN_SCRIPT_TEMPLATE.format(
        working_dir=f"cd {CONTAINER_CODE} \n", install_requirements=install, execute_driver=execute
    )
    return text


def pack_drivers(config: DriversConfig) -> PackedDrivers:
    """The sm_drivers channel of a job: the same config gives the same bytes and sha256."""
    files = dict(_sdk_files())
    files[TRAIN_SCRIPT] = train_script(config).encode()
    files[SOURCE_CODE_JSON] = json.dumps(config.source_code()).encode()
    files[DISTRIBUTED_JSON] = json.dumps(config.distributed()).encode()
    ordered = dict(sorted(files.items()))
    digest = hashlib.sha256()
    for path, data in ordered.items():
        digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return PackedDrivers(ordered, digest.hexdigest())


def write_drivers(files: Mapping[str, bytes], dest: Path) -> None:
    """Lay the channel's files (PackedDrivers.files) out under `dest`, as SageMaker downloads an S3
    prefix."""
    for relative, data in files.items():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def safe_serialize(value: Any) -> str:
    """A hyperparameter as ModelTrainer sends it (train/utils.safe_serialize): a string as it is,
    anything else JSON-encoded."""
    return value if isinstance(value, str) else json.dumps(value)


def safe_deserialize(text: str) -> Any:
    """A hyperparameter as the drivers read it back (common/utils.safe_deserialize): JSON when it
    parses, else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# environment.py writes every variable into /opt/ml/input/sm_training.env as `export NAME='TEXT'`,
# TEXT unescaped, and sm_train.sh sources the file (set -e): a NAME bash refuses fails the job, a '
# in TEXT ends the quoted string (the rest is shell code), a NUL is dropped by bash.
SHELL_NAME_TAIL = re.compile(r"[A-Za-z0-9_]+")


def exported_text_problem(text: str) -> str | None:
    """Why `export NAME='text'` does not give the script `text` back (None: it does)."""
    if "'" in text:
        return "a ' (it ends the shell's quoted string: the rest runs as shell code)"
    if "\0" in text:
        return "a NUL character (bash drops it)"
    return None


def hyperparameter_exports(key: str, sent: str) -> tuple[str, tuple[str, ...]]:
    """The variable environment.py names for a hyperparameter sent as `sent`, and each text it writes
    for it: SM_HP_<KEY>'s value, and its entry in SM_HPS (and SM_TRAINING_ENV) as JSON."""
    value = safe_deserialize(sent)
    return f"SM_HP_{key.replace('-', '_').upper()}", (safe_serialize(value), json.dumps({key: value}))


HYPERPARAMETER_KEY = re.compile(r"[A-Za-z0-9_-]+")  # SM_HP_<KEY> ('-' becomes '_') is a shell name


def hyperparameter_problem(key: str, sent: str) -> str | None:
    """Why the drivers cannot pass a hyperparameter sent as `sent` intact (None: they can)."""
    variable, texts = hyperparameter_exports(key, sent)
    if HYPERPARAMETER_KEY.fullmatch(key) is None:
        return f"its key becomes {variable}, a name bash refuses (letters, digits, '_' and '-' only)"
    problem = next((p for p in map(exported_text_problem, texts) if p is not None), None)
    return None if problem is None else f"{variable}='…' holds {problem}"
