"""The pinned sagemaker-train's ModelTrainer, run offline, as the judge of the drivers launch contract;
and a field-by-field comparison whose every difference must be listed with its reason and its check.

`ModelTrainer._create_training_job_args(boto3=True)` returns the CreateTrainingJob request the SDK v3
would send, without sending it. On the way it does two things that reach AWS, and both are kept on
this machine:

- it uploads the source folder (channel `code`) and its temp drivers folder (channel `sm_drivers`) to
  the session's default bucket: a local moto server serves S3 (the session's S3 client and resource
  are pointed at it; the bucket is created there first, so the SDK never asks STS for an account);
- `model_post_init` validates the role with IAM's `SimulatePrincipalPolicy` (moto has no policy
  simulator): `sagemaker.train.defaults.TrainDefaults.get_role` is patched, for the duration of one
  rendering only, to return the role it is given.

Nothing else of the SDK is changed. `ModelTrainerOracle.render` takes ModelTrainer's own keyword
arguments and returns the request, the files of the temp drivers folder the `sm_drivers` channel is
uploaded from, and the files the `code` channel holds in S3.

`flatten` / `flatten_files` make a request or a channel's files into field paths (`A.B.C`, a
channel as `InputDataConfig[<name>]` and the channels' order as `InputDataConfig#order`; files as
`<channel>/<path>`, a JSON file field by field as `<channel>/<file>:<field>`), and `compare` holds two
of them equal but for the `Difference`s listed (a path or an fnmatch pattern -> the reason and a
check that the difference is exactly that).
"""

from __future__ import annotations

import fnmatch
import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar
from unittest import mock

import boto3

REGION = "us-east-1"
MISSING = "<absent>"  # a field or file one side does not have
T = TypeVar("T")


class _LocalS3Session(boto3.Session):  # type: ignore[misc]
    """A boto3 session whose S3 clients and resources talk to the local moto server."""

    def __init__(self, s3_endpoint: str, region: str) -> None:
        super().__init__(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region)
        self._s3_endpoint = s3_endpoint

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        if service_name == "s3":
            kwargs["endpoint_url"] = self._s3_endpoint
        return super().client(service_name, *args, **kwargs)

    def resource(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        if service_name == "s3":
            kwargs["endpoint_url"] = self._s3_endpoint
        return super().resource(service_name, *args, **kwargs)


def folder_files(root: Path) -> dict[str, bytes]:
    """Every regular file under root: its path relative to root (with /) -> its bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


@dataclass(frozen=True)
class TrainerRendering:
    """What ModelTrainer produced for one set of inputs."""

    request: dict[str, Any]  # _create_training_job_args(boto3=True)
    base_job_name: str  # the name the SDK's job name and S3 prefixes start from
    drivers: dict[str, bytes]  # the temp drivers folder (the sm_drivers channel's source), file by file
    channel_files: dict[str, dict[str, bytes]]  # channel -> the objects under its S3Uri, relative keys
    defaults: dict[str, Any]  # the SDK's own defaults (sagemaker.train.defaults), by name


class ModelTrainerOracle:
    """Renders ModelTrainer requests against a local S3 (moto) with a given role and bucket."""

    def __init__(self, s3_endpoint: str, *, role_arn: str, bucket: str, region: str = REGION) -> None:
        # Imported here, once per oracle: sagemaker-train takes seconds to import.
        with warnings.catch_warnings():
            # model_trainer.py imports its own deprecated sagemaker.train.configs shim
            warnings.filterwarnings("ignore", "sagemaker.train.configs has been moved", DeprecationWarning)
            from sagemaker.core import shapes
            from sagemaker.core.helper.session_helper import Session
            from sagemaker.core.training import configs
            from sagemaker.train import defaults, distributed
            from sagemaker.train.defaults import TrainDefaults
            from sagemaker.train.model_trainer import ModelTrainer

        self.configs = configs
        self.shapes = shapes
        self.distributed = distributed
        self._trainer = ModelTrainer
        self._defaults = TrainDefaults
        self.sdk_defaults = {k: v for k, v in vars(defaults).items() if k.startswith("DEFAULT_")}
        self.role_arn = role_arn
        self.bucket = bucket
        self.region = region
        self._boto = _LocalS3Session(s3_endpoint, region)
        self._s3 = self._boto.client("s3")
        self._s3.create_bucket(Bucket=bucket)
        # The SDK config a machine without config files has: none. Given at construction, the session
        # reads no file of this machine's user; emptied after, ModelTrainer's intelligent defaults find
        # nothing (as with no file) without a JSON-schema check of the config at every look-up.
        self.session = Session(
            boto_session=self._boto,
            default_bucket=bucket,
            sagemaker_config={"SchemaVersion": "1.0"},
        )
        self.session.sagemaker_config = {}

    def render(self, *, read: tuple[str, ...] = ("code",), **kwargs: Any) -> TrainerRendering:
        """ModelTrainer(**kwargs) with this oracle's session and role; `post` (optional) is called
        with the trainer before the request is made (e.g. a `with_*` method); `read`: the channels
        whose uploaded files are read back (channel_files)."""
        post = kwargs.pop("post", None)

        def get_role(role: str | None = None, sagemaker_session: Any = None) -> str | None:
            return role  # IAM's SimulatePrincipalPolicy, which moto lacks, is the only call skipped

        with mock.patch.object(self._defaults, "get_role", staticmethod(get_role)):
            trainer = self._trainer(sagemaker_session=self.session, role=self.role_arn, **kwargs)
        if post is not None:
            post(trainer)
        with warnings.catch_warnings():
            # the SDK's own InstancePreference serializes an unset training_plan_arns with a warning
            warnings.filterwarnings("ignore", "Pydantic serializer warnings", UserWarning)
            request = trainer._create_training_job_args(boto3=True)
        drivers = folder_files(Path(trainer._temp_code_dir.name)) if trainer._temp_code_dir else {}
        rendering = TrainerRendering(
            request=request,
            base_job_name=str(trainer.base_job_name),
            drivers=drivers,
            channel_files={},
            defaults=self.sdk_defaults,
        )
        for channel in request.get("InputDataConfig", []):
            uri = channel["DataSource"].get("S3DataSource", {}).get("S3Uri", "")
            if channel["ChannelName"] in read and uri.startswith(f"s3://{self.bucket}/"):
                rendering.channel_files[channel["ChannelName"]] = self.objects(uri)
        trainer._temp_code_dir = None  # the folder is removed now, not whenever the trainer is collected
        return rendering

    def objects(self, uri: str) -> dict[str, bytes]:
        """The objects under an s3:// prefix of the local S3: key relative to the prefix -> bytes."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        prefix = prefix.rstrip("/") + "/"
        out: dict[str, bytes] = {}
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                body = self._s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                out[item["Key"][len(prefix) :]] = body
        return out


# ---------------------------------------------------------------------------------------------------
# Field by field

NAMED_LISTS = {"InputDataConfig": "ChannelName"}
# What ModelTrainer cannot express at all is compared whole.
WHOLE = {"Tags", "DebugHookConfig", "DebugRuleConfigurations", "ProfilerConfig", "ProfilerRuleConfigurations"}


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """A request as field path -> leaf (an empty mapping is a leaf)."""
    if path in WHOLE:
        return {path: value}
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, list) and path in NAMED_LISTS:
        name = NAMED_LISTS[path]
        out = {f"{path}#order": [item[name] for item in value]}
        for item in value:
            out.update(flatten(item, f"{path}[{item[name]}]"))
        return out
    return {path: value}


def flatten_files(files: Mapping[str, bytes], channel: str, *, json_fields: bool = True) -> dict[str, Any]:
    """A channel's files as `<channel>/<path>` -> bytes, a JSON file's fields as `<channel>/<file>:<field>`."""
    out: dict[str, Any] = {}
    for rel, data in files.items():
        if json_fields and rel.endswith(".json"):
            fields = flatten(json.loads(data))
            out.update({f"{channel}/{rel}:{field}": value for field, value in fields.items()})
        else:
            out[f"{channel}/{rel}"] = data
    return out


# (the subject, sagestack's value, ModelTrainer's value, the path) -> the difference is exactly this
Check = Callable[[T, Any, Any, str], bool]


@dataclass(frozen=True)
class Difference(Generic[T]):
    reason: str
    check: Check[T]
    seen: bool = True  # some subject must show it (False: it depends on the machine)


def listed(path: str, differences: Mapping[str, Difference[T]]) -> str | None:
    """The entry for a path: the path itself, else the first pattern that matches it."""
    if path in differences:
        return path
    return next((k for k in differences if "*" in k and fnmatch.fnmatchcase(path, k)), None)


def compare(
    subject: T, differences: Mapping[str, Difference[T]], ours: dict[str, Any], theirs: dict[str, Any]
) -> tuple[list[str], set[str]]:
    """The problems (a difference not listed, or a listed one that is not what its entry says) and
    the entries the subject shows."""
    problems: list[str] = []
    shown: set[str] = set()
    for path in sorted(ours.keys() | theirs.keys()):
        a, b = ours.get(path, MISSING), theirs.get(path, MISSING)
        if a == b or _parent_of_the_others(path, a, b, ours, theirs):
            continue
        entry = listed(path, differences)
        if entry is None:
            problems.append(f"{path}: sagestack {_short(a)} != ModelTrainer {_short(b)} (not listed)")
        elif not differences[entry].check(subject, a, b, path):
            problems.append(
                f"{path}: sagestack {_short(a)}, ModelTrainer {_short(b)} is not what the entry "
                f"{entry!r} says: {differences[entry].reason}"
            )
        else:
            shown.add(entry)
    return problems, shown


def _parent_of_the_others(path: str, a: Any, b: Any, ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """An empty mapping on one side where the other has fields under it: compared by those fields."""
    other = ours if b == {} and a == MISSING else theirs if a == {} and b == MISSING else None
    return other is not None and any(k.startswith(f"{path}.") for k in other)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else f"{text[:150]}… ({len(text)} characters)"
