"""The error that stops a local run: raised where the job cannot run here as asked (the training
room's request, hosts and run folder; the drivers room's sandbox), caught once by `local train`,
which prints its message: why, and what to change."""

from __future__ import annotations


class LocalRunError(RuntimeError):
    """The job cannot run here as asked; the message says why and what to change."""
