"""Load config/sagestack.yaml plus an environment overlay into a validated ProjectSpec.

Two stages, as SkyPilot does it: the schema (pydantic) checks shape; then the rule registry
checks meaning. Every problem of both files is collected and raised together, each with its
file:line:column, key path, what was given and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sagestack.core.catalog.quotas import snapshot_path
from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.config import ENV_DIR, PROJECT_FILE, list_environments
from sagestack.core.errors import Location, Path_, SpecError, SpecIssue
from sagestack.core.yamldoc import Document, merge, read_bounded, read_yaml
from sagestack.delivery.models import DeliverySpec
from sagestack.project.models import ProjectSpec
from sagestack.project.rules import RuleContext, check_spec

__all__ = [
    "ENV_DIR",
    "PROJECT_FILE",
    "EnvironmentFiles",
    "LoadedSpec",
    "ProjectFiles",
    "delivery_of",
    "list_environments",
    "load_project",
    "lock_path",
    "read_json",
]

_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
# Job keys of SageMaker features that are retired: what to use instead, rather than "unknown key".
_TRAINING_COMPILER = (
    "SageMaker Training Compiler gets no new releases (AWS); use PyTorch's own compiler instead: "
    "hyperparameters: {compile: true} (torch.compile in training_src), with a current PyTorch image"
)
# Keys of the project file an overlay may not set: what to do instead.
PROJECT_ONLY = {
    "project": f"an environment cannot rename the project (it is set in {PROJECT_FILE})",
    "promotion": "the promotion order is the project's, not one environment's: set promotion: in "
    f"{PROJECT_FILE} (e.g. promotion: [dev, staging, prod]) and remove it here",
}
RETIRED_KEYS = {"training_compiler": _TRAINING_COMPILER, "compiler_config": _TRAINING_COMPILER}


def lock_path(root: Path, env: str) -> Path:
    """config/envs/<env>.lock.json (`sagestack lock` writes it; sagestack.ops.lock says what it holds)."""
    return root / ENV_DIR / f"{env}.lock.json"


@dataclass(frozen=True)
class EnvironmentFiles:
    """An environment's other config files as they were when its spec was loaded, each read once:
    a synth's checks, its stacks and the lineage its packages record all use these."""

    lock: dict[str, Any] | None = None  # config/envs/<env>.lock.json
    lock_sha256: str | None = None  # of the lock's bytes: a package records the lock it was trained under
    quotas: dict[str, Any] | None = None  # config/envs/<env>.quotas.json (`sagestack quota snapshot`)

    @property
    def quota_codes(self) -> dict[str, str]:
        """Quota name -> code from the snapshot, or {} without one (the pipelines then proceed
        without the run-time check and say so)."""
        return {q["QuotaName"]: q["QuotaCode"] for q in (self.quotas or {}).get("quotas", [])}


@dataclass(frozen=True)
class LoadedSpec:
    spec: ProjectSpec
    env: str | None
    root: Path
    document: Document
    warnings: list[SpecIssue] = field(default_factory=list)
    files: EnvironmentFiles = field(default_factory=EnvironmentFiles)


MAX_JSON_BYTES = 16 * 1024 * 1024  # a lock or a quota snapshot: kilobytes in a real project


def read_json(path: Path, display: str) -> tuple[Any, bytes] | None:
    """A JSON config file (a lock, a quota snapshot) and its bytes; None when it does not exist.
    Held to the spec's rules: a regular file (a FIFO would block), read at most to its bound."""
    what = "a lock" if display.endswith(".lock.json") else "a config file"
    data = read_bounded(path, display, MAX_JSON_BYTES, what=what, fmt="JSON")
    if data is None:
        return None
    try:
        return json.loads(data), data
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        line, column = (e.lineno, e.colno) if isinstance(e, json.JSONDecodeError) else (1, 1)
        raise SpecError(
            [SpecIssue(f"not valid JSON: {e}", location=Location(display, line, column))]
        ) from None


class ProjectFiles:
    """The config files of the project at `root`, each read and each environment loaded at most once
    per instance: one synth (or one command) holds one, so no file is parsed twice and none can
    change between two reads of the same run."""

    def __init__(self, root: Path | str = ".") -> None:
        self.root = Path(root).resolve()
        self._documents: dict[str, Document] = {}
        self._loaded: dict[tuple[str | None, bool], LoadedSpec] = {}
        self._env_files: dict[str, EnvironmentFiles] = {}
        self._environments: list[str] | None = None

    def environments(self) -> list[str]:
        """The environments of the project: one overlay each in config/envs/."""
        if self._environments is None:
            self._environments = list_environments(self.root)
        return list(self._environments)

    def document(self, display: str) -> Document:
        """A YAML file of the project (a copy of it: loading changes what it is given)."""
        if display not in self._documents:
            self._documents[display] = read_yaml(self.root / display, display)
        return self._documents[display].copy()

    def environment_files(self, env: str) -> EnvironmentFiles:
        if env not in self._env_files:
            lock_display = f"{ENV_DIR}/{env}.lock.json"
            lock = read_json(lock_path(self.root, env), lock_display)
            quotas = read_json(snapshot_path(self.root, env), f"{ENV_DIR}/{env}.quotas.json")
            self._env_files[env] = EnvironmentFiles(
                lock=lock[0] if lock else None,
                lock_sha256=hashlib.sha256(lock[1]).hexdigest() if lock else None,
                quotas=quotas[0] if quotas else None,
            )
        return self._env_files[env]

    def load(self, env: str | None = None, *, run_rules: bool = True) -> LoadedSpec:
        """The project spec as environment `env` sees it. Raises SpecError listing every error."""
        key = (env, run_rules)
        if key not in self._loaded:
            self._loaded[key] = _load(self, env, run_rules)
        return self._loaded[key]

    def account(self, env: str) -> str | None:
        """The account environment `env` names: from its spec as loaded already, else loaded for it
        without the rules (they judge the work, not the account). SpecError if it does not load."""
        loaded = self._loaded.get((env, True)) or self._loaded.get((env, False))
        return (loaded or self.load(env, run_rules=False)).spec.account

    def delivery(self) -> DeliverySpec | None:
        """The project's `delivery:` (a project-level key: overlays do not change it)."""
        base = self._documents.get(PROJECT_FILE)
        if base is not None and isinstance(base.data, dict) and "delivery" not in base.data:
            return None  # the project file, read already, has none: no need to validate it alone
        return self.load(None, run_rules=False).spec.delivery


def delivery_of(root: Path) -> DeliverySpec | None:
    """The project's `delivery:` (a project-level key: overlays do not change it)."""
    return ProjectFiles(root).delivery()


def load_project(root: Path | str = ".", env: str | None = None, *, run_rules: bool = True) -> LoadedSpec:
    """The project spec as environment `env` sees it. Raises SpecError listing every error."""
    return ProjectFiles(root).load(env, run_rules=run_rules)


def _load(files: ProjectFiles, env: str | None, run_rules: bool) -> LoadedSpec:
    root = files.root
    issues: list[SpecIssue] = []
    base = files.document(PROJECT_FILE)
    if not isinstance(base.data, dict):
        raise SpecError([SpecIssue("the project file must be a mapping", location=base.locate(()))])
    doc = base
    if env is not None:
        doc, overlay_issues = _apply_overlay(files, base, env)
        issues += overlay_issues
    try:
        spec = ProjectSpec.model_validate(_without_extensions(doc.data))
    except ValidationError as e:
        issues += [_issue_from_pydantic(err, doc) for err in e.errors(include_url=False)]
        raise SpecError(issues) from None
    warnings: list[SpecIssue] = []
    if run_rules:
        for issue in check_spec(RuleContext(spec=spec, env=env, root=root), doc):
            (issues if issue.severity == "error" else warnings).append(issue)
    if any(i.severity == "error" for i in issues):
        raise SpecError(issues + warnings)
    env_files = files.environment_files(env) if env is not None else EnvironmentFiles()
    return LoadedSpec(spec=spec, env=env, root=root, document=doc, warnings=warnings, files=env_files)


# Top-level keys starting with 'x-' are the user's own (as in Compose files and OpenAPI): a place for
# YAML anchors that other entries merge (`x-gpu: &gpu {...}` then `<<: *gpu`); they are not spec keys.
EXTENSION_PREFIX = "x-"


def _without_extensions(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}


def _bad_environment_name(env: str, display: str) -> SpecIssue:
    """The name becomes part of every physical name: say what is allowed, and offer one that is."""
    fixed = re.sub(r"[^a-z0-9-]+", "-", env.lower()).lstrip("-0123456789")[:16].rstrip("-")
    hint = f"; rename {display} to {ENV_DIR}/{fixed}.yaml" if fixed and fixed != env else ""
    return SpecIssue(
        f"environment name '{env}' must be 1-16 lowercase letters, digits and hyphens, starting with a "
        f"letter (it is part of every stack, job, endpoint and bucket name){hint}",
        location=Location(display, 1, 1),
    )


def _apply_overlay(files: ProjectFiles, base: Document, env: str) -> tuple[Document, list[SpecIssue]]:
    known = files.environments()
    display = f"{ENV_DIR}/{env}.yaml"
    if env not in known:
        hint = did_you_mean(env, known)
        raise SpecError(
            [
                # No place in a file to point at: the name came from the caller (a CLI says which
                # flag: cli/common.checked_env).
                SpecIssue(
                    f"no environment '{env}': {display} does not exist{hint} "
                    f"(environments: {', '.join(known) or 'none'})"
                )
            ]
        )
    if not _ENV_NAME.match(env):
        raise SpecError([_bad_environment_name(env, display)])
    overlay = files.document(display)
    if not isinstance(overlay.data, dict):
        raise SpecError([SpecIssue("an environment overlay must be a mapping", location=overlay.locate(()))])
    issues: list[SpecIssue] = []
    data = dict(overlay.data)
    for key, why in PROJECT_ONLY.items():
        if key in data:
            issues.append(SpecIssue(why, path=(key,), location=overlay.locate((key,), key=True)))
            del data[key]
    for section in ENTRY_SECTIONS:
        if isinstance(data.get(section), dict):
            kept, found = _declared_entries(base, overlay, section, data[section])
            issues += found
            if kept is None:
                del data[section]  # the project file's own value stays, for its own error
            else:
                data[section] = kept
    overlay.data = data
    return merge(base, overlay), issues


def _entry_sections() -> dict[str, str]:
    """The sections of the project file that are mappings of named entries (`jobs:`, `clusters:` …),
    read from ProjectSpec: the key in YAML -> what one entry is called in a message."""
    out = {}
    for name, f in ProjectSpec.model_fields.items():
        if typing.get_origin(f.annotation) is not dict:
            continue
        value = typing.get_args(f.annotation)[1]
        if isinstance(value, type) and issubclass(value, BaseModel):
            key = f.alias or name
            out[key] = _SINGULAR.get(key, key.removesuffix("s"))
    return out


_SINGULAR = {"tuning": "tuning job"}
# Sections whose entries are defined by the project file; an overlay may only change them.
ENTRY_SECTIONS = _entry_sections()


def _declared_entries(
    base: Document, overlay: Document, section: str, entries: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[SpecIssue]]:
    """The overlay's entries of `section` that the project file declares, and an issue for each
    other. None when the project file's section is there but no mapping: nothing then to change."""
    singular = ENTRY_SECTIONS[section]
    defined = base.data.get(section, {})
    if not isinstance(defined, dict):
        return None, [
            SpecIssue(
                f"the environment overrides {singular} '{name}', but {section} in {PROJECT_FILE} is not a "
                f"mapping of {section if section.endswith('s') else singular + 's'} by name",
                path=(section, name),
                location=overlay.locate((section, name), key=True),
            )
            for name in entries
        ]
    issues = [
        SpecIssue(
            f"the environment overrides {singular} '{name}', which {PROJECT_FILE} does not define"
            f"{did_you_mean(name, defined)} (defined: {', '.join(defined) or 'none'})",
            path=(section, name),
            location=overlay.locate((section, name), key=True),
        )
        for name in entries
        if name not in defined
    ]
    return {name: value for name, value in entries.items() if name in defined}, issues


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
    model = _unwrap(model)  # an optional section (`SloSpec | None`) is its model
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
