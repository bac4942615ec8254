"""local/ is five rooms: training, drivers, serving, llm, and bench. A room imports only itself, the
few shared modules at local/'s top level, and the rooms it is built on: training starts its
drivers-contract hosts in the drivers room's sandbox (and takes Open MPI's rank variables from its
mpirun), llm serves through the serving room's ASGI server and local S3 paths, and bench measures
the serving and llm rooms' servers (on a port training's launcher picks the same way). Nothing else
crosses, so the rooms form no circle and each can be read, and judged, by itself."""

from __future__ import annotations

import ast
from pathlib import Path

import sagestack

LOCAL = Path(sagestack.__file__).parent / "local"

ROOMS = ("training", "drivers", "serving", "llm", "bench")
# what local/ keeps at its top level: each shared by at least two rooms (sagestack/local/__init__.py)
SHARED = {"guard", "private", "errors", "pasteable"}
# the rooms a room is built on, besides itself and SHARED
USES = {
    "training": {"drivers"},
    "drivers": set(),
    "serving": set(),
    "llm": {"serving"},
    "bench": {"serving", "llm", "training"},
}


def graph() -> dict[str, set[str]]:
    """Each module under sagestack.local -> the sagestack.local modules it imports (every import,
    at module level or in a function, under `if TYPE_CHECKING:` too)."""
    paths = {
        ".".join(("sagestack", *p.relative_to(LOCAL.parent).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): p
        for p in LOCAL.rglob("*.py")
    }
    out: dict[str, set[str]] = {}
    for module, path in paths.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                deps.update(
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in paths else node.module
                    for a in node.names
                )
        out[module] = {d for d in deps if d in paths and d != module}
    return out


def _place(module: str) -> str | None:
    """The room (or `shared`) of a module under sagestack.local; None outside local/."""
    parts = module.split(".")
    if parts[:2] != ["sagestack", "local"]:
        return None
    if len(parts) == 2:
        return "shared"  # the package itself
    if parts[2] in ROOMS:
        return parts[2]
    assert parts[2] in SHARED, (
        f"{module}: a module at local/'s top level must be shared (SHARED) or in a room"
    )
    return "shared"


def crossings(g: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in g.items():
        room = _place(module)
        if room is None:
            continue
        for dep in sorted(deps):
            target = _place(dep)
            if target is None or target == room:
                continue
            if room == "shared" and target != "shared":
                out.append(f"{module} -> {dep} (a shared module imports no room)")
            elif room != "shared" and target != "shared" and target not in USES[room]:
                out.append(f"{module} -> {dep} ({room} may import {sorted(USES[room]) or 'no other room'})")
    return out


def test_every_module_of_local_is_in_a_room_or_shared():
    for module in graph():
        _place(module)


def test_the_rooms_of_local_import_only_what_they_are_built_on():
    assert not crossings(graph()), "\n".join(crossings(graph()))


def test_the_rooms_form_no_circle():
    def reaches(room: str, seen: frozenset[str]) -> bool:
        return any(r in seen or reaches(r, seen | {r}) for r in USES[room])

    assert not any(reaches(r, frozenset({r})) for r in ROOMS)


def test_a_shared_module_is_used_by_two_rooms():
    g = graph()
    for name in SHARED:
        users = {_place(m) for m, deps in g.items() if f"sagestack.local.{name}" in deps} - {None, "shared"}
        assert len(users) >= 2, f"local/{name}.py is used by {sorted(users)}: move it into that room"


def test_the_judge_finds_a_crossing():
    """The check can fail: serving importing training, and a shared module importing a room."""
    planted = {
        "sagestack.local.serving.serve": {"sagestack.local.training.job", "sagestack.local.private"},
        "sagestack.local.private": {"sagestack.local.llm.server"},
        "sagestack.local.llm.server": {"sagestack.local.serving.asgi"},
    }
    assert crossings(planted) == [
        "sagestack.local.serving.serve -> sagestack.local.training.job (serving may import no other room)",
        "sagestack.local.private -> sagestack.local.llm.server (a shared module imports no room)",
    ]
