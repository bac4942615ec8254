"""The props tables of the constructs guide are the code's (docs/hooks/props_tables.py): the page as
committed is what the generator writes from the constructs' signatures, so a prop added, removed,
renamed, retyped or given another default fails here until `python docs/hooks/props_tables.py`
rewrites the page; the page keeps only the words the code cannot say."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.conftest import REPO


def _generator() -> ModuleType:
    path = REPO / "docs" / "hooks" / "props_tables.py"
    spec = importlib.util.spec_from_file_location("props_tables", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("props_tables", module)
    spec.loader.exec_module(module)
    return module


def test_the_constructs_guide_s_props_tables_are_the_code_s():
    generator = _generator()
    page = generator.PAGE.read_text()
    assert generator.BLOCK.findall(page), "the page has no generated tables"
    assert generator.with_props_tables(page) == page, (
        "the tables differ from the code: run python docs/hooks/props_tables.py"
    )


class Sample:
    """A construct as the generator reads it."""

    def __init__(
        self, scope: object, id: str, *, names: str, count: int = 1, role: str | None = None
    ) -> None:
        pass


def test_a_table_follows_the_signature_and_keeps_the_page_s_words(monkeypatch):
    generator = _generator()
    monkeypatch.setattr(generator, "_construct", lambda name: Sample)
    page = "\n".join(
        [
            "| prop | type | default |",
            "|---|---|---|",
            "| `names` | `str` | required: the project's |",
            "| `count` | `int` | `2` (how many) |",
            "| `gone` | `str` | none |",
            "| `role` | `iam.IRole` | a new one |",
        ]
    )
    assert generator.props_table("Sample", page).splitlines()[2:] == [
        "| `names` | `str` | required: the project's |",
        "| `count` | `int` | `1` `2` (how many) |",  # the code's default first: the old one stands out
        "| `role` | `str` | a new one |",  # the type is the signature's; `gone` is no prop
    ]
