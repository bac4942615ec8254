"""The quota values and current usage of one account and region, as capacity reads them: from the
live Service Quotas API (ops/account.py) or from the environment's snapshot file
(config/envs/<env>.quotas.json, read with its spec)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sagestack.core.config import ENV_DIR


@dataclass(frozen=True)
class QuotaValue:
    name: str
    code: str
    value: float


@dataclass
class QuotaBook:
    """Quota values and current usage of one account and region."""

    source: Literal["live", "snapshot", "none"]
    detail: str  # where the values come from, for the report
    values: dict[str, QuotaValue] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)

    def available(self, name: str) -> float | None:
        q = self.values.get(name)
        return None if q is None else q.value - self.usage.get(name, 0.0)

    def code(self, name: str) -> str | None:
        q = self.values.get(name)
        return q.code if q else None

    @classmethod
    def none(cls, why: str) -> QuotaBook:
        return cls("none", why)


def book_from_document(data: dict[str, Any], source: Literal["live", "snapshot"], detail: str) -> QuotaBook:
    values = {
        q["QuotaName"]: QuotaValue(q["QuotaName"], q["QuotaCode"], float(q["Value"]))
        for q in data.get("quotas", [])
    }
    usage = {k: float(v) for k, v in data.get("usage", {}).items()}
    return QuotaBook(source, detail, values, usage)


def snapshot_book(env: str, document: dict[str, Any] | None) -> QuotaBook | None:
    """The environment's quota snapshot (config/envs/<env>.quotas.json, read with its spec:
    `plan.files.quotas`), or None when it has none."""
    if document is None:
        return None
    taken = document.get("taken_at")
    detail = f"snapshot {ENV_DIR}/{env}.quotas.json" + (f" (taken {taken})" if taken else "")
    return book_from_document(document, "snapshot", detail)
