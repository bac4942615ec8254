"""The spec loader cannot be knocked over: whatever a spec file holds, loading it succeeds or
raises SpecError with a location (the CLI's exit 2) — never another exception, never unbounded
memory. Hostile files (alias bombs, huge, binary, not UTF-8, deeply nested) each have a test, and
hypothesis throws bytes, text, mutated real specs and random structures at the loader."""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import datetime
import functools
import io
import random
import re
import shutil
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from typer.testing import CliRunner

from sagestack.cli import app
from sagestack.core.errors import SpecError
from sagestack.core.yamldoc import MAX_DEPTH, MAX_NODES, MAX_SPEC_BYTES
from sagestack.project import load_project
from tests.conftest import REPO

EXAMPLE = (REPO / "config" / "sagestack.yaml").read_text()
DEV = (REPO / "config" / "envs" / "dev.yaml").read_text()
STATS = {"examples": 0, "loaded": 0, "spec_errors": 0}


def _root(project: bytes | str, overlay: bytes | str | None = None) -> Path:
    root = Path(tempfile.mkdtemp(prefix="fuzz-"))
    (root / "config" / "envs").mkdir(parents=True)
    (root / "training_src").mkdir()
    (root / "training_src" / "train.py").write_text("print('train')\n")
    shutil.copytree(REPO / "containers", root / "containers")  # the example's dockerfile: image
    target = root / "config" / "sagestack.yaml"
    target.write_bytes(project.encode() if isinstance(project, str) else project)
    if overlay is not None:
        env = root / "config" / "envs" / "dev.yaml"
        env.write_bytes(overlay.encode() if isinstance(overlay, str) else overlay)
    return root


def _load_never_crashes(project: bytes | str, overlay: bytes | str | None = None) -> None:
    root = _root(project, overlay)
    STATS["examples"] += 1
    try:
        load_project(root, "dev" if overlay is not None else None)
        STATS["loaded"] += 1
    except SpecError as e:
        STATS["spec_errors"] += 1
        assert e.issues and all(i.location is not None for i in e.issues if i.severity == "error"), e.report()
    finally:
        shutil.rmtree(root, ignore_errors=True)


BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    ]
)
HOSTILE = {
    "alias bomb": (BOMB, f"expands to more than {MAX_NODES} values"),
    "huge file": ("project: x\n" + "# padding\n" * (MAX_SPEC_BYTES // 10 + 1), "a spec is at most 1 MiB"),
    "binary": (b"project: digits\n\x00\x01\x02", "binary file"),
    "not utf-8": (b"project: caf\xe9\n", "not UTF-8 (byte 0xe9)"),
    "deep flow nesting": ("a: " + "[" * 5000 + "]" * 5000, f"nested more than {MAX_DEPTH} levels deep"),
    "deep block nesting": (
        "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 5) + "v\n",
        f"nested more than {MAX_DEPTH} levels deep",
    ),
    # ruamel's merge costs the square of the mappings merging one anchor: 4,000 took 51 s
    "merge-key flood": (
        "x: &a {k: 1}\nl:\n" + "  - {<<: *a}\n" * 1001 + "t: 2024-01-01\n",
        "more than 1000 merge keys (<<:)",
    ),
    "control character": ("project: digits\x07\n", "a control character (U+0007) is not allowed"),
    "impossible date": ("project: digits\nregion: 2024-13-45\n", "'2024-13-45' cannot be read as timestamp"),
    "value its tag refuses": ("project: !!int digits\n", "'digits' cannot be read as int"),
    "mapping as a key": ("? {a: {b: c}}\n: 1\n", "a mapping or list used as a key"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_spec_errors_with_a_location(case: str) -> None:
    text, expected = HOSTILE[case]
    root = _root(text)
    with pytest.raises(SpecError) as info:
        load_project(root)
    (issue,) = info.value.issues
    assert expected in issue.message
    assert issue.location is not None and issue.location.file == "config/sagestack.yaml"


@pytest.mark.parametrize("case", ["alias bomb", "binary", "not utf-8"])
@pytest.mark.parametrize(
    "command", [["validate"], ["plan", "--env", "dev", "--quotas", "off"], ["lock", "--env", "dev"]]
)
def test_every_command_that_loads_a_spec_exits_2_with_the_location(case: str, command: list[str]) -> None:
    root = _root(HOSTILE[case][0], "{}\n")
    result = CliRunner().invoke(app, [*command, "--root", str(root)])
    assert result.exit_code == 2, result.output
    assert "config/sagestack.yaml:" in result.output and HOSTILE[case][1] in result.output
    assert "Traceback" not in result.output


def test_an_overlay_is_held_to_the_same_bounds() -> None:
    root = _root(EXAMPLE, BOMB)
    with pytest.raises(SpecError) as info:
        load_project(root, "dev")
    assert info.value.issues[0].location.file == "config/envs/dev.yaml"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_bytes(data: bytes) -> None:
    _load_never_crashes(data)


@FUZZ
@given(st.text(max_size=400))
def test_fuzz_text(text: str) -> None:
    _load_never_crashes(text, text)


def _mutate(text: str, seed: int, edits: int) -> str:
    rnd = random.Random(seed)
    chars = list(text)
    for _ in range(edits):
        i = rnd.randrange(len(chars) + 1)
        op = rnd.choice(["delete", "insert", "duplicate", "swap"])
        if op == "delete" and chars:
            del chars[i : i + rnd.randint(1, 20)]
        elif op == "insert":
            chars[i:i] = rnd.choice(
                [
                    "&a ",
                    "*a",
                    ": ",
                    "- ",
                    "\n  ",
                    "{",
                    "[",
                    "]",
                    "}",
                    "!!str ",
                    "~",
                    "'",
                    '"',
                    "0x1f",
                    "-1",
                    "1e999",
                    "\t",
                    "?",
                ]
            )
        elif op == "duplicate" and chars:
            j = rnd.randrange(len(chars))
            chars[i:i] = chars[j : j + rnd.randint(1, 80)]
        elif op == "swap" and len(chars) > 2:
            j = rnd.randrange(len(chars))
            chars[i % len(chars)], chars[j] = chars[j], chars[i % len(chars)]
    return "".join(chars)


@FUZZ
@given(st.integers(0, 2**32), st.integers(1, 12))
def test_fuzz_mutated_example_spec(seed: int, edits: int) -> None:
    _load_never_crashes(_mutate(EXAMPLE, seed, edits), _mutate(DEV, seed + 1, max(1, edits // 3)))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["ml.g5.xlarge", "4h", "-1", "train"]),
)
trees = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
SECTIONS = [
    "project",
    "region",
    "images",
    "jobs",
    "tuning",
    "endpoints",
    "tags",
    "retain_data",
    "pipeline",
    "account",
]


@FUZZ
@given(
    st.dictionaries(st.sampled_from(SECTIONS), trees, max_size=6),
    st.sampled_from(["jobs", "tuning", "endpoints", "images"]),
    trees,
)
def test_fuzz_structures_in_the_specs_sections(top: dict, section: str, entry) -> None:
    spec = YAML(typ="safe").load(EXAMPLE)
    spec.update(top)
    if isinstance(spec.get(section), dict) and spec[section]:
        first = next(iter(spec[section]))
        spec[section][first] = entry
    buf = io.StringIO()
    YAML(typ="safe").dump(spec, buf)
    _load_never_crashes(buf.getvalue())


def test_fuzz_figures() -> None:
    """The counts of the fuzzing above, printed for the record (run with -s)."""
    print(f"spec fuzzing: {STATS}")
    assert STATS["examples"] == 0 or STATS["examples"] == STATS["loaded"] + STATS["spec_errors"]


# ---------------------------------------------------------------- deep nesting is refused early


def test_deep_nesting_is_refused_where_it_passes_the_limit() -> None:
    """The 65th bracket of `a: [[[…` is the first node deeper than the limit: the error points at it."""
    root = _root("a: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(SpecError) as info:
        load_project(root)
    assert [i.format() for i in info.value.issues] == [
        f"config/sagestack.yaml:1:{3 + MAX_DEPTH + 1}: (top level): nested more than {MAX_DEPTH} levels deep"
    ]


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_refusing_deep_nesting_costs_the_same_however_deep_it_goes(opening: str) -> None:
    """A 5,000-deep `[[[…` took 4 s to refuse (the reader looked ahead across every bracket for a
    possible key, per bracket): the parser must stop at the limit, whatever lies beyond it."""
    from tests.unit.test_spec_loading import python_lines

    def refuse(depth: int) -> None:
        root = _root("a:\n  " + opening * depth + "x\n")
        with pytest.raises(SpecError, match=f"nested more than {MAX_DEPTH} levels deep"):
            load_project(root)

    shallow, deep = python_lines(lambda: refuse(500)), python_lines(lambda: refuse(2000))
    assert deep < 1.1 * shallow, f"4x the depth cost {deep / shallow:.1f}x the work"


def test_validate_parses_each_file_once_however_many_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate` parsed a file that fails to parse once per environment (12.8 s for three)."""
    from sagestack.core import yamldoc

    parsed: list[str] = []
    original = yamldoc._parse

    def counted(*args: object) -> object:
        parsed.append(str(args[-1]))
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(yamldoc, "_parse", counted)
    root = _root("a: " + "[" * 100 + "]" * 100, "{}\n")
    for env in ("prod", "staging"):
        (root / "config" / "envs" / f"{env}.yaml").write_text("{}\n")
    result = CliRunner().invoke(app, ["validate", "--root", str(root)])
    # one error of the project file, found by the three environments, reported once naming them
    assert result.exit_code == 2 and result.output.count("nested more than") == 1, result.output
    assert "(in dev, prod, staging)" in result.output
    assert sorted(parsed) == ["config/sagestack.yaml"]


# ---------------------------------------------------------------- structural mutations, through the CLI
# Every key and item of every section of the example and of the broad project (project file and
# overlays), replaced by a value of each kind, deleted, duplicated or renamed to a near miss, then
# `sagestack validate` run in-process through the console entry point: exit 0, or exit 2 with
# every issue located — never 1 (an internal error). CI runs a seeded sample; the whole set runs
# with `python -m tests.unit.test_spec_fuzz [--cases N]`.

PROJECTS = {"example": REPO, "broad": REPO / "tests" / "constructs" / "baseline" / "broad"}
REPLACEMENTS: dict[str, object] = {
    "string": "fuzz",
    "integer": 7,
    "negative integer": -1,
    "huge integer": 10**30,
    "float": 2.5,
    "boolean": True,
    "date": datetime.date(2024, 1, 1),
    "null": None,
    "list": [1, "two"],
    "mapping": {"fuzz": 1},
    "deep nest": functools.reduce(lambda inner, _: [inner], range(80), "x"),
    "huge string": "x" * 300_000,
}
KEY_OPERATIONS = ("delete", "duplicate", "near miss")


@dataclasses.dataclass(frozen=True)
class Mutation:
    project: str
    file: str
    path: tuple[str | int, ...]
    operation: str

    def __str__(self) -> str:
        return f"{self.project}:{self.file}:{'.'.join(map(str, self.path))}:{self.operation}"


def _rt() -> YAML:
    yaml = YAML(typ="rt")
    yaml.width = 10**9  # a huge string stays on one line
    return yaml


def _paths(node: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    out = []
    for k, v in children:
        out += [(*path, k), *_paths(v, (*path, k))]
    return out


def mutations() -> list[Mutation]:
    out = []
    for project, source in PROJECTS.items():
        for file in [
            "config/sagestack.yaml",
            *sorted(f"config/envs/{p.name}" for p in (source / "config" / "envs").glob("*.yaml")),
        ]:
            for path in _paths(_rt().load((source / file).read_text())):
                ops = [*REPLACEMENTS, *(KEY_OPERATIONS if isinstance(path[-1], str) else ("delete",))]
                out += [Mutation(project, file, path, op) for op in ops]
    return out


def _near_miss(name: str) -> str:
    return name[: len(name) // 2] + name[len(name) // 2 + 1 :] if len(name) > 3 else name + "x"


def mutated(text: str, path: tuple[str | int, ...], operation: str) -> str:
    """`text` (a YAML file) with `operation` applied at `path`, the rest kept as written."""
    yaml = _rt()
    doc = yaml.load(text)
    parent = functools.reduce(lambda node, part: node[part], path[:-1], doc)
    last = path[-1]
    if operation == "duplicate":  # YAML a mapping cannot hold: spliced into the text
        line, column = parent.lc.key(last)
        lines = text.splitlines(keepends=True)
        if parent.fa.flow_style():
            lines[line] = lines[line][:column] + f"{last}: null, " + lines[line][column:]
        else:
            lines.insert(line, lines[line])
        return "".join(lines)
    if operation == "delete":
        del parent[last]
    elif operation == "near miss":
        position = list(parent).index(last)
        parent.insert(position, _near_miss(str(last)), parent.pop(last))
    else:
        parent[last] = copy.deepcopy(REPLACEMENTS[operation])
    buffer = io.StringIO()
    yaml.dump(doc, buffer)
    return buffer.getvalue()


_ROOTS: dict[str, Path] = {}


def _project_root(project: str) -> Path:
    if project not in _ROOTS:
        root = Path(tempfile.mkdtemp(prefix=f"fuzz-{project}-"))
        for part in ("config", "training_src", "containers"):
            if (PROJECTS[project] / part).exists():
                shutil.copytree(PROJECTS[project] / part, root / part)
        _ROOTS[project] = root
    return _ROOTS[project]


# validate's report: each issue once (`file:line:col: error: …`, an excerpt of its line under it),
# then one verdict per environment (✓ with its counts on the next line, or ✗ with its errors).
LOCATED = re.compile(r"^(config/\S+:\d+:\d+: (error|warning): |\s*\d* \|( .*)?$)")
HEADLINE = re.compile(r"^(✗ [^:]+: \d+ errors?|✓ \S+: .*|    \d+ \w+.*)$")


def validate_mutation(mutation: Mutation) -> tuple[int, list[str]]:
    """Exit code of `sagestack validate` on the mutated project, and what is wrong with its output."""
    from sagestack.cli import main

    root = _project_root(mutation.project)
    target = root / mutation.file
    original = (PROJECTS[mutation.project] / mutation.file).read_text()
    target.write_text(mutated(original, mutation.path, mutation.operation))
    out, err = io.StringIO(), io.StringIO()
    argv = ["sagestack", "validate", "--root", str(root)]
    try:
        with mock.patch.object(sys, "argv", argv), redirect_stdout(out), redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
    finally:
        target.write_text(original)
    lines = (out.getvalue() + err.getvalue()).splitlines()
    wrong = [line for line in lines if not (LOCATED.match(line) or HEADLINE.match(line))]
    if code not in (0, 2):
        wrong.insert(0, f"exit {code}")
    return code, wrong


CI_SAMPLE = random.Random(26).sample(mutations(), 30)


@pytest.mark.parametrize("mutation", CI_SAMPLE, ids=str)
def test_a_structural_mutation_is_valid_or_a_located_error_through_the_cli(mutation: Mutation) -> None:
    code, wrong = validate_mutation(mutation)
    assert code in (0, 2) and not wrong, f"{mutation}: {wrong[:5]}"


def test_the_mutations_reach_every_section_of_both_projects() -> None:
    reached = {(m.project, m.file, m.path[0]) for m in mutations()}
    for project, source in PROJECTS.items():
        sections = _rt().load((source / "config" / "sagestack.yaml").read_text())
        assert {(project, "config/sagestack.yaml", s) for s in sections} <= reached
    assert len(mutations()) >= 1000


def main(argv: list[str]) -> int:
    """Run N mutations (a seeded sample; all without --cases) and print the tally."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--cases", type=int, default=0)
    parser.add_argument("--seed", type=int, default=26)
    args = parser.parse_args(argv)
    every = mutations()
    chosen = random.Random(args.seed).sample(every, args.cases) if args.cases else every
    tally: collections.Counter[str] = collections.Counter()
    for mutation in chosen:
        code, wrong = validate_mutation(mutation)
        tally[f"exit {code}"] += 1
        if wrong:
            tally["internal or unlocated"] += 1
            print(f"{mutation}: {wrong[:3]}", flush=True)
    print(f"{len(chosen)} of {len(every)} mutations: {dict(sorted(tally.items()))}")
    return 1 if tally["internal or unlocated"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# ---------------------------------------------------------------- the fast reader is ruamel's reading


def _typed(value: object) -> object:
    """`value` with every scalar's type spelled out (True == 1 and 1 == 1.0 in Python)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


SCALARS = [
    "1_000",
    "0x1F",
    "0o17",
    "017",
    "+1",
    "-0",
    ".5",
    "1.",
    "1e3",
    "1E+3",
    ".inf",
    ".nan",
    "True",
    "TRUE",
    "yes",
    "on",
    "~",
    "null",
    "Null",
    "2024-01-01",
    "=",
    "12345678901234567890",
    "1e400",
    "00",
    "x#y",
]
TRICKY = [
    *(f"a: {v}" for v in SCALARS),
    "<<: {a: 1}",
    "b: &x 1\nc: *x",
    # merge keys (issue 37): own keys first and kept, merged keys located in their anchor
    "a: &a {k: 1, j: 2}\nb: {j: 5, <<: *a}\n",
    "a: &a {k: 1}\nb: &b {k: 2, m: 3}\nc: {<<: [*a, *b], z: 1}\n",
    "a: &a {k: 1}\nb: &b {<<: *a, m: 3}\nc:\n  <<: [*b, *a]\n  z: 1\n",
    "a: &a {k: {x: [1, {y: 2}]}}\nb:\n  <<: *a\n  own: 1\nc: [*a, *a]\n",
    "a: &a [1, &b {q: 1}]\nc: *b\nd: {<<: *b}",
    "a: &a {k: 1}\nb: [&c {<<: *a, z: 2}, *c]\n",
    "a: &a {k: 1}\n<<: *a\n",
    "a: &a {k: 1}\nc: {<<: *a, <<: *a}",
    "a: &a [1]\nc: {<<: *a}",
    "a: &a {k: 1}\nc: {<<: [*a, 1]}",
    "a: &a {k: 1}\nb: &a [*a]\n",
    "a: &a {k: 1}\nb: {'<<': *a}\n",
    "? [a]\n: 1",
    "1: a",
    "true: a",
    "~: a",
    "a: !!str 1",
    "a: !foo bar",
    "%YAML 1.2\n---\na: 1",
    "a: 1\n---\nb: 2",
    "- - - x",
    "a:\n- 1\n- 2",
    "a:\n  - 1\n  -\n  - 3",
    "a: |\n  x\n  y\n",
    "a: >\n  x\n  y\n\n  z\n",
    "a: |2-\n   x\n",
    "a: 'it''s'",
    'a: "t\\tab\\u00e9"',
    "a: x\n  y\n  z",
    "a: é\nb: [é, ü]\n  # c\n",
    "a: 1\r\nb: 2\r\n",
    "a: 1\rb: 2",
    "a:\tb",
    "a: b\t# c",
    "{a: 1, b: [2, 3]}",
    "[1, 2]",
    "x",
    "",
    "# only\n",
    "---\n",
    "a: {b: {c: {d: [1, {e: f}]}}}",
    "a: [1,\n  2]",
    "a: 'multi\n  line'",
    "a: b: c",
    "a: [",
    "a: 1\na: 2",
    "'a': 1\n\"a\": 2",
    "a:\n  b: 1\n c: 2",
    "a: [a, b, ]",
    "a: {a, b}",
    "a: {a: }",
    "a: [? b : c]",
    "key with spaces: v",
    "a\u2028b: 1",
    "a: \x85",
]


def _readings_agree(text: str) -> bool:
    """Both readers give the same document, or ruamel refuses the text and the fast one does not
    read it; True when the fast reader read it."""
    from sagestack.core.yamldoc import read_with_ruamel
    from sagestack.core.yamlevents import read_events

    fast = read_events(text, "f.yaml", MAX_DEPTH, MAX_NODES)
    try:
        reference = read_with_ruamel(text, "f.yaml")
    except SpecError:
        assert fast is None, f"the fast reader accepts what ruamel refuses: {text[:200]!r}"
        return False
    if fast is None:
        return False
    data = {} if fast[0] is None else fast[0]
    assert _typed(data) == _typed(reference.data), text[:200]
    assert (fast[1], fast[2]) == (reference.keys, reference.values), text[:200]
    return True


def test_the_fast_reader_reads_what_ruamel_reads() -> None:
    """libyaml's events make the fast reading (a 1 MiB spec in well under a second, bench/load.py);
    ruamel stays the reference: on every text here, the same values, types and locations, or the
    text goes to ruamel. The project's own files must take the fast way."""
    own = [REPO / "config" / "sagestack.yaml", *sorted((REPO / "config" / "envs").glob("*.yaml"))]
    own += [p for p in (PROJECTS["broad"] / "config").rglob("*.yaml")]
    assert all(_readings_agree(p.read_text()) for p in own)
    guides = "".join(page.read_text() for page in sorted((REPO / "docs" / "guide").glob("*.md")))
    texts = [*re.findall(r"```yaml[^\n]*\n(.*?)```", guides, re.S), *TRICKY]
    texts += [_mutate(EXAMPLE, seed, 1 + seed % 12) for seed in range(150)]
    texts += [mutated((PROJECTS[m.project] / m.file).read_text(), m.path, m.operation) for m in CI_SAMPLE]
    fast = sum(_readings_agree(text) for text in texts)
    assert fast > len(texts) // 4  # the check compared readings, not only refusals
