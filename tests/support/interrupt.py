"""Starting a command a test will interrupt with SIGINT, as a user's Ctrl-C would.

A process started in the background of a shell without job control (`make test &`, a CI runner's
`cmd &`) inherits SIGINT as *ignored*, and Python then installs no KeyboardInterrupt handler: a
test's SIGINT would do nothing and the test would wait out its timeout. A terminal's Ctrl-C always
reaches a command with the default disposition, so the child gets it back before it starts."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """`preexec_fn` for a child that must receive SIGINT as a terminal delivers it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
