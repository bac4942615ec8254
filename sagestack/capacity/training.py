"""Training's needs, read from the rendered requests: each job's instance candidates (the quota each
candidate's CreateTrainingJob draws on, its instance count and MaxRuntimeInSeconds), a search's
parallel trials of its job's first candidate, and the account's "Number of instances across all
training jobs"."""

from __future__ import annotations

from sagestack.capacity.prices import training_cost
from sagestack.capacity.rows import Row, Tally, choose_first_with_room, status_of, types_with_quota
from sagestack.core.catalog.quotas import TRAINING_INSTANCES_TOTAL, training_usage
from sagestack.training.candidates import RenderedCandidate
from sagestack.training.rendered import RenderedJob
from sagestack.tuning.models import TuningSpec


def _count(c: RenderedCandidate) -> int:
    return int(c.request["ResourceConfig"]["InstanceCount"])


def _max_run(c: RenderedCandidate) -> int:
    return int(c.request["StoppingCondition"]["MaxRuntimeInSeconds"])


def add_job(tally: Tally, key: str, rendered: RenderedJob) -> None:
    """One row per candidate; the first with room is chosen. A job run on deploy shares its quota
    with the others run then."""
    book = tally.book
    run_on_deploy = rendered.job.run_on_deploy
    first = rendered.candidates[0]
    need = float(_count(first))
    job_rows = []
    for c in rendered.candidates:
        together = tally.at_once.get(c.quota_name, 0.0) if run_on_deploy else 0.0
        avail = book.available(c.quota_name)
        hours = _max_run(c) / 3600
        price, on_demand, spot = training_cost(c.instance_type, _count(c) * hours)
        job_rows.append(
            Row(
                kind="job",
                key=key,
                instance_type=c.instance_type,
                count=_count(c),
                quota=c.quota_name,
                needed=need + together,
                available=avail,
                status=status_of(None if avail is None else avail - together, need),
                chosen=False,
                price_per_hour=price,
                cost_on_demand=on_demand,
                cost_spot=spot,
                cost_basis=f"≤ {hours:g} h (max_run)",
                note="run on deploy" if run_on_deploy else "",
            )
        )
    chosen_index = choose_first_with_room(job_rows)
    tally.rows += job_rows
    if chosen_index is None:
        usage = training_usage(bool(first.request.get("EnableManagedSpotTraining")))
        types = [c.instance_type for c in rendered.candidates]
        others = types_with_quota(book, usage, need, like=first.instance_type, exclude=types)
        tally.short("job", key, job_rows[0].quota, job_rows[0].needed, others)
    elif run_on_deploy:
        qn = job_rows[chosen_index].quota
        tally.at_once[qn] = tally.at_once.get(qn, 0.0) + need
    if run_on_deploy:
        tally.training_at_once += need
    tally.largest_training = max(tally.largest_training, need)


def add_tuning(tally: Tally, key: str, tuning: TuningSpec, rendered: RenderedJob) -> None:
    """A search needs max_parallel_jobs x instance_count of its job's first candidate."""
    book = tally.book
    first = rendered.candidates[0]
    count = _count(first)
    need = float(tuning.max_parallel_jobs * count)
    avail = book.available(first.quota_name)
    status = status_of(avail, need)
    trials = tuning.max_jobs or 1
    hours = _max_run(first) / 3600
    price, on_demand, spot = training_cost(first.instance_type, trials * count * _max_run(first) / 3600)
    tally.rows.append(
        Row(
            kind="tuning",
            key=key,
            instance_type=first.instance_type,
            count=count,
            quota=first.quota_name,
            needed=need,
            available=avail,
            status=status,
            chosen=True,
            price_per_hour=price,
            cost_on_demand=on_demand,
            cost_spot=spot,
            cost_basis=f"≤ {trials} trials x {hours:g} h",
            note=f"{tuning.max_parallel_jobs} trials at once",
        )
    )
    if status == "short":
        alternatives = tuple(
            c.instance_type
            for c in rendered.candidates[1:]
            if status_of(book.available(c.quota_name), need) == "ok"
        )
        tally.short("tuning", key, first.quota_name, need, alternatives)
    tally.largest_training = max(tally.largest_training, need)


def add_training_total(tally: Tally) -> None:
    """The account's "Number of instances across all training jobs" must hold the jobs started on
    deploy together, and the largest job or search alone."""
    total_need = max(tally.training_at_once, tally.largest_training)
    if not total_need:
        return
    avail = tally.book.available(TRAINING_INSTANCES_TOTAL)
    status = status_of(avail, total_need)
    tally.rows.append(
        Row(
            kind="aggregate",
            key="training",
            instance_type="(all types)",
            count=int(total_need),
            quota=TRAINING_INSTANCES_TOTAL,
            needed=total_need,
            available=avail,
            status=status,
            chosen=True,
            note="jobs started on deploy together, or the largest job or search",
        )
    )
    if status == "short":
        tally.short("aggregate", "training", TRAINING_INSTANCES_TOTAL, total_need)
