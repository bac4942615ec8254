"""Training queues in the quota check: a queue's capacity limit is counted in instances of every
type (NUM_INSTANCES), while the account's quotas are per type. So for each type a queue's jobs run
on, the queue may hold min(max_instances, those jobs' instances) at once; where the type's quota
(or the account's training total, over all queues) allows fewer, Batch keeps the rest waiting
behind the quota rather than the queue's share — worth a warning, never a failure (nothing fails:
the jobs wait)."""

from __future__ import annotations

from collections.abc import Mapping

from sagestack.capacity.ledger import Tally
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL
from sagestack.queues.models import QueueSpec
from sagestack.training.rendered import RenderedJob


def add_queues(tally: Tally, queues: Mapping[str, QueueSpec], jobs: Mapping[str, RenderedJob]) -> None:
    """Warn where a queue's capacity limit can never be reached for a quota of the account."""
    held_total = 0.0
    for key, queue in queues.items():
        by_quota: dict[str, tuple[str, float]] = {}  # quota -> (instance type, the jobs' instances)
        for rendered in jobs.values():
            ref = rendered.job.queue
            if ref is None or ref.name != key:
                continue
            first = rendered.candidates[0]
            itype, count = by_quota.get(first.quota_name, (first.instance_type, 0.0))
            by_quota[first.quota_name] = (itype, count + rendered.job.instance_count)
        queued = 0.0
        for quota, (itype, count) in by_quota.items():
            held = min(float(queue.max_instances), count)
            queued += count
            avail = tally.book.available(quota)
            if avail is not None and avail < held:
                tally.warnings.append(
                    f"queue '{key}' may run {held:g} x {itype} at once (its jobs' on that type, within "
                    f"max_instances {queue.max_instances}), but '{quota}' allows {max(avail, 0):g}: the "
                    "rest wait behind the quota, not the queue's shares; raise the quota or lower "
                    "max_instances"
                )
        held_total += min(float(queue.max_instances), queued)
    avail = tally.book.available(TRAINING_INSTANCES_TOTAL)
    if queues and avail is not None and avail < held_total:
        tally.warnings.append(
            f"the queues may run {held_total:g} training instances at once, but "
            f"'{TRAINING_INSTANCES_TOTAL}' allows {max(avail, 0):g}: the rest wait behind the account's "
            "total, not the queues' shares"
        )
