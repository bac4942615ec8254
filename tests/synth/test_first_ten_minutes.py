"""A new user's first ten minutes, in a real terminal: `sagestack init`, then each command init says
to run next, exactly as printed and in its order, typed into tmux at 80x24 in a fresh folder (the
shell has the project's environment on its PATH, a supported Node.js LTS as a user installs one, and
nothing else set up: no CDK CLI, no JSII variable, no AWS account). The screens are read back from
tmux and held to what a user must see: no line longer than the terminal (a long line wraps, and a
wrapped command or name is cut mid-word), no word cut with an ellipsis, headers present, the
training bar with step/total and an ETA, the metrics on their own line, the curves written, the
trained model served and answering, and the deploy going as far as an account allows: the CDK CLI's
own no-credentials error, and nothing else (no warning, no stray line, no jsii banner)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sagestack.ops.init import NEXT_STEPS
from tests.conftest import REPO

pytestmark = pytest.mark.synth

BIN = Path(sys.executable).parent
WIDTH, HEIGHT = 80, 24


class Terminal:
    """One tmux session of WIDTH x HEIGHT running bash, on a server of its own (parallel tests never
    share one). `run` types a command, waits for its end and returns what the screen showed of
    it, the lines tmux wrapped joined again (-J), so a line the program printed too long for the
    terminal comes back longer than WIDTH."""

    def __init__(self, cwd: Path, user_bin: Path | None = None) -> None:
        """`user_bin`: the user's own programs ahead of the venv's (e.g. their Node.js), if any."""
        self.socket = f"sagestack-{uuid.uuid4().hex[:8]}"
        own = f"{user_bin}{os.pathsep}" if user_bin else ""
        env = {
            "HOME": os.environ.get("HOME", str(cwd)),
            "PATH": f"{own}{BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            # no account, whatever this machine's home holds: the deploy must stop at its credentials
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        if os.environ.get("PYTHONPATH"):  # the checkout under test, where it is not the venv's own
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        subprocess.run(
            [
                *("tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "user"),
                *("-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(cwd)),
                *("env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "--norc", "--noprofile"),
            ],
            check=True,
        )
        self.tmux("set-option", "-g", "history-limit", "5000")
        self.tmux("send-keys", "-t", "user", "PS1='$ '", "Enter")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True)
        return done.stdout

    def run(self, command: str, timeout: float = 300) -> tuple[int, list[str]]:
        self.tmux("send-keys", "-t", "user", "clear", "Enter")
        time.sleep(0.3)
        self.tmux("clear-history", "-t", "user")
        marker = f"__done_{uuid.uuid4().hex[:6]}"
        self.tmux("send-keys", "-t", "user", f"{command}; echo {marker}=$?", "Enter")
        deadline = time.monotonic() + timeout
        while True:
            screen = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "user")
            found = re.search(rf"^{marker}=(\d+)$", screen, re.M)
            if found:
                lines = screen[: found.start()].rstrip("\n").splitlines()
                typed = next(i for i, line in enumerate(lines) if command[:40] in line)
                return int(found.group(1)), lines[typed + 1 :]
            assert time.monotonic() < deadline, f"{command!r} did not end in {timeout} s:\n{screen}"
            time.sleep(0.5)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal(tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is part of the test set-up (apt-get install tmux)")
    node = (REPO / "node_modules" / ".bin" / "node").resolve()
    if not node.exists():
        pytest.fail("node_modules/.bin/node is missing: run `make setup` (npm ci)")
    user_bin = tmp_path / "user-bin"  # the user's own Node.js: the LTS the project pins
    user_bin.mkdir()
    (user_bin / "node").symlink_to(node)
    term = Terminal(tmp_path, user_bin)
    yield term
    term.close()


def _fits(screen: list[str], what: str) -> None:
    too_long = [line for line in screen if len(line) > WIDTH]
    assert not too_long, f"{what}: lines wider than {WIDTH} columns:\n" + "\n".join(too_long)
    assert not [line for line in screen if "…" in line], f"{what}: a word cut:\n" + "\n".join(screen)
    assert not [line for line in screen if "b'" in line or "end-of-life" in line.lower()], (
        f"{what}: jsii's Node.js banner:\n" + "\n".join(screen)
    )


def test_init_validate_plan_synth_and_train_as_a_new_user_sees_them(terminal, tmp_path):
    code, screen = terminal.run("sagestack init demo")
    assert code == 0, screen
    _fits(screen, "init")
    steps = [
        line.strip().split("  ")[0] for line in screen if line.strip().startswith(("sagestack ", "npm "))
    ]
    assert steps == [command for command, _ in NEXT_STEPS]
    assert steps[:4] == [
        "sagestack validate",
        "sagestack plan",
        "sagestack synth",
        "sagestack local train train",
    ]
    assert any(line.strip() == "cd demo" for line in screen)
    terminal.run("cd demo")

    code, screen = terminal.run(steps[0])
    assert code == 0, screen
    _fits(screen, "validate")

    code, screen = terminal.run(steps[1])
    assert code == 0, screen
    _fits(screen, "plan")
    text = "\n".join(screen)
    assert re.search(r"^\s*entry\s.*\bcandidate\b.*\bcost\b", text, re.M), (
        text
    )  # the training table's headers
    assert re.search(r"\btrain\b.*ml\.m5\.xlarge", text), text

    code, screen = terminal.run(steps[2])
    assert code == 0, screen
    _fits(screen, "synth")
    assert any("synthesized" in line for line in screen), screen
    assert list((tmp_path / "demo" / "cdk.out").rglob("*.template.json"))

    code, screen = terminal.run(steps[3], timeout=600)
    assert code == 0, screen
    _fits(screen, "local train")
    text = "\n".join(screen)
    bars = [line for line in screen if "━" in line]
    assert bars, text
    assert re.search(r"\b(\d+)/\1\b", bars[-1]), f"the bar's last state is not step/total, all done:\n{text}"
    assert re.search(r"\d+:\d\d", bars[-1]), f"no elapsed/ETA on the bar line:\n{text}"
    assert not re.search(r"val_accuracy=", bars[-1]), f"metrics belong on their own line:\n{text}"
    assert re.search(r"val_accuracy=0\.\d+", text), text
    assert "n/a" not in text, text
    run = tmp_path / "demo" / ".sagestack" / "local" / "dev" / "train"
    assert (run / "training_curves.png").stat().st_size > 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics, "metrics.json is empty"

    # serve what local train saved, as the PyTorch inference container would, and ask it 5 digits
    assert steps[4].startswith("sagestack local serve ") and steps[4].endswith(" --predict 5")
    code, screen = terminal.run(steps[4], timeout=300)
    assert code == 0, screen
    _fits(screen, "local serve")
    text = "\n".join(screen)
    assert "POST http://127.0.0.1:8080/invocations" in text, text
    answers = [line for line in screen if re.match(r"^[│|]\s*\d\s*[│|]", line)]
    assert len(answers) == 5, text
    assert sum("✓" in line for line in answers) >= 3, text  # a model that learned, not noise
    assert "Warning" not in text, text


def test_the_deploy_command_init_prints_works_as_printed_up_to_the_missing_account(terminal, tmp_path):
    """The deploy as printed: the CDK CLI and Node.js the project pins, up to the missing account.
    (A test of its own, beside the local steps above, so that the two run on two workers.)"""
    code, screen = terminal.run("sagestack init demo")
    assert code == 0, screen
    steps = [
        line.strip().split("  ")[0] for line in screen if line.strip().startswith(("sagestack ", "npm "))
    ]
    terminal.run("cd demo")
    assert steps[5] == "npm install && npx cdk deploy 'dev/*'"
    code, screen = terminal.run(steps[5], timeout=600)
    assert code != 0, screen
    allowed = (
        r"added \d+ packages? in \S+",  # npm install
        r"npm notice .*",  # npm's own news (a newer npm), if any
        r"✨\s+Synthesis time: [\d.]+s",  # the CDK CLI's progress
        r"Unable to resolve AWS account to use\. It must be either configured when you define your "
        r"CDK Stack, or through the environment",
    )
    lines = [line.strip() for line in screen if line.strip()]
    unexpected = [line for line in lines if not any(re.fullmatch(a, line) for a in allowed)]
    assert unexpected == [], "\n".join(screen)
    assert lines[-1].startswith("Unable to resolve AWS account"), "\n".join(screen)
    assert (tmp_path / "demo" / "node_modules" / ".bin" / "node").exists()  # package.json's Node.js LTS
