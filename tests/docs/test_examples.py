"""The README's and the guides' examples, exactly as printed: every ```yaml block is a fragment of the file its title
names (`config/sagestack.yaml`, or an overlay `config/envs/<env>.yaml`) and, merged into a copy of the
example project, passes the real loader and its rules; every `sagestack …` line of a ```sh block names
commands and options that exist; the cheap ones (validate, plan, render, rules) run on that copy."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from sagestack.cli import app
from sagestack.core.errors import SpecError
from sagestack.project.loader import ProjectFiles
from tests.docs.site import REPO

PAGES = [
    REPO / "README.md",
    *sorted([*(REPO / "docs").glob("*.md"), *(REPO / "docs" / "guide").glob("*.md")]),
]
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>yaml|sh)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```", re.S | re.M
)
# what a project copy needs for the example's rules (files that must exist, the Dockerfile image)
PROJECT_PARTS = ("config", "training_src", "containers", "schema", "app.py", "cdk.json")
RUNS = {"validate", "plan", "render", "rules"}  # cheap, and they write nothing


def blocks(lang: str) -> list[tuple[str, str, str]]:
    """(page:line, info string, body) of every fenced block of that language in the guides."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m["lang"] == lang:
                line = text.count("\n", 0, m.start()) + 1
                body = "\n".join(row.removeprefix(m["indent"]) for row in m["body"].splitlines())
                found.append((f"{page.relative_to(REPO)}:{line}", m["info"], body))
    return found


def merge(base: Any, over: Any) -> Any:
    """The loader's overlay rule: mappings merge key by key, anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merge(base[k], v) if k in base else v for k, v in over.items()}}
    return over


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / part)
        elif source.exists():
            shutil.copy(source, tmp_path / part)
    # the clusters guide's lifecycle script, where `sagestack init` writes it
    (tmp_path / "cluster_src").mkdir()
    shutil.copy(REPO / "sagestack" / "templates" / "on_create.sh", tmp_path / "cluster_src" / "on_create.sh")
    return tmp_path


YAML_BLOCKS = blocks("yaml")


@pytest.mark.parametrize("where,info,body", YAML_BLOCKS, ids=[w for w, _, _ in YAML_BLOCKS])
def test_every_yaml_block_is_a_valid_fragment_of_the_file_it_names(
    where: str, info: str, body: str, project: Path
) -> None:
    title = re.search(r'title="([^"]+)"', info)
    assert title, f'{where}: a ```yaml block names its file: ```yaml title="config/sagestack.yaml"'
    target = Path(title[1])
    match = re.fullmatch(r"config/(sagestack\.yaml|envs/([a-z0-9-]+)\.yaml)", target.as_posix())
    assert match, f"{where}: {target} is neither the project file nor an overlay"
    fragment = yaml.safe_load(body)
    path = project / target
    path.write_text(yaml.safe_dump(merge(yaml.safe_load(path.read_text()) or {}, fragment), sort_keys=False))
    files = ProjectFiles(project)
    envs = [match[2]] if match[2] else files.environments()
    for env in envs:
        try:
            files.load(env)
        except SpecError as e:
            pytest.fail(f"{where} ({env}):\n" + "\n".join(issue.format() for issue in e.issues))


def sagestack_lines() -> list[tuple[str, str]]:
    """(page:line, command) for every `sagestack …` command of a ```sh block (comments and && split)."""
    found = []
    for where, _info, body in blocks("sh"):
        for row in body.splitlines():
            code = row.split(" #", 1)[0].strip()
            for part in code.split("&&"):
                part = part.strip()
                if part.startswith("sagestack "):
                    found.append((where, part))
    return found


SH_LINES = sagestack_lines()


def _walk(args: list[str]) -> tuple[Any, list[str], str]:
    """The command the words name (descending through groups), the words left, and its path."""
    command: Any = typer.main.get_command(app)
    path = "sagestack"
    while args and hasattr(command, "commands") and args[0] in command.commands:
        path += " " + args[0]
        command = command.commands[args.pop(0)]
    return command, args, path


def problem(line: str, *, mention: bool = False) -> str | None:
    """What is wrong with a command line as the CLI would read it, or None. A mention in prose may
    name a group alone (`sagestack local`) or a placeholder for the command (`sagestack COMMAND -h`)."""
    words = [w.strip("[]") for w in shlex.split(line)[1:] if w not in ("[", "]", "…")]
    command, rest, path = _walk(words)
    if hasattr(command, "commands"):
        if rest and not rest[0].startswith("-") and not (mention and rest[0].isupper()):
            return f"{path} has no command {rest[0]} ({', '.join(command.commands)})"
        if not rest and not mention:
            return f"{path} needs a subcommand ({', '.join(command.commands)})"
        if rest and rest[0].isupper():
            return None
    spellings = {
        o for p in command.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
    }
    for word in rest:
        if word == "--":  # what follows goes to another program (deploy's CDK CLI options)
            break
        number = re.fullmatch(r"-?\d+(\.\d+)?", word)
        if word.startswith("-") and not number and word.split("=", 1)[0] not in spellings:
            return f"{path} has no option {word}"
    return None


@pytest.mark.parametrize("where,line", SH_LINES, ids=[f"{w}:{c}" for w, c in SH_LINES])
def test_every_sagestack_command_shown_exists_with_its_options(where: str, line: str) -> None:
    wrong = problem(line)
    assert wrong is None, f"{where}: `{line}`: {wrong}"


def test_every_sagestack_command_named_in_the_prose_exists() -> None:
    """`sagestack …` in a sentence's code span too: a reader copies those as well."""
    wrong = []
    for page in PAGES:
        prose = FENCE.sub("", page.read_text())
        for span in re.findall(r"`(sagestack [^`]+)`", prose):
            if problem(span, mention=True):
                wrong.append(f"{page.relative_to(REPO)}: `{span}`: {problem(span, mention=True)}")
    assert not wrong, "\n".join(wrong)


def _environment() -> dict[str, str]:
    """No AWS account is reached: plan says it could not check the quotas."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        AWS_EC2_METADATA_DISABLED="true",
        COLUMNS="80",
    )
    return env


RUNNABLE = [
    (w, c) for w, c in SH_LINES if c.split()[1] in RUNS and not re.search(r"[\[\]…<>]|\b[A-Z]{2,}\b", c)
]


@pytest.mark.parametrize("where,line", RUNNABLE, ids=[f"{w}:{c}" for w, c in RUNNABLE])
def test_the_cheap_commands_run_as_printed_on_the_example(where: str, line: str, project: Path) -> None:
    args = shlex.split(line)[1:]
    done = subprocess.run(
        [sys.executable, "-m", "sagestack.cli", *args],
        cwd=project,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"{where}: `{line}` exited {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    )
    assert done.stdout.strip(), f"{where}: `{line}` printed nothing"


def test_the_guides_show_commands_and_examples() -> None:
    """The collections above are not empty by accident (a changed fence syntax would empty them)."""
    assert len(YAML_BLOCKS) >= 10 and len(SH_LINES) >= 20 and len(RUNNABLE) >= 3
