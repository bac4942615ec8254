"""Spec problems with their place in the YAML files: file:line:column, key path, what, suggestion."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

PathPart = str | int
Path_ = tuple[PathPart, ...]
# info: advice worth reading once (`sagestack validate` shows it); never a failure
Severity = Literal["error", "warning", "info"]


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
        kind = "" if self.severity == "error" else f"{self.severity}: "
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


# ---------------------------------------------------------------- reports: each issue once, with its source


def headline(issue: SpecIssue, environments: Sequence[str] = ()) -> str:
    """`file:line:col: error: key: message [rule] (in dev, prod)`: the line editors and CI parse."""
    where = f"{issue.location}: " if issue.location else ""
    tag = f" [{issue.rule}]" if issue.rule else ""
    envs = f" (in {', '.join(environments)})" if environments else ""
    return f"{where}{issue.severity}: {format_path(issue.path)}: {issue.message}{tag}{envs}"


_SUGGESTION = re.compile(r"did you mean '([^']+)'")


def suggestion(issue: SpecIssue) -> str | None:
    """The value the message suggests instead (`did you mean 'x'?`), if any."""
    found = _SUGGESTION.search(issue.message)
    return found.group(1) if found else None


def as_json(issue: SpecIssue, environments: Sequence[str] = ()) -> dict[str, object]:
    loc = issue.location
    return {
        "file": loc.file if loc else None,
        "line": loc.line if loc else None,
        "column": loc.column if loc else None,
        "key": format_path(issue.path),
        "severity": issue.severity,
        "message": issue.message,
        "suggestion": suggestion(issue),
        "rule": issue.rule,
        "environments": list(environments),
    }


def merge_issues(
    found: Iterable[tuple[str | None, Sequence[SpecIssue]]],
) -> list[tuple[SpecIssue, list[str]]]:
    """Each distinct issue once, with the environments it was found in (an error of the project
    file is found by every environment that loads it), in the order of the report."""
    envs: dict[SpecIssue, list[str]] = {}
    for env, issues in found:
        for issue in issues:
            named = envs.setdefault(issue, [])
            if env is not None and env not in named:
                named.append(env)
    return sorted(envs.items(), key=lambda pair: _sort_key(pair[0]))


def source_excerpt(issue: SpecIssue, text: str) -> list[str]:
    """The issue's line of `text` with a caret under the value or key it is located at (as rustc,
    ruff and cfn-lint show it); [] when the location is not in the text."""
    loc = issue.location
    lines = text.splitlines()
    if loc is None or not 1 <= loc.line <= len(lines):
        return []
    line = lines[loc.line - 1].rstrip()
    start = loc.column - 1
    if start > len(line):
        return []
    gutter = " " * len(str(loc.line))
    return [
        f"{gutter} |",
        f"{loc.line} | {line}",
        f"{gutter} | {' ' * start}{'^' * _token_width(line, start)}",
    ]


def _token_width(line: str, start: int) -> int:
    """The width of the YAML token at `start`: a quoted string, a flow collection, or a plain
    scalar or key (up to `: `, a flow delimiter or a comment)."""
    if start >= len(line):
        return 1
    first = line[start]
    if first in "'\"":
        end = _closing_quote(line, start)
    elif first in "[{":
        end = _closing_bracket(line, start)
    else:
        end = start
        while end < len(line) and not _plain_ends(line, end):
            end += 1
        end -= 1
    return max(len(line[start : end + 1].rstrip()), 1)


def _closing_quote(line: str, start: int) -> int:
    quote, i = line[start], start + 1
    while i < len(line):
        if quote == '"' and line[i] == "\\":
            i += 2
            continue
        if line[i] == quote:
            if quote == "'" and line[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i
        i += 1
    return len(line) - 1


def _closing_bracket(line: str, start: int) -> int:
    depth, quote = 0, None
    for i in range(start, len(line)):
        ch = line[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i
        elif ch == "#" and line[i - 1] in " \t":
            return i - 1
    return len(line) - 1


def _plain_ends(line: str, i: int) -> bool:
    ch = line[i]
    if ch in ",[]{}":
        return True
    if ch == ":" and (i + 1 == len(line) or line[i + 1] in " \t"):
        return True
    return ch == "#" and i > 0 and line[i - 1] in " \t"


# ---------------------------------------------------------------- YAML syntax errors: what to do about each


_FLOW = {
    "while parsing a flow mapping": ("{", "}", "mapping"),
    "while parsing a flow sequence": ("[", "]", "list"),
}


def yaml_syntax_issue(e: Any, text: str, compose: Callable[[], Any]) -> tuple[str, int, int, tuple[str, ...]]:
    """A YAML error ruamel located (a MarkedYAMLError), as what to do about it and the place to fix:
    (message, line, column, the key it concerns): a tab at the tab; an unclosed '{' or '[' where it
    was opened; a key given twice with both lines. `compose` gives the text's node tree (it
    composes: a duplicate key is the constructor's error)."""
    problem, context = str(e.problem or ""), str(e.context or "")
    mark = e.problem_mark or e.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if "'\\t'" in problem:
        tabbed = [
            n for n, row in enumerate(text.splitlines(), 1) if "\t" in row[: len(row) - len(row.lstrip())]
        ]
        more = [n for n in tabbed if n != line]
        others = f" (also indented with tabs: line {', '.join(map(str, more[:8]))})" if more else ""
        message = f"a tab in the indentation; YAML indents with spaces only: indent with spaces{others}"
        return message, line, column, ()
    if context in _FLOW and e.context_mark is not None:
        opening, closing, kind = _FLOW[context]
        found = problem.rsplit("but got ", 1)[-1].strip("'")
        where = "the file ends" if found == "<stream end>" else f"line {line}, column {column} has {found!r}"
        cm = e.context_mark
        return (
            f"the {kind} opened with '{opening}' here is not closed: {where} where ',' or '{closing}' "
            f"must come; close it with '{closing}' (or separate its entries with ',')",
            cm.line + 1,
            cm.column + 1,
            (),
        )
    if "duplicate key" in problem:
        first = _first_of_duplicate(compose(), mark)
        if first is not None:
            key, before = first
            return (
                f"{key!r} is given twice in one mapping, on line {before} and on line {line}; a key is "
                f"allowed once: delete one of them (to keep this value, delete line {before})",
                line,
                column,
                (key,),
            )
    return f"invalid YAML: {printable(' '.join(x for x in (context, problem) if x))}", line, column, ()


def _first_of_duplicate(root: Any, mark: Any) -> tuple[str, int] | None:
    """The key at `mark` and the line of its first occurrence in the same mapping."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key, value in node.value:
                written = getattr(key, "value", None)
                if isinstance(written, str) and key.start_mark.index == mark.index and written in seen:
                    return written, seen[written]
                if isinstance(written, str):
                    seen.setdefault(written, key.start_mark.line + 1)
                pending += [key, value]
        elif isinstance(node, SequenceNode):
            pending += node.value
    return None


def printable(message: str) -> str:
    """A message with no raw control characters (a terminal would act on them): each escaped."""
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in message.replace("\n", " "))
