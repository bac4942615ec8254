"""SageMaker Debugger's built-in rules as the SageMaker Python SDK renders them.

`data/debugger_rules.json` holds what smdebug-rulesconfig (the package behind the SDK's
`rule_configs`) returns for each built-in rule: its configuration name, default parameters and the
collections the SDK adds to the job's debug hook for it (tests/conformance checks the file against
the package). `action_json` is the actions' encoding the rule container reads: it embeds the string
in a Python string literal (`json.loads("<action_json>")`), hence the escaped quotes.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def debugger_rules() -> dict[str, Any]:
    text = resources.files("sagestack.core.catalog").joinpath("data/debugger_rules.json").read_text()
    rules: dict[str, Any] = json.loads(text)["rules"]
    return rules


def action_json(actions: list[tuple[str, dict[str, str]]]) -> str:
    """smdebug_rulesconfig ActionList.serialize() of (name, parameters) actions: each action's
    parameters, then its name, as `[{\\"training_job_prefix\\": \\"…\\", \\"name\\": \\"stoptraining\\"}, …]`."""
    return (
        "["
        + ", ".join(
            "{" + ", ".join(f'\\"{k}\\": \\"{v}\\"' for k, v in {**params, "name": name}.items()) + "}"
            for name, params in actions
        )
        + "]"
    )
