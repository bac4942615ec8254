"""Load config/sagestack.yaml plus an environment overlay into a validated ProjectSpec.

Two stages, as SkyPilot does it: the schema (pydantic) checks shape; then the rule registry
checks meaning. Every problem of both files is collected and raised together, each with its
file:line:column, key path, what was given and what is allowed.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.config import ENV_DIR, PROJECT_FILE, list_environments
from sagestack.core.errors import Path_, SpecError, SpecIssue
from sagestack.core.yamldoc import Document, merge, read_yaml
from sagestack.delivery.models import DeliverySpec
from sagestack.project.models import ProjectSpec

__all__ = ["ENV_DIR", "PROJECT_FILE", "LoadedSpec", "delivery_of", "list_environments", "load_project"]

# Sections whose entries are defined by the project file; an overlay may only change them.
ENTRY_SECTIONS = ("images", "jobs", "tuning", "endpoints")
_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
# Job keys of SageMaker features that are retired: what to use instead, rather than "unknown key".
_TRAINING_COMPILER = (
    "SageMaker Training Compiler gets no new releases (AWS); use PyTorch's own compiler instead: "
    "hyperparameters: {compile: true} (torch.compile in training_src), with a current PyTorch image"
)
RETIRED_KEYS = {"training_compiler": _TRAINING_COMPILER, "compiler_config": _TRAINING_COMPILER}


@dataclass(frozen=True)
class LoadedSpec:
    spec: ProjectSpec
    env: str | None
    root: Path
    document: Document
    warnings: list[SpecIssue] = field(default_factory=list)


def delivery_of(root: Path) -> DeliverySpec | None:
    """The project's `delivery:` (a project-level key: overlays do not change it)."""
    return load_project(root, None, run_rules=False).spec.delivery


def load_project(root: Path | str = ".", env: str | None = None, *, run_rules: bool = True) -> LoadedSpec:
    """The project spec as environment `env` sees it. Raises SpecError listing every error."""
    root = Path(root).resolve()
    issues: list[SpecIssue] = []
    base = read_yaml(root / PROJECT_FILE, PROJECT_FILE)
    if not isinstance(base.data, dict):
        raise SpecError([SpecIssue("the project file must be a mapping", location=base.locate(()))])
    doc = base
    if env is not None:
        doc, overlay_issues = _apply_overlay(root, base, env)
        issues += overlay_issues
    try:
        spec = ProjectSpec.model_validate(doc.data)
    except ValidationError as e:
        issues += [_issue_from_pydantic(err, doc) for err in e.errors(include_url=False)]
        raise SpecError(issues) from None
    warnings: list[SpecIssue] = []
    if run_rules:
        from sagestack.project.rules import RuleContext, check_spec

        for issue in check_spec(RuleContext(spec=spec, env=env, root=root), doc):
            (issues if issue.severity == "error" else warnings).append(issue)
    if any(i.severity == "error" for i in issues):
        raise SpecError(issues + warnings)
    return LoadedSpec(spec=spec, env=env, root=root, document=doc, warnings=warnings)


def _apply_overlay(root: Path, base: Document, env: str) -> tuple[Document, list[SpecIssue]]:
    known = list_environments(root)
    display = f"{ENV_DIR}/{env}.yaml"
    if env not in known:
        hint = did_you_mean(env, known)
        raise SpecError(
            [
                SpecIssue(
                    f"no environment '{env}': {display} does not exist{hint} "
                    f"(environments: {', '.join(known) or 'none'})",
                    location=base.locate(()),
                )
            ]
        )
    if not _ENV_NAME.match(env):
        raise SpecError(
            [SpecIssue(f"environment name '{env}' must be 1-16 lowercase letters, digits, hyphens")]
        )
    overlay = read_yaml(root / display, display)
    if not isinstance(overlay.data, dict):
        raise SpecError([SpecIssue("an environment overlay must be a mapping", location=overlay.locate(()))])
    issues: list[SpecIssue] = []
    data = dict(overlay.data)
    if "project" in data:
        issues.append(
            SpecIssue(
                f"an environment cannot rename the project (it is set in {PROJECT_FILE})",
                path=("project",),
                location=overlay.locate(("project",), key=True),
            )
        )
        del data["project"]
    for section in ENTRY_SECTIONS:
        entries = data.get(section)
        if not isinstance(entries, dict):
            continue
        defined = base.data.get(section) or {}
        kept = {}
        for name, value in entries.items():
            if name in defined:
                kept[name] = value
                continue
            singular = section.rstrip("s") if section != "tuning" else "tuning job"
            issues.append(
                SpecIssue(
                    f"the environment overrides {singular} '{name}', which {PROJECT_FILE} does not define"
                    f"{did_you_mean(name, defined)} (defined: {', '.join(defined) or 'none'})",
                    path=(section, name),
                    location=overlay.locate((section, name), key=True),
                )
            )
        data[section] = kept
    overlay.data = data
    return merge(base, overlay), issues


# ---------------------------------------------------------------- pydantic errors -> SpecIssue


def _issue_from_pydantic(err: Any, doc: Document) -> SpecIssue:
    loc = tuple(err["loc"])
    is_key = bool(loc) and loc[-1] == "[key]"
    path: Path_ = tuple(p for p in loc if p != "[key]")
    etype = err["type"]
    given = err.get("input")
    if etype == "extra_forbidden":
        allowed = _allowed_keys(path[:-1])
        name = str(path[-1])
        if name in RETIRED_KEYS and len(path) == 3 and path[0] == "jobs":
            return SpecIssue(RETIRED_KEYS[name], path=path, location=doc.locate(path, key=True))
        msg = f"unknown key '{name}'{did_you_mean(name, allowed)}"
        if allowed:
            msg += f" (allowed here: {', '.join(allowed)})"
        return SpecIssue(msg, path=path, location=doc.locate(path, key=True))
    if etype == "missing":
        return SpecIssue(
            f"missing required key '{path[-1]}'", path=path, location=doc.locate(path[:-1], key=True)
        )
    if etype == "literal_error":
        expected = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
        msg = f"'{given}' is not allowed; expected one of: {', '.join(expected)}"
        msg += did_you_mean(str(given), expected)
        return SpecIssue(msg, path=path, location=doc.locate(path))
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if _is_scalar(given) and not etype.startswith(
        ("name", "account", "region", "instance_type", "duration", "email", "phone")
    ):
        msg += f" (given: {given!r})"
    return SpecIssue(msg, path=path, location=doc.locate(path, key=is_key))


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) or value is None


def _allowed_keys(path: Path_) -> list[str]:
    """The keys the model at `path` accepts (aliases as written in YAML), or [] if not a model."""
    model: Any = ProjectSpec
    for part in path:
        model = _step(model, part)
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or name for name, f in model.model_fields.items()]
    return []


def _step(tp: Any, part: Any) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, f in tp.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is dict and len(args) == 2:
        return args[1]
    if origin in (list, tuple) and args:
        return args[0]
    return None


def _unwrap(tp: Any) -> Any:
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp
