"""Rules about training queues: a queued job names a queue that exists, counts against one of its
shares exactly when the queue shares fairly, and fits the queue's capacity limit."""

from __future__ import annotations

from collections.abc import Iterator

from sagestack.core.catalog.suggest import did_you_mean
from sagestack.core.rules import Finding, RuleContext, rule


@rule(
    "queue-reference",
    "error",
    "a job's queue: names a key of queues:, and its share one of that queue's shares",
    why=(
        "A queued job is submitted to the queue's Batch job queue. A fair-share queue (one with "
        "shares:) refuses a job without a share identifier, and a first-in-first-out queue one with "
        "a share or a scheduling priority (SubmitServiceJob: 'Don't specify this parameter if the job "
        "queue doesn't have a fair-share scheduling policy')."
    ),
    fix="Name a queue from queues:, and give share: (one of its shares) exactly when it has shares.",
)
def queue_reference(ctx: RuleContext) -> Iterator[Finding]:
    queues = ctx.spec.queues
    for name, job in ctx.spec.jobs.items():
        ref = job.queue
        if ref is None:
            continue
        queue = queues.get(ref.name)
        if queue is None:
            defined = ", ".join(queues) or "none"
            yield Finding(
                ("jobs", name, "queue", "name"),
                f"'{ref.name}' is not a key of queues:{did_you_mean(ref.name, list(queues))} (defined: {defined})",
            )
            continue
        if queue.shares and ref.share is None:
            yield Finding(
                ("jobs", name, "queue"),
                f"queue '{ref.name}' shares its capacity fairly ({', '.join(queue.shares)}): say which share "
                "the job counts against with share:",
            )
        elif queue.shares and ref.share not in queue.shares:
            yield Finding(
                ("jobs", name, "queue", "share"),
                f"'{ref.share}' is not a share of queue '{ref.name}'"
                f"{did_you_mean(str(ref.share), list(queue.shares))} (its shares: {', '.join(queue.shares)})",
            )
        elif not queue.shares:
            for key in ("share", "priority"):
                if getattr(ref, key) is not None:
                    yield Finding(
                        ("jobs", name, "queue", key),
                        f"queue '{ref.name}' runs jobs first in, first out: it has no shares, so {key}: "
                        "means nothing there; remove it, or give the queue shares:",
                    )


@rule(
    "queue-capacity",
    "error",
    "a queued job fits its queue's capacity limit",
    why=(
        "Batch starts a queued training job only when its instances fit under the service "
        "environment's capacity limit (max_instances). A job larger than the limit waits forever."
    ),
    fix="Raise the queue's max_instances to at least the job's instance_count, or lower the count.",
)
def queue_capacity(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        if job.queue is None or job.queue.name not in ctx.spec.queues:
            continue
        limit = ctx.spec.queues[job.queue.name].max_instances
        if job.instance_count > limit:
            yield Finding(
                ("jobs", name, "instance_count"),
                f"the job needs {job.instance_count} instances at once, but queue '{job.queue.name}' holds "
                f"at most {limit} (max_instances): it would wait in the queue forever",
            )


@rule(
    "queue-candidates",
    "warning",
    "a queued job's candidates reach Batch only as instance preferences",
    why=(
        "Without a queue the pipeline falls back to the next candidate when one is short of quota or "
        "capacity. A queued job is one SubmitServiceJob: its payload carries every candidate only as "
        "InstancePreferences (SageMaker launches the first with capacity), which managed spot training "
        "cannot use and which holds at most 5; otherwise it names the first candidate alone, Batch "
        "waits for that type's capacity, and the others are never tried."
    ),
    fix="Keep one candidate, or turn spot off (at most 5 candidates) so they become InstancePreferences.",
)
def queue_candidates(ctx: RuleContext) -> Iterator[Finding]:
    for name, job in ctx.spec.jobs.items():
        candidates = job.instance_type
        if job.queue is None or len(candidates) < 2:
            continue
        why = "managed spot" if job.use_spot_instances else "more than 5" if len(candidates) > 5 else None
        if why is not None:
            yield Finding(
                ("jobs", name, "instance_type"),
                f"queued job with {why}: only {candidates[0]} is submitted; "
                + ", ".join(candidates[1:])
                + " would never be tried",
            )
