"""Spec problems with their place in the YAML files: file:line:column, key path, what, suggestion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PathPart = str | int
Path_ = tuple[PathPart, ...]
Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Location:
    file: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def format_path(path: Path_) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top level)"


@dataclass(frozen=True)
class SpecIssue:
    message: str
    path: Path_ = ()
    location: Location | None = None
    severity: Severity = "error"
    rule: str | None = None

    def format(self) -> str:
        where = f"{self.location}: " if self.location else ""
        tag = f" [{self.rule}]" if self.rule else ""
        kind = "warning: " if self.severity == "warning" else ""
        return f"{where}{kind}{format_path(self.path)}: {self.message}{tag}"


class SpecError(Exception):
    """Every error found in a spec, raised once. str() is the report a user reads."""

    def __init__(self, issues: Sequence[SpecIssue]) -> None:
        self.issues = sorted(issues, key=_sort_key)
        super().__init__(self.report())

    @property
    def errors(self) -> list[SpecIssue]:
        return [i for i in self.issues if i.severity == "error"]

    def report(self) -> str:
        n = len(self.errors)
        lines = [i.format() for i in self.issues]
        lines.append(f"{n} error{'s' if n != 1 else ''} in the spec")
        return "\n".join(lines)


def _sort_key(issue: SpecIssue) -> tuple[str, int, int, str]:
    loc = issue.location
    return (loc.file, loc.line, loc.column, issue.message) if loc else ("~", 0, 0, issue.message)
