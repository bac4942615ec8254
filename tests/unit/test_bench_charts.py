"""The guides' benchmark pictures (docs/hooks/bench_charts.py): each run recorded in docs/data/ still
reads back into `local bench --json`'s own model (a change to what `--json` writes fails here until
the run is recorded again), is of the example project as it stands (its endpoint, kind and targets),
and the hook draws it, with the command's chart function, as a PNG that is not blank."""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import sys
from types import ModuleType
from typing import Any

import pytest
from PIL import Image

from sagestack.cli.local_llm import is_llm
from sagestack.local.bench.report import Sweep, targets_of
from sagestack.project import load_project
from tests.conftest import REPO
from tests.support.charts import assert_a_chart

DATA = REPO / "docs" / "data"
ENVIRONMENTS = {"digits": "dev", "chat": "staging"}
SIZES = {"digits": (640, 480), "chat": (1280, 480)}  # one panel; an LLM's two


def _hook() -> ModuleType:
    path = REPO / "docs" / "hooks" / "bench_charts.py"
    spec = importlib.util.spec_from_file_location("bench_charts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_charts", module)
    spec.loader.exec_module(module)
    return module


def _record(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"bench-{name}.json").read_text())


def test_the_guides_record_a_run_of_each_kind_of_endpoint():
    assert sorted(p.name for p in DATA.glob("bench-*.json")) == ["bench-chat.json", "bench-digits.json"]
    assert set(_hook().recorded()) == set(ENVIRONMENTS)


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_a_recorded_run_reads_back_as_the_command_writes_it(name):
    data = _record(name)
    sweep = Sweep.from_json(data)
    assert sweep.to_json() == data  # nothing of what --json wrote is lost or added on the way
    assert sweep.endpoint == name and sweep.environment == ENVIRONMENTS[name]
    loaded = load_project(REPO, sweep.environment)
    assert sweep.llm == is_llm(loaded.spec, name)
    assert sweep.targets == targets_of(loaded.spec.endpoints[name].slo), "the slo changed: record again"
    assert sweep.points and all(p.failed == 0 and p.requests > 0 for p in sweep.points)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.pop("workload"), "missing workload"),
        (lambda d: d.update(verdict="yes"), "unknown verdict"),
        (lambda d: d["points"][0].pop("p95_ms"), "missing p95_ms"),
        (lambda d: d["points"][0].update(p95=1.0), "unknown p95"),
        (lambda d: d["points"][0].update(p95_ms="fast"), "p95_ms is 'fast', not a number"),
        (lambda d: d["points"][0].update(meets=not d["points"][0]["meets"]), "its misses and failures say"),
        (lambda d: d["targets"].update(p90_ms=5), "keys of p95_ms"),
    ],
)
def test_a_record_in_another_format_is_refused(change, said):
    data = copy.deepcopy(_record("digits"))
    change(data)
    with pytest.raises(ValueError, match=said):
        Sweep.from_json(data)


def test_the_build_names_a_record_it_cannot_read(tmp_path, monkeypatch):
    from mkdocs.exceptions import PluginError

    hook = _hook()
    data = _record("digits")
    del data["points"][0]["clients"]
    (tmp_path / "bench-digits.json").write_text(json.dumps(data))
    monkeypatch.setattr(hook, "DATA", tmp_path)
    monkeypatch.setattr(hook, "REPO", tmp_path.parent)
    with pytest.raises(PluginError, match=r"bench-digits\.json: a point does not read .* missing clients"):
        hook.recorded()


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_hook_draws_the_recorded_run_with_the_command_s_chart(name):
    hook = _hook()
    png = hook.chart_png(hook.recorded()[name])
    assert_a_chart(io.BytesIO(png), SIZES[name])  # its size, lines on the page, the target in red


def test_a_blank_picture_is_not_a_chart():
    blank = io.BytesIO()
    Image.new("RGB", SIZES["digits"], "white").save(blank, format="PNG")
    with pytest.raises(AssertionError):
        assert_a_chart(blank, SIZES["digits"])
    one_red_dot = Image.new("RGB", SIZES["digits"], "white")
    one_red_dot.putpixel((1, 1), (255, 0, 0))
    dotted = io.BytesIO()
    one_red_dot.save(dotted, format="PNG")
    with pytest.raises(AssertionError):
        assert_a_chart(dotted, SIZES["digits"])


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_guides_print_the_recorded_run_as_the_command_does(name):
    hook = _hook()
    sweep = hook.recorded()[name]
    page = hook.with_bench_screens(f"before\n\n<!-- bench: {name} -->\n\nafter\n")
    assert page.startswith("before\n\n```text\n") and page.endswith("\n```\n\nafter\n")
    lines = page.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    text = " ".join(page.split())
    assert f"{name}: {' '.join(sweep.workload.split())}" in text
    assert f"chart: {sweep.chart}" in text
    for point in sweep.points:
        assert f"{point.requests_per_second:.1f}" in text
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match=r"no docs/data/bench-nothing\.json"):
        hook.with_bench_screens("<!-- bench: nothing -->\n")
