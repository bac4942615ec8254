"""'Did you mean …?' for every error that names a value from a closed set."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(given: str, allowed: Iterable[str], n: int = 1, cutoff: float = 0.6) -> list[str]:
    """The allowed values closest to `given` (case-insensitive), best first."""
    options = list(allowed)
    by_lower = {o.lower(): o for o in options}
    hits = difflib.get_close_matches(given.lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[h] for h in hits]


def did_you_mean(given: str, allowed: Iterable[str]) -> str:
    """' (did you mean 'x'?)' or '' when nothing is close."""
    hits = closest(given, allowed)
    return f"; did you mean '{hits[0]}'?" if hits else ""


def could_be(given: str, allowed: Iterable[str], n: int = 3) -> str:
    """'; did you mean 'x' or 'y'?' (the `n` closest, best first) or '' when nothing is close."""
    hits = [f"'{h}'" for h in closest(given, allowed, n=n)]
    if not hits:
        return ""
    return f"; did you mean {hits[0] if len(hits) == 1 else ', '.join(hits[:-1]) + ' or ' + hits[-1]}?"
