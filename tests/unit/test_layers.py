"""The package's import graph runs one way, and the units stay readable.

Layers, lowest first: core <- features <- project <- (constructs, local, ops) <- app <- cli.
A module's layer is decided by the first folder under sagestack/ (local/training/ is local's).
A module may import its own layer or a lower one, never a higher one; the constructs import only
core and the features (they never take the project spec). No module imports another in a circle,
and no folder does: two features may not import each other, even when each file-level arrow runs
one way, nor two rooms of one folder (local/training/ and local/serving/). Every import is an
arrow: at module level, inside a function, and under `if TYPE_CHECKING:` (an annotation names the
shape of a higher layer all the same; a lower layer that needs that shape types against a
Protocol of its own, as core/rules.py does). Only `if TYPE_CHECKING:` and `if typing.TYPE_CHECKING:`
are such guards; arrows under them are named in the findings so the remedy is plain.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import sagestack

PACKAGE = Path(sagestack.__file__).parent
FEATURES = (
    "foundation",
    "training",
    "tuning",
    "endpoints",
    "llm",
    "transforms",
    "monitoring",
    "clusters",
    "delivery",
    "tracking",
    "capacity",
    "queues",
)
LAYERS = {
    "core": 0,
    **dict.fromkeys(FEATURES, 1),
    "project": 2,
    "constructs": 3,
    "local": 3,
    "ops": 3,
    "templates": 3,
    "app": 4,
    "cli": 5,
}
# What each layer-3 part may import besides the layers below it.
ONLY = {"constructs": {"core", *FEATURES, "constructs"}}
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 100
TYPE_ONLY = "under TYPE_CHECKING"
Graph = dict[str, dict[str, str]]  # module -> {imported module: "" or TYPE_ONLY}


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once for every check of the run."""
    return ast.parse(path.read_text())


def is_type_checking_guard(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`, exactly: `not TYPE_CHECKING`, `TYPE_CHECKING or x`
    and any other test are ordinary code that runs."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return (
        isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
        and isinstance(test.value, ast.Name)
        and test.value.id == "typing"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with its kind: "" runs, TYPE_ONLY sits in an `if TYPE_CHECKING:` body
    (its `else:` runs)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_type_checking_guard(node.test):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, TYPE_ONLY if id(node) in guarded else ""


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, str]:
    """The sagestack modules `module` imports (a package's own modules by name), each with its kind."""
    is_package = path.name == "__init__.py"
    root = module.split(".")[0]
    out: dict[str, str] = {}
    for node, kind in _imports(_tree(path)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for name in names:
            if name.split(".")[0] == root and name in modules and name != module:
                out[name] = min(out.get(name, kind), kind)  # a run-time import of it wins
    return out


def _part(module: str) -> str:
    """The first folder under sagestack/: it decides the layer (sub-packages share their part's)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@functools.cache
def graph(package: Path = PACKAGE) -> Graph:
    modules = _modules(package)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def _arrow(module: str, dep: str, kind: str) -> str:
    return f"{module} -> {dep}" + (f" ({kind})" if kind else "")


def upward_imports(g: Graph) -> list[str]:
    upward = []
    for module, deps in g.items():
        part = _part(module)
        if part not in LAYERS:
            continue
        for dep, kind in sorted(deps.items()):
            target = _part(dep)
            if target not in LAYERS:
                continue
            if LAYERS[target] > LAYERS[part] or (
                LAYERS[target] == LAYERS[part] and LAYERS[part] != 1 and target != part
            ):
                upward.append(_arrow(module, dep, kind))
            elif part in ONLY and target not in ONLY[part]:
                upward.append(f"{_arrow(module, dep, kind)}: {part} imports only {sorted(ONLY[part])}")
    return upward


def _cycle(g: dict[str, set[str]] | Graph) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in sorted(g.get(n, ())):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _tangles(g: dict[str, set[str]] | Graph) -> list[set[str]]:
    """The strongly connected sets of more than one node (Tarjan): each holds at least one circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        for d in sorted(g.get(n, ())):
            if d not in index:
                visit(d)
                low[n] = min(low[n], low[d])
            elif d in stack:
                low[n] = min(low[n], index[d])
        if low[n] == index[n]:
            tangle = set(stack[stack.index(n) :])
            del stack[stack.index(n) :]
            if len(tangle) > 1:
                out.append(tangle)

    for n in sorted(g):
        if n not in index:
            visit(n)
    return out


def circles(g: dict[str, set[str]] | Graph) -> list[list[str]]:
    """One circle from each knot of the graph, so every separate finding shows at once."""
    found = []
    for tangle in _tangles(g):
        sub = {n: {d for d in g.get(n, ()) if d in tangle} for n in tangle}
        found.append(_cycle(sub) or [])
    return sorted(found)


def _path(cycle: list[str], kind_of: Callable[[str, str], str]) -> str:
    """a -> b (under TYPE_CHECKING) -> a: each step with its kind."""
    steps = [cycle[0]]
    for a, b in itertools.pairwise(cycle):
        kind = kind_of(a, b)
        steps.append(f"{b} ({kind})" if kind else b)
    return " -> ".join(steps)


def file_circles(g: Graph) -> list[str]:
    return [_path(c, lambda a, b: g[a][b]) for c in circles(g)]


def folder_graph(g: Graph, modules: dict[str, Path]) -> dict[str, dict[str, list[str]]]:
    """Folder -> folder arrows, each with the file-level imports that make it. An import joins the
    two sibling folders where the importer's and the imported module's folders part: features for
    sagestack/endpoints/x.py -> sagestack/llm/y.py, rooms for local/training/ -> local/serving/; a
    folder and its own sub-folders (local/ and local/training/) are one house, not siblings."""
    folders = {
        m: tuple(m.split(".")[1:] if p.name == "__init__.py" else m.split(".")[1:-1])
        for m, p in modules.items()
    }
    out: dict[str, dict[str, list[str]]] = {}
    for module, deps in g.items():
        for dep, kind in deps.items():
            a, b = folders[module], folders[dep]
            i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
            if i is None:
                continue
            src, dst = "/".join(a[: i + 1]), "/".join(b[: i + 1])
            out.setdefault(src, {}).setdefault(dst, []).append(_arrow(module, dep, kind))
    return out


def folder_circles(g: Graph, modules: dict[str, Path]) -> list[str]:
    """Each knot of folders: one circle through it, then every arrow inside it with the imports that
    make the arrow (to untie the knot, some of these arrows go)."""
    fg = folder_graph(g, modules)
    out = []
    for cycle in circles({f: set(ds) for f, ds in fg.items()}):
        knot = next(t for t in _tangles({f: set(ds) for f, ds in fg.items()}) if cycle[0] in t)
        lines = [" -> ".join(cycle) + f" (the folders {', '.join(sorted(knot))} reach one another)"]
        for a in sorted(knot):
            for b, why in sorted(fg[a].items()):
                if b in knot:
                    more = f" (and {len(why) - 3} more)" if len(why) > 3 else ""
                    lines.append(f"  {a} -> {b}: " + "; ".join(sorted(why)[:3]) + more)
        out.append("\n".join(lines))
    return out


def test_every_module_belongs_to_a_layer():
    unplaced = sorted(m for m in _modules() if _part(m) and _part(m) not in LAYERS)
    assert not unplaced, f"modules outside every layer (add their package to LAYERS): {unplaced}"


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    upward = upward_imports(graph())
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_no_module_imports_another_in_a_circle():
    found = file_circles(graph())
    assert not found, "import circles:\n" + "\n".join(found)


def test_no_folder_imports_another_in_a_circle():
    found = folder_circles(graph(), _modules())
    assert not found, "folder circles:\n" + "\n".join(found)


def test_the_judge_finds_an_upward_import_and_a_circle():
    """The checks above can fail: a feature importing the project, and two modules in a circle."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "e"}, "e": set()}) == [
        ["a", "b", "a"],
        ["c", "d", "c"],
    ]
    assert LAYERS[_part("sagestack.training.request")] < LAYERS[_part("sagestack.project.loader")]
    assert _part("sagestack.local.training.runner") == _part("sagestack.local") == "local"


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named sagestack under tmp_path with `files` (paths under it) and every __init__.py."""
    package = tmp_path / "sagestack"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        for folder in [path.parent, *path.parent.parents]:
            if folder == package.parent:
                break
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").touch()
        path.write_text(text)
    return package


def test_the_judge_finds_two_features_in_a_circle_that_no_file_pair_makes(tmp_path):
    package = _plant(
        tmp_path,
        {
            "endpoints/door.py": "from sagestack.llm import sizing\n",
            "endpoints/models.py": "",
            "llm/sizing.py": "",
            "llm/requests.py": "from sagestack.endpoints.models import X\n",
        },
    )
    g = graph(package)
    assert file_circles(g) == [] and upward_imports(g) == []
    assert folder_circles(g, _modules(package)) == [
        "endpoints -> llm -> endpoints (the folders endpoints, llm reach one another)\n"
        "  endpoints -> llm: sagestack.endpoints.door -> sagestack.llm.sizing\n"
        "  llm -> endpoints: sagestack.llm.requests -> sagestack.endpoints.models"
    ]


def test_the_judge_finds_rooms_of_one_folder_in_a_circle_but_not_a_folder_and_its_rooms(tmp_path):
    package = _plant(
        tmp_path,
        {
            "local/__init__.py": "from sagestack.local.training import run\n",
            "local/private.py": "",
            "local/training/run.py": "from sagestack.local import private\nfrom sagestack.local.serving import s\n",
            "local/serving/s.py": "from sagestack.local.private import X\n",
            "local/serving/t.py": "from ..training import run\n",
        },
    )
    found = folder_circles(graph(package), _modules(package))
    assert [f.split(" (")[0] for f in found] == ["local/serving -> local/training -> local/serving"]


def test_the_judge_finds_an_upward_import_under_type_checking(tmp_path):
    package = _plant(
        tmp_path,
        {
            "core/rules.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from sagestack.project.models import ProjectSpec\n",
            "core/names.py": "import typing\nif typing.TYPE_CHECKING:\n    from sagestack.training import models\n",
            "project/models.py": "",
            "training/models.py": "",
        },
    )
    g = graph(package)
    assert upward_imports(g) == [
        "sagestack.core.names -> sagestack.training.models (under TYPE_CHECKING)",
        "sagestack.core.rules -> sagestack.project.models (under TYPE_CHECKING)",
    ]
    assert folder_circles(g, _modules(package)) == []


def test_a_file_pair_is_a_circle_when_one_side_imports_under_type_checking(tmp_path):
    package = _plant(
        tmp_path,
        {
            "constructs/config.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from sagestack.constructs.scaling import AutoScaling\n",
            "constructs/scaling.py": "from sagestack.constructs.config import VARIANT\n",
        },
    )
    assert file_circles(graph(package)) == [
        "sagestack.constructs.config -> sagestack.constructs.scaling (under TYPE_CHECKING)"
        " -> sagestack.constructs.config"
    ]


@pytest.mark.parametrize(
    ("guard", "kind"),
    [
        ("TYPE_CHECKING", TYPE_ONLY),
        ("typing.TYPE_CHECKING", TYPE_ONLY),
        ("not TYPE_CHECKING", ""),
        ("TYPE_CHECKING or DEBUG", ""),
        ("TYPE_CHECKING and DEBUG", ""),
        ("TYPE_CHECKING_LATER", ""),
        ("other.TYPE_CHECKING", ""),
        ("TYPE_CHECKING()", ""),
    ],
)
def test_only_an_exact_type_checking_guard_makes_an_import_type_only(tmp_path, guard, kind):
    package = _plant(
        tmp_path,
        {
            "a.py": f"if {guard}:\n    from sagestack import b\nelse:\n    from sagestack import c\n",
            "b.py": "",
            "c.py": "",
        },
    )
    assert graph(package)["sagestack.a"] == {"sagestack.b": kind, "sagestack.c": ""}


def test_no_private_name_is_imported_from_another_module():
    crossing = []
    modules = _modules()
    for module, path in modules.items():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sagestack"):
                crossing += [
                    f"{module}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not crossing, crossing


@pytest.mark.parametrize("limit", [MAX_FILE_LINES])
def test_no_source_file_is_longer_than_the_limit(limit):
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > limit
    }
    assert not long, f"files over {limit} lines: {long}"


def test_no_function_is_longer_than_the_limit():
    long = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_sagestack_imports_sit_at_the_top_of_the_module_outside_the_cli():
    """An import inside a function hides an arrow of the graph (the graph above still counts it).
    The CLI keeps its imports in the commands, for start-up time (`sagestack --help` loads no
    command's modules); elsewhere an import may wait only for start-up time, and says so on its line
    (`# start-up: <what it loads, what it costs>`), e.g. CDK Pipelines for a project without
    `delivery:`. Third-party heavy modules (torch, boto3) may load late anywhere."""
    hidden = []
    for module, path in _modules().items():
        if _part(module) == "cli":
            continue
        lines = path.read_text().splitlines()
        for fn in ast.walk(_tree(path)):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                hidden += [
                    f"{module}:{node.lineno} {node.module}"
                    for node in ast.walk(fn)
                    if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("sagestack")
                    and "# start-up: " not in lines[(node.end_lineno or node.lineno) - 1]
                ]
    assert not hidden, hidden
