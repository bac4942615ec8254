#!/usr/bin/env python3
"""CDK entry point: `cdk synth` builds one stage per environment in config/envs/.

Exit 2 on an invalid spec (every error with file:line), 1 on an unacknowledged cdk-nag finding,
3 when a quota is short (`-c sagestack:quotas=live|snapshot|off`), 4 when a request differs from
the environment's lock (`-c sagestack:locked=true`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from aws_cdk import App

from sagestack.account import QuotaSourceError
from sagestack.plan.capacity import QuotaShortfallError
from sagestack.plan.lock import LockMismatchError
from sagestack.spec import SpecError
from stacks.app_builder import UnacknowledgedFindings, build_app, cdk_json_context, synth_checked

# What a synth can stop for, and its exit code; the message is the exception's text.
EXIT_CODES: tuple[tuple[type[Exception], int], ...] = (
    (SpecError, 2),
    (UnacknowledgedFindings, 1),
    (QuotaShortfallError, 3),
    (QuotaSourceError, 1),
    (LockMismatchError, 4),
)


def main() -> None:
    root = Path(__file__).resolve().parent
    app = App(context=cdk_json_context(root))
    try:
        build_app(app, root)
        synth_checked(app)
    except tuple(cls for cls, _ in EXIT_CODES) as e:
        print(e.report() if isinstance(e, SpecError) else e, file=sys.stderr)
        sys.exit(next(code for cls, code in EXIT_CODES if isinstance(e, cls)))


if __name__ == "__main__":
    main()
