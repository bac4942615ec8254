"""Every command's screens at 80 columns, with no word cut in two: each command of the typer app
(the `local` group's included) shows its --help, a success and a typical error (a bad spec, no AWS
credentials) in a pipe with COLUMNS=80 and in a real 80-column tmux pane, and a line the program
or the terminal broke between two letters or digits of one word fails the test.

A command the app gains without a row in SCREENS fails the test too. To cover one, add a row:

    "deploy": (Screen("deploy --env dev", exit=1), Screen("deploy --env nosuch", exit=2)),

`args` is the command line after `sagestack`, run in `project` ("example": a copy of the
repository's spec; "demo": the init skeleton; "broken": the example with a bad spec; "none": an
empty folder), with no AWS credentials at all unless `aws="moto"` (the test's moto server); `exit`
is the exit status it must end with. A row needs a screen that exits 0 and one that does not,
unless it says in `success_elsewhere` why it cannot show one here (it needs a deployed stack, or
minutes). `heavy=True`: a run of seconds of CPU (a local training), or one that needs what such
a run left, shown in tmux only."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagestack.cli import app, main
from sagestack.cli.conventions import walk
from tests.conftest import REPO
from tests.support.moto_server import free_port, running_moto

WIDTH = 80


@dataclass(frozen=True)
class Screen:
    args: str
    exit: int = 0
    project: str = "example"
    aws: str = "none"
    heavy: bool = False


@dataclass(frozen=True)
class Row:
    screens: tuple[Screen, ...]
    success_elsewhere: str = ""


def row(*screens: Screen, success_elsewhere: str = "") -> Row:
    return Row(screens, success_elsewhere)


MOTO = "moto"
NEEDS_A_DEPLOY = "its success needs deployed stacks (tests/unit/test_day2.py, test_status.py)"

# The command (its path) -> its screens besides --help. {tmp}: the folder of the projects.
SCREENS: dict[str, Row] = {
    "init": row(
        Screen("init fresh --dir {tmp}/fresh", project="none"),
        Screen("init Bad_Name", exit=2, project="none"),
    ),
    "validate": row(Screen("validate"), Screen("validate", exit=2, project="broken")),
    "schema": row(Screen("schema --output schema-out"), Screen("schema --check", exit=1, project="none")),
    "rules": row(
        Screen("rules"),
        Screen("rules --explain endpoint-capacity"),
        Screen("rules --explain prod-retains-data"),
        Screen("rules --explain no-such-rule", exit=2),
    ),
    "plan": row(Screen("plan --env dev"), Screen("plan --env dev", exit=2, project="broken")),
    "render": row(
        Screen("render digits --env dev"),
        Screen("render no-such --env dev", exit=2),
    ),
    "lock": row(Screen("lock --env dev"), Screen("lock --env dev", exit=2, project="broken")),
    "synth": row(
        Screen("synth", exit=2, project="broken"),
        success_elsewhere="jsii and a full synth take a minute of CPU (tests/synth)",
    ),
    "deploy": row(
        Screen("deploy --env dev", exit=2),  # the example copy has no app.py
        success_elsewhere="a deploy synthesizes with jsii and needs an account (tests/unit/test_deploy_commands.py)",
    ),
    "diff": row(
        Screen("diff --env dev", exit=2),
        success_elsewhere="a diff synthesizes with jsii (tests/unit/test_deploy_commands.py)",
    ),
    "destroy": row(
        Screen("destroy --env dev", exit=2),
        success_elsewhere=NEEDS_A_DEPLOY + " (tests/unit/test_deploy_commands.py)",
    ),
    "recommend": row(
        Screen("recommend digits --env dev", exit=1),
        Screen("recommend nope --env dev", exit=2),
        success_elsewhere="moto lacks Inference Recommender: answered in the test's process "
        "(tests/pipeline/test_recommendation_moto.py)",
    ),
    "cost": row(
        Screen("cost --env dev", exit=1),
        success_elsewhere="moto's Cost Explorer answers in this process only (tests/unit/test_cost.py)",
    ),
    "run": row(Screen("run classifier --env dev --no-wait", exit=1), success_elsewhere=NEEDS_A_DEPLOY),
    "promote": row(
        Screen("promote digits --from dev --to staging", exit=1), success_elsewhere=NEEDS_A_DEPLOY
    ),
    "lineage": row(Screen("lineage digits --env dev", exit=1), success_elsewhere=NEEDS_A_DEPLOY),
    "check": row(
        Screen("check --env dev", exit=1),
        Screen("check --env dev", exit=1, aws=MOTO),  # every line but the quotas' ready
        success_elsewhere="moto has no Service Quotas API (tests/unit/test_quotas_and_lock.py)",
    ),
    "status": row(Screen("status --env dev", exit=1), Screen("status --env dev", aws=MOTO)),
    "logs": row(
        Screen("logs classifier --env dev", exit=1, aws=MOTO),
        success_elsewhere=NEEDS_A_DEPLOY,
    ),
    "stop": row(Screen("stop classifier --env dev", exit=1), Screen("stop classifier --env dev", aws=MOTO)),
    "cluster submit": row(
        Screen("cluster submit classifier --cluster train --env dev", exit=2),
        success_elsewhere="the example defines no cluster (tests/unit/test_cluster_rules.py)",
    ),
    "quota snapshot": row(
        Screen("quota snapshot --env dev", exit=1),
        success_elsewhere="moto has no Service Quotas API (tests/unit/test_quotas_and_lock.py)",
    ),
    "capacity offerings": row(
        Screen("capacity offerings no-such --env dev", exit=2),
        Screen("capacity offerings classifier --env dev", aws=MOTO),
    ),
    "local train": row(
        Screen("local train train --set epochs=1", project="demo", heavy=True),
        Screen("local train no-such", exit=2, project="demo"),
    ),
    "local compile": row(
        Screen("local compile digits", exit=1),  # the example's classifier is not trained
        Screen("local compile digits", project="demo", heavy=True),
    ),
    "local serve": row(
        Screen("local serve digits --predict 3 --capture --port {port}", project="demo", heavy=True),
        # the server's own screen, up to the Ctrl-C that ends it
        Screen("local serve digits --port {port}", exit=124, project="demo", heavy=True),
        Screen("local serve no-such", exit=2, project="demo"),
    ),
    "local tune": row(
        Screen("local tune no-such", exit=2),
        success_elsewhere="a trial trains the example's classifier: 20 s of CPU (tests/training_src/test_local_tune.py)",
    ),
    "local bench": row(
        Screen("local bench no-such", exit=2),
        success_elsewhere="a sweep serves the model many times (tests/training_src/test_local_bench.py)",
    ),
    "local transform": row(
        Screen("local transform score --sample 3", exit=1),
        success_elsewhere="it needs the example's classifier trained (tests/training_src)",
    ),
    "local monitor": row(
        Screen("local monitor digits", exit=1, project="demo"),  # before a baseline
        Screen(
            "local monitor digits --sample-baseline 20", project="demo", heavy=True
        ),  # serve --capture kept
    ),
}

# Errors at once, one with a source excerpt under it wider than the screen, a word at column 80.
BROKEN = (
    "    instance_type: [ml.g5.2xlarge, ml.g4dn.2xlarge]   # candidates, in order of preference\n",
    "    instance_type: [ml.g5.2xlarge, ml.no-such-type.2xlarge]     # candidates, in order of preference\n",
)


def commands() -> list[str]:
    return [" ".join(path) for path, info in walk(app) if not hasattr(info, "typer_instance")]


def test_every_command_has_its_screens():
    missing = [c for c in commands() if c not in SCREENS]
    assert not missing, f"commands without a row in SCREENS (see the module's docstring): {missing}"
    stale = sorted(set(SCREENS) - set(commands()))
    assert not stale, f"rows of SCREENS naming no command: {stale}"
    for name, entry in SCREENS.items():
        codes = {s.exit for s in entry.screens}
        assert entry.success_elsewhere or 0 in codes, f"{name}: no screen that succeeds"
        assert codes - {0}, f"{name}: no error screen"


# ---------------------------------------------------------------- what a cut word is


def cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _word(a: str, b: str) -> bool:
    """A break between `a` and `b` falls inside a word ("POS / T", "worker( / s)", a path)."""
    return not (a.isspace() or b.isspace()) and (a.isalnum() or b.isalnum())


def cut_words(lines: list[str], joined: bool) -> list[str]:
    """Where a word was cut in two. `joined`: the lines as tmux's -J gives them, each a line the
    program printed, longer than WIDTH where the terminal wrapped it: a wrap between two letters
    or digits cuts a word. Either way, a line the program itself filled to the last column that
    ends in a letter and goes on with one on the next line, flush left or under its own indent,
    was folded mid-word by the program (rich folds a word too long for the width)."""
    found = []
    for i, line in enumerate(lines):
        if joined and cells(line) > WIDTH:
            column, at = 0, []
            for j, c in enumerate(line):
                column += cells(c)
                if column % WIDTH == 0 and j + 1 < len(line):
                    at.append(j)
            for j in at:
                if _word(line[j], line[j + 1]):
                    found.append(f"{line[max(0, j - 30) : j + 1]} / {line[j + 1 : j + 30]}")
        elif cells(line) == WIDTH and " " not in line.strip() and i + 1 < len(lines):
            nxt = lines[i + 1].lstrip(" ")
            if nxt and _word(line[-1], nxt[0]):
                found.append(f"{line[-30:]} / {nxt[:30]}")
    return found


def test_the_detector_finds_a_cut_and_passes_whole_words():
    cut = "x" * 68 + " artifact (F" + "oundationStack) rest"
    assert cut_words([cut], joined=True) == ["x" * 19 + " artifact (F / oundationStack) rest"]
    whole = "x" * 68 + " artifact a " + "(FoundationStack) rest"
    assert cut_words([whole], joined=True) == []
    folded = ["  /tmp/" + "y" * 61 + "/tune-lr-sea", "rch/objective.png"]
    assert cut_words(folded, joined=False) == ["y" * 18 + "/tune-lr-sea / rch/objective.png"]
    assert cut_words(["y" * 75 + " that", "fills it"], joined=False) == []
    assert cut_words(["short line ab", "cd"], joined=False) == []
    assert cut_words(["x" * 72 + " worker(s)"], joined=True) == ["x" * 23 + " worker( / s)"]
    assert cut_words(["─" * 100], joined=True) == []


def test_a_marked_or_indented_line_keeps_every_letter_in_a_terminal(monkeypatch):
    """print_lines in an 80-column terminal: the mark's two columns and the text's own indent are
    kept, not taken out of the text (`check` showed "✗ edentials: …", "- otstrap: …")."""
    import io

    from rich.console import Console

    from sagestack.cli.common import print_lines

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((WIDTH, 24)))
    tty = Tty()
    out = Console(file=tty, width=WIDTH, highlight=False, soft_wrap=True, color_system=None)
    long = "credentials: none usable (Unable to locate credentials); run `aws configure` or set AWS_PROFILE"
    print_lines(out, long, "[red]✗[/]")
    print_lines(out, "bootstrap: needs credentials", "[yellow]-[/]")
    print_lines(out, "  traced == eager on 8 inputs", hang="      ")
    lines = tty.getvalue().splitlines()
    assert lines[0].startswith("✗ credentials: none usable") and len(lines[0]) <= WIDTH
    assert " ".join(line.strip() for line in lines[:2]) == "✗ " + long
    assert lines[2:] == ["- bootstrap: needs credentials", "  traced == eager on 8 inputs"]


def test_rules_explain_wraps_every_rule_at_80_columns_in_a_pipe_words_whole():
    """`rules --explain ID` is prose to read, as `rules` lists it: in a pipe (a pager, a CI log) it
    is wrapped at spaces to COLUMNS (80 when unset), never one line of 300 columns; every word kept."""
    from sagestack.project.rules import RULES

    for rule_id, r in RULES.items():
        for columns in ("80", None):
            env = {"COLUMNS": columns} if columns else {"COLUMNS": None}
            shown = CliRunner().invoke(app, ["rules", "--explain", rule_id], env=env)
            assert shown.exit_code == 0, shown.output
            lines = shown.output.splitlines()
            too_long = [line for line in lines if len(line) > WIDTH and " " in line.strip()]
            assert not too_long, (rule_id, too_long)
            assert cut_words(lines, joined=False) == [], rule_id
            words = f"{r.id} ({r.severity}): {r.summary} Why: {r.why} What to do: {r.fix}".split()
            assert shown.output.split() == words, rule_id


# ---------------------------------------------------------------- the runs


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    from sagestack.ops.init import init_project

    tmp = tmp_path_factory.mktemp("screens")
    example = tmp / "example"
    example.mkdir()
    for folder in ("config", "training_src", "containers"):
        shutil.copytree(REPO / folder, example / folder)
    broken = tmp / "broken"
    shutil.copytree(example, broken)
    spec = broken / "config" / "sagestack.yaml"
    text = spec.read_text()
    assert BROKEN[0] in text
    spec.write_text(text.replace(BROKEN[0], BROKEN[1]).replace("max_run: 2h", "max_run: 2 hours"))
    init_project(tmp / "demo", "demo")
    (tmp / "none").mkdir()
    for mode in ("tmux", "pipe"):  # each its own copies: a run leaves models and baselines behind
        (tmp / mode).mkdir()
        for name in ("example", "broken", "demo", "none"):
            shutil.copytree(tmp / name, tmp / mode / name)
    return tmp


def _environment(tmp: Path, aws: str, moto_url: str) -> dict[str, str]:
    env = {
        "HOME": str(tmp),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        # no account at all, whatever this machine holds
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    if aws == MOTO:
        env |= {
            "AWS_ENDPOINT_URL": moto_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    return env


def _cases() -> list[tuple[str, Screen]]:
    cases = [(c, Screen(f"{c} --help", project="none")) for c in commands()]
    return cases + [(c, s) for c in commands() for s in SCREENS.get(c, Row(())).screens]


def _line(screen: Screen, tmp: Path) -> str:
    port = str(free_port())  # never a fixed one: another test or run may hold 8080
    args = screen.args.format(tmp=tmp, port=port)
    command = f"sagestack {args}"  # the venv's entry point, first on the PATH
    if "--port" in args and "--predict" not in args:  # a server: its screen, then a Ctrl-C
        command = f"timeout -s INT 15 {command}"
    return command


def _tmux(tmp: Path, cases: list[tuple[str, Screen]], moto_url: str) -> dict[int, tuple[int, list[str]]]:
    """Every case in one 80-column pane, one after the other; what the pane showed of each, the
    lines tmux wrapped joined (-J), and its exit status."""
    script = tmp / "screens.sh"
    body = []
    for i, (_, screen) in enumerate(cases):
        env = _environment(tmp, screen.aws, moto_url)
        exports = " ".join(f"{k}='{v}'" for k, v in env.items())
        body += [
            f"cd {tmp / screen.project}",
            f"echo '@@ {i}'",
            f"env -i {exports} {_line(screen, tmp)}",
            f'echo "@@ {i} exit=$?"',
        ]
    # `times`: the CPU the commands took, for the dump
    script.write_text("\n".join([*body, f"times > {tmp / 'cpu.txt'}", "echo '@@ all done'", ""]))
    config = tmp / "tmux.conf"
    config.write_text("set -g history-limit 200000\nset -g remain-on-exit on\n")
    socket = f"screens-{uuid.uuid4().hex[:8]}"
    tmux = ["tmux", "-L", socket]
    subprocess.run(
        [
            *(*tmux, "-f", str(config), "new-session", "-d", "-s", "s", "-x", str(WIDTH), "-y", "50"),
            *("env", "-i", f"PATH={os.environ['PATH']}", "TERM=xterm-256color", "LANG=C.UTF-8"),
            *("bash", "--norc", "--noprofile", str(script)),
        ],
        check=True,
    )
    try:
        deadline = time.monotonic() + 1200  # wall time: a loaded machine runs the same CPU slower
        while True:
            shown = subprocess.run(
                [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-t", "s"], capture_output=True, text=True
            ).stdout
            if "@@ all done" in shown:
                break
            assert time.monotonic() < deadline, shown[-3000:]
            time.sleep(1)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
    lines = shown.splitlines()
    screens = {}
    for i in range(len(cases)):
        start = lines.index(f"@@ {i}")
        end = next(j for j in range(start, len(lines)) if lines[j].startswith(f"@@ {i} exit="))
        screens[i] = (int(lines[end].split("=")[1]), [line.rstrip() for line in lines[start + 1 : end]])
    return screens


def _piped(screen: Screen, tmp: Path, moto_url: str, monkeypatch) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """The command through the entry point a user runs, in this process (no interpreter start;
    the spec's loads shared), its output in a pipe with COLUMNS=80 as a CI log holds it."""
    env: dict[str, str | None] = {
        k: v for k, v in _environment(tmp, screen.aws, moto_url).items() if "AWS" in k
    }
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.setdefault(name, None)
    env.setdefault("AWS_ENDPOINT_URL", None)
    env["COLUMNS"] = str(WIDTH)
    args = shlex.split(screen.args.format(tmp=tmp))
    with monkeypatch.context() as m, CliRunner().isolation(env=env) as (out, err, _):
        m.chdir(tmp / screen.project)
        m.setattr(sys, "argv", ["sagestack", *args])
        m.setattr(sys.modules["__main__"], "__spec__", None)  # click names the program from argv[0]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


def test_no_screen_cuts_a_word_at_80_columns(projects, monkeypatch):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    cases = _cases()
    problems: list[str] = []
    dump = []
    with running_moto() as moto:
        shown = _tmux(projects / "tmux", cases, moto.url)
        for i, (_, screen) in enumerate(cases):
            code, lines = shown[i]
            where = f"sagestack {screen.args} (tmux)"
            text = "\n".join(lines)
            dump.append(f"$ {where}\n{text}\n[exit {code}]\n")
            if code != screen.exit or "Traceback" in text:
                problems.append(f"{where}: exit {code}, not {screen.exit}:\n{text}")
            problems += [f"{where}: {cut}" for cut in cut_words(lines, joined=True)]
            if screen.heavy:
                continue
            code, out, err = _piped(screen, projects / "pipe", moto.url, monkeypatch)
            where = f"sagestack {screen.args} (pipe)"
            dump.append(f"$ {where}\n{out}{err}[exit {code}]\n")
            for stream in (out, err):
                problems += [f"{where}: {cut}" for cut in cut_words(stream.splitlines(), joined=False)]
            if code != screen.exit or "internal error" in err:
                problems.append(f"{where}: exit {code}, not {screen.exit}:\n{err}")
    if os.environ.get("SCREENS_80_DUMP"):  # every screen as shown, to read them
        cpu = (projects / "tmux" / "cpu.txt").read_text()
        Path(os.environ["SCREENS_80_DUMP"]).write_text("\n".join([*dump, f"tmux CPU (times):\n{cpu}"]))
    assert not problems, "\n".join(problems)
