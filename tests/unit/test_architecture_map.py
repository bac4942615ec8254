"""docs/ARCHITECTURE.md is the true map of sagestack/: it names every module, and nothing that is gone.

A module is every `.py` file under sagestack/, but an `__init__.py` that holds nothing besides its
docstring (its folder is the thing named then). The map names a module by its path relative to
sagestack/ (`training/request.py`, `local/__init__.py` when that one has code; the top package's own
as `sagestack/__init__.py`), or with `sagestack/` in front, as one inline code span. Both directions
are held: a module the map does not name fails, and so does a name in the map that is not there any
more: every inline code span that reads as a path (no spaces, a `/` in it, ending in `.py` — with an
optional `::test` after it — or in `/`) must be a file or folder under sagestack/ or the repository.
The files are read, not imported, so the test costs milliseconds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "sagestack"
MAP = REPO / "docs" / "ARCHITECTURE.md"

FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A path-looking span: word characters, dots and dashes in segments joined by `/`, ending in a
# module (`x/y.py`, optionally `::name`) or a folder (`x/`, `x/y/`).
MODULE_NAME = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.py(?:::[\w\[\]-]+)?")
FOLDER_NAME = re.compile(r"(?:[\w.-]+/)+")


def has_code(path: Path) -> bool:
    """Anything besides a docstring: an `__init__.py` with only its docstring is not a module."""
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body)


def modules(package: Path) -> set[str]:
    """Every module under `package`, as its path relative to it."""
    out = set()
    for path in package.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if path.name == "__init__.py" and not has_code(path):
            continue
        out.add(path.relative_to(package).as_posix())
    return out


def code_spans(text: str) -> set[str]:
    """The inline code spans of a markdown text (fenced blocks aside: they hold pictures)."""
    return set(CODE_SPAN.findall(FENCE.sub("", text)))


def unnamed(package: Path, text: str) -> list[str]:
    spans = code_spans(text)
    prefix = package.name + "/"
    return sorted(m for m in modules(package) if m not in spans and prefix + m not in spans)


def stale(text: str, package: Path, repo: Path) -> list[str]:
    """Path-looking spans that are neither under the package nor under the repository."""
    out = []
    for span in code_spans(text):
        if MODULE_NAME.fullmatch(span):
            path, kind = span.split("::")[0], Path.is_file
        elif FOLDER_NAME.fullmatch(span) and not span.startswith("."):
            path, kind = span, Path.is_dir
        else:
            continue
        if not (kind(package / path) or kind(repo / path)):
            out.append(span)
    return sorted(out)


def test_the_map_names_every_module() -> None:
    missing = unnamed(PACKAGE, MAP.read_text())
    assert not missing, (
        f"docs/ARCHITECTURE.md does not name {len(missing)} module(s) of sagestack/; name each by "
        "its path relative to sagestack/, in backticks, with a phrase saying what it holds:\n  "
        + "\n  ".join(missing)
    )


def test_the_map_names_nothing_that_is_gone() -> None:
    gone = stale(MAP.read_text(), PACKAGE, REPO)
    assert not gone, (
        "docs/ARCHITECTURE.md names path(s) that are neither under sagestack/ nor in the "
        "repository (moved or removed?):\n  " + "\n  ".join(gone)
    )


def _plant(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    (package / "room").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Only a docstring."""\n')
    (package / "room" / "__init__.py").write_text('"""Re-exports."""\n\nfrom x import y\n')
    (package / "room" / "a.py").write_text("A = 1\n")
    (package / "b.py").write_text("B = 2\n")
    return package


def test_a_module_the_map_leaves_out_fails(tmp_path: Path) -> None:
    package = _plant(tmp_path)
    assert modules(package) == {"b.py", "room/a.py", "room/__init__.py"}
    doc = "- `room/a.py` (a), `room/__init__.py` (re-exports), `pkg/b.py` (b)\n"
    assert unnamed(package, doc) == []
    # Named only inside a fenced picture, by its stem, or with a different path: not named.
    doc = "```\n`room/a.py`\n```\n- `a.py`, `other/room/a.py`, `b.py`, `room/__init__.py`\n"
    assert unnamed(package, doc) == ["room/a.py"]


def test_a_name_the_code_no_longer_has_fails(tmp_path: Path) -> None:
    package = _plant(tmp_path)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("")
    doc = (
        "`room/a.py`, `pkg/b.py`, `room/`, `tests/test_x.py::test_y`, `.sagestack/local/`,"
        " `s3://b/k`, `config/envs/<env>.yaml`, `a b/c.py`\n"
    )
    assert stale(doc, package, tmp_path) == []
    doc += "`room/gone.py`, `gone/`, `tests/test_gone.py::test_y`, `room/a.py/`\n"
    assert stale(doc, package, tmp_path) == [
        "gone/",
        "room/a.py/",
        "room/gone.py",
        "tests/test_gone.py::test_y",
    ]
