#!/usr/bin/env python3
"""The call path of `sagestack plan`: from the command to the printed report, which of sagestack's
modules it enters and how often, traced with sys.setprofile over one in-process run of the command.

A module is "entered" when a function of it is called from another module (a call inside one
module is not an entry); `project/requests.py` is listed by function, so that rendering the
environment more than once shows. The default is the example project, environment dev, quotas
snapshot needed: the rest of the report is the same).

tests/unit/test_plan_path.py holds the figures to what they are now (it fails when the path grows).

--smoke is the same run (it takes seconds), for tests/synth/test_bench_smoke.py.

Usage: python bench/plan_path.py [--env dev] [--root .] [--top 15] [--smoke]
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = str(ROOT / "sagestack") + "/"
REQUESTS = "project/requests.py"


@dataclass
class CallPath:
    modules: Counter[str] = field(default_factory=Counter)  # module -> entries from other modules
    requests: Counter[str] = field(default_factory=Counter)  # function of project/requests -> calls
    calls: Counter[str] = field(default_factory=Counter)  # 'module:function' -> calls
    exit_code: int = 0
    output: str = ""


def _module(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    name = frame.f_code.co_filename
    return name[len(PACKAGE) :] if name.startswith(PACKAGE) else None


def trace_plan(root: Path, env: str, quotas: str = "off") -> CallPath:
    """Run `sagestack plan --env ENV --quotas QUOTAS` in this process and record its path (the
    imports it makes on the way count as entries too, as they are part of what the command runs)."""
    from typer.main import get_command

    from sagestack.cli import app

    out = CallPath()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None or frame.f_code.co_name == "<module>":
            return
        out.calls[f"{callee}:{frame.f_code.co_name}"] += 1
        if _module(frame.f_back) != callee:
            out.modules[callee] += 1
        if callee == REQUESTS:
            out.requests[frame.f_code.co_name] += 1

    command = get_command(app)
    args = ["plan", "--env", env, "--quotas", quotas, "--root", str(root)]
    buffer = io.StringIO()
    sys.setprofile(profile)
    try:
        with redirect_stdout(buffer):
            command.main(args, prog_name="sagestack", standalone_mode=False)
    except SystemExit as e:  # typer.Exit with standalone_mode=False returns; Exit(code) raises
        out.exit_code = int(e.code or 0)
    finally:
        sys.setprofile(None)
    out.output = buffer.getvalue()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--env", default="dev")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="the same run (seconds)")
    args = parser.parse_args()
    path = trace_plan(args.root, args.env)
    entries = sum(path.modules.values())
    print(f"sagestack plan --env {args.env}: {len(path.modules)} modules, {entries} entries")
    print(f"  {REQUESTS}: entered {path.modules[REQUESTS]}x; its functions called:")
    for name, n in path.requests.most_common():
        print(f"    {n:4d}  {name}")
    print(f"  the resolved environment's Names built: {path.calls['project/environment.py:names']}x")
    print(f"  most entered modules (top {args.top}):")
    for name, n in path.modules.most_common(args.top):
        print(f"    {n:4d}  {name}")


if __name__ == "__main__":
    main()
