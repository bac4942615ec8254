"""sagestack.constructs exports its names lazily (PEP 562): each public name is in `__all__`, in the
table that loads it on first use, and among the imports type checkers read — the same names in all
three, and each loads from where the table says."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import sagestack.constructs as constructs

INIT = Path(constructs.__file__)


def _type_checking_imports() -> set[str]:
    """The names the `if TYPE_CHECKING:` block imports (what mypy and an editor see)."""
    tree = ast.parse(INIT.read_text())
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    return {
        alias.asname or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_every_lazily_exported_name_is_in_all_and_every_name_in_all_is_exported():
    lazy = set(constructs._WHERE)
    assert sorted(lazy - set(constructs.__all__)) == [], "exported lazily but missing from __all__"
    assert sorted(set(constructs.__all__) - lazy) == [], "in __all__ but not exported"
    assert len(constructs.__all__) == len(set(constructs.__all__))
    assert _type_checking_imports() == lazy, "the TYPE_CHECKING imports differ from the exports"


def test_each_exported_name_loads_from_its_module():
    for name, module in constructs._WHERE.items():
        assert getattr(importlib.import_module(module), name) is getattr(constructs, name), name
