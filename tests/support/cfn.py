"""Resolve the intrinsic functions of a synthesized template's value with stand-in values, so a
state machine definition can run in an emulator without deploying its stack."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Resolver = Callable[[str], str]


def resolve(node: Any, ref: Resolver, get_att: Callable[[str, str], str], import_value: Resolver) -> Any:
    def walk(n: Any) -> Any:
        if isinstance(n, dict) and len(n) == 1:
            ((fn, arg),) = n.items()
            if fn == "Ref":
                return ref(arg)
            if fn == "Fn::GetAtt":
                return get_att(arg[0], arg[1])
            if fn == "Fn::ImportValue":
                return import_value(walk(arg))
            if fn == "Fn::Join":
                return walk(arg[0]).join(str(walk(p)) for p in arg[1])
            if fn == "Fn::Sub":
                text, variables = (
                    (arg, {}) if isinstance(arg, str) else (arg[0], {k: walk(v) for k, v in arg[1].items()})
                )
                return re.sub(r"\$\{([^}]+)\}", lambda m: variables.get(m.group(1)) or ref(m.group(1)), text)
            if fn == "Fn::Select":
                return walk(arg[1])[int(arg[0])]
            if fn == "Fn::Split":
                return walk(arg[1]).split(arg[0])
        if isinstance(n, dict):
            return {k: walk(v) for k, v in n.items()}
        if isinstance(n, list):
            return [walk(v) for v in n]
        return n

    return walk(node)


def cfn_lint(templates: list[str]) -> tuple[int, str]:
    """cfn-lint (parseable output) on templates: its exit code and what it printed."""
    import subprocess
    import sys
    from pathlib import Path

    lint = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *templates],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return lint.returncode, lint.stdout + lint.stderr
