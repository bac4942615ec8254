"""A source directory's requirements.txt, as the SageMaker training container treats it.

The toolkit runs `python -m pip install -r requirements.txt` in the code directory before the script
(sagemaker_training/modules.py), from the network. Locally sagestack checks that this environment
already satisfies every requirement; when it does not, the run refuses and says what is missing,
unless asked to install them as the container would (into this environment).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

REQUIREMENTS = "requirements.txt"


@dataclass(frozen=True)
class RequirementsCheck:
    path: Path
    satisfied: tuple[str, ...]
    unmet: tuple[str, ...]  # each: "<line>: <why>"
    unchecked: tuple[str, ...]  # lines that are not plain requirements (options, URLs, -e, -r)

    @property
    def ok(self) -> bool:
        return not self.unmet and not self.unchecked


def _lines(path: Path) -> list[str]:
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def check_requirements(code_dir: Path) -> RequirementsCheck | None:
    """None when the code has no requirements.txt."""
    from packaging.requirements import InvalidRequirement, Requirement

    path = code_dir / REQUIREMENTS
    if not path.exists():
        return None
    satisfied, unmet, unchecked = [], [], []
    for line in _lines(path):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            unchecked.append(line)
            continue
        if req.marker is not None and not req.marker.evaluate():
            satisfied.append(line)
            continue
        if req.url:
            unchecked.append(line)
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            unmet.append(f"{line}: not installed")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            unmet.append(f"{line}: {version} is installed")
        else:
            satisfied.append(line)
    return RequirementsCheck(path, tuple(satisfied), tuple(unmet), tuple(unchecked))


def install_requirements(code_dir: Path) -> subprocess.CompletedProcess[str]:
    """Exactly what the container does: pip install -r requirements.txt, in the code directory."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "-r", REQUIREMENTS],
        cwd=code_dir,
        text=True,
        capture_output=True,
        check=False,
    )
