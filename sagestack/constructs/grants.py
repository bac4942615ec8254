"""Statements granted once per principal.

On the spec path every pipeline of an environment shares one role and asks it for the same
environment-wide statements (run this environment's training jobs, read quotas, pass the execution
role, read the source archive …). CDK would merge the copies in the policy anyway; adding each once
keeps synth linear in the jobs at a few milliseconds each instead of a dozen calls into jsii per job
(bench/synth.py measures it). A statement with tokens that differ per stack is simply granted again.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import aws_iam as iam

from sagestack.constructs.read_once import dropped

_GRANTED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def first_time(principal: Any, *what: Any) -> bool:
    """True the first time `what` is asked of `principal` (then remembered for it)."""
    key = json.dumps(what, sort_keys=True, default=str)
    seen = _GRANTED.setdefault(principal, set())
    if key in seen:
        return False
    seen.add(key)
    return True


def grant_once(
    grantee: iam.IGrantable,
    actions: Sequence[str],
    resource_arns: Sequence[str],
    conditions: Mapping[str, Any] | None = None,
) -> iam.Grant:
    """iam.Grant.add_to_principal, unless this principal already holds the very statement."""
    if not first_time(grantee, "grant", list(actions), list(resource_arns), conditions):
        return dropped(grantee, f"{', '.join(actions)} (granted already)")
    return iam.Grant.add_to_principal(
        grantee=grantee,
        actions=list(actions),
        resource_arns=list(resource_arns),
        conditions=dict(conditions) if conditions is not None else None,
    )
