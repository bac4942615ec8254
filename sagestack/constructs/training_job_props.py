"""A TrainingPipeline's job as typed props (the library's door): what each prop is, how the props
become the spec's own JobSpec (one table, one function), and what keyword arguments would let
through that must be refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, TypedDict

from aws_cdk import Duration, Size

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.model import spec_of
from sagestack.training.models import JobSpec


class TrainingJobProps(TypedDict, total=False):
    """A TrainingPipeline's job as typed props (CDK types; each default: the spec's, as the SageMaker
    SDK's Estimator). One function turns them into the job (core.model.spec_of)."""

    instance_types: Sequence[str]  # candidates in order of preference (required: at least one)
    entry_point: str  # default: 'train.py'
    instance_count: int  # default: 1
    hyperparameters: Mapping[str, Any]  # default: none
    max_runtime: Duration  # default: 24 hours
    volume_size: Size  # default: 30 GiB
    spot: bool  # managed spot training; default: False
    max_wait: Duration  # with spot: the run plus the wait for capacity; default: 2x max_runtime, <= 28 days
    max_pending_time: Duration  # stop after waiting this long for capacity (30 min to 28 days); default: none
    metric_definitions: Mapping[str, str]  # metric name -> regex; default: none
    distribution: Mapping[str, Any]  # the spec's `distribution:`, e.g. {"torch_distributed": {}}
    run_on_deploy: bool  # start an execution from `cdk deploy` when the job's hash changed; default: False
    # Any other key of a `jobs:` entry of the YAML spec (checkpoint, debugger, profiler, channels, vpc,
    # environment, tensorboard, efa, network_isolation, keep_alive, schedule, tags …).
    options: Mapping[str, Any]


# The spec key each typed prop sets (the props keep the CDK names: max_runtime is a Duration …).
SPEC_KEY_OF_PROP = {
    "instance_types": "instance_type",
    "entry_point": "entry_point",
    "instance_count": "instance_count",
    "hyperparameters": "hyperparameters",
    "max_runtime": "max_run",
    "volume_size": "volume_size_gb",
    "spot": "use_spot_instances",
    "max_wait": "max_wait",
    "max_pending_time": "max_pending_time",
    "metric_definitions": "metric_definitions",
    "distribution": "distribution",
    "run_on_deploy": "run_on_deploy",
}


def _seconds(duration: Duration) -> int:
    return int(duration.to_seconds())


def _as_given(value: Any) -> Any:
    return value


# The props whose CDK types become the spec's units; the rest are the spec's values as they are.
_IN_SPEC_UNITS: dict[str, Callable[[Any], Any]] = {
    "instance_types": list,
    "max_runtime": _seconds,
    "volume_size": lambda size: int(size.to_gibibytes()),
    "max_wait": _seconds,
    "max_pending_time": _seconds,
}
# What the construct's own props (image=, code=) decide; `options` may not name them.
CONSTRUCT_KEYS = {"image": "image=", "source_dir": "code="}


def check_job_props(key: str, props: Mapping[str, Any]) -> None:
    """Refuse what Python's **kwargs would let through: an unknown prop (a misspelt one would
    silently leave the job at its default), a missing instance_types, a key given twice."""
    problems: list[str] = []
    known = sorted(TrainingJobProps.__annotations__)
    for name in sorted(set(props) - set(known)):
        problems.append(f"unknown prop '{name}'{did_you_mean(name, known)}")
    if not props.get("instance_types"):
        problems.append("instance_types is required: the instance types to try, in order of preference")
    options = dict(props.get("options") or {})
    for spec_key, prop in CONSTRUCT_KEYS.items():
        if spec_key in options:
            problems.append(f"options['{spec_key}']: the construct's {prop} prop decides it")
    for prop, spec_key in SPEC_KEY_OF_PROP.items():
        if prop in props and props[prop] is not None and spec_key in options:
            problems.append(f"'{prop}' is given as a prop and as options['{spec_key}']; give it once")
    if problems:
        raise TypeError(f"TrainingPipeline '{key}': " + "; ".join(problems))


def job_spec_from_props(code: str | PathLike[str], props: TrainingJobProps) -> JobSpec:
    """The job the typed props describe, in the spec's units, validated by the spec's own model."""
    fields: dict[str, Any] = {
        "image": "image",  # the construct's TrainingImage; a job names an `images:` key
        "source_dir": Path(code).name,
    }
    for prop, spec_key in SPEC_KEY_OF_PROP.items():
        value = props.get(prop)
        fields[spec_key] = None if value is None else _IN_SPEC_UNITS.get(prop, _as_given)(value)
    return spec_of(JobSpec, fields, props.get("options"))
