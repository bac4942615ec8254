"""`sagestack local tune`: a tuning job's trials on this machine, before paying for them.

Each trial is a `sagestack local train` run of the tuned job with one sample of the ranges; the
objective is read from the trial's log with the job's own metric regex, exactly as SageMaker reads
it. Random and Grid sample exactly as the service does; Bayesian uses optuna's TPE sampler;
Hyperband is sampled at random here (its early stopping needs the service's resource scheduling).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.contract import cpu_count
from sagestack.local.runner import LocalTrainOptions, run_local_training
from sagestack.project.loader import LoadedSpec
from sagestack.tuning.models import RangeSpec, TuningSpec
from sagestack.tuning.request import grid_points, max_jobs


@dataclass
class Trial:
    number: int
    params: dict[str, Any]
    objective: float | None
    status: str  # Completed | Failed
    failure: str | None
    workdir: Path


def _sample_random(ranges: dict[str, RangeSpec], rng: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, r in sorted(ranges.items()):
        if r.categorical is not None:
            out[name] = r.categorical[int(rng.integers(len(r.categorical)))]
            continue
        low, high = r.continuous or r.integer  # type: ignore[misc]
        u = float(rng.random())
        if r.scaling == "Logarithmic":
            value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        elif r.scaling == "ReverseLogarithmic":
            value = 1 - math.exp(math.log(1 - high) + u * (math.log(1 - low) - math.log(1 - high)))
        else:
            value = low + u * (high - low)
        out[name] = round(value) if r.integer is not None else value
    return out


def _optuna_distributions(ranges: dict[str, RangeSpec]) -> dict[str, Any]:
    import optuna

    dists: dict[str, Any] = {}
    for name, r in ranges.items():
        if r.categorical is not None:
            dists[name] = optuna.distributions.CategoricalDistribution(r.categorical)
        elif r.integer is not None:
            dists[name] = optuna.distributions.IntDistribution(
                r.integer[0], r.integer[1], log=r.scaling == "Logarithmic"
            )
        else:
            assert r.continuous is not None
            dists[name] = optuna.distributions.FloatDistribution(
                r.continuous[0], r.continuous[1], log=r.scaling == "Logarithmic"
            )
    return dists


def objective_from_log(text: str, regex: str) -> float | None:
    """The objective as SageMaker takes it: the job's regex over its log, the last match."""
    values = [float(m.group(1)) for m in re.finditer(regex, text)]
    return values[-1] if values else None


def run_local_tuning(
    loaded: LoadedSpec,
    key: str,
    *,
    budget: int | None = None,
    parallel: int | None = None,
    overrides: dict[str, Any] | None = None,
    workdir: Path | None = None,
    on_trial: Callable[[Trial], None] = lambda _: None,
    tracking: bool = True,
) -> list[Trial]:
    spec = loaded.spec
    tuning: TuningSpec = spec.tuning[key]
    job = spec.jobs[tuning.job]
    regex = job.metric_definitions[tuning.objective.metric]
    total = budget or max_jobs(tuning)
    workers = max(1, min(parallel or tuning.max_parallel_jobs, cpu_count(), total))
    threads = max(1, cpu_count() // workers)
    root = workdir or loaded.root / ".sagestack" / "local" / (loaded.env or "project") / f"tune-{key}"
    static = {**(overrides or {}), **tuning.static_hyperparameters}
    maximize = tuning.objective.type == "Maximize"
    asked: dict[int, Any] = {}  # Bayesian: trial number -> optuna trial, told when it finishes

    if tuning.strategy == "Grid":
        points = grid_points(tuning)[:total]
        suggest: Callable[[int], dict[str, Any]] = lambda i: points[i]  # noqa: E731
        total = len(points)
        study = None
    elif tuning.strategy == "Bayesian":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        bayes = optuna.create_study(
            direction="maximize" if maximize else "minimize",
            sampler=optuna.samplers.TPESampler(seed=tuning.random_seed or 0, n_startup_trials=min(4, total)),
        )
        study = bayes
        dists = _optuna_distributions(tuning.ranges)

        def suggest(i: int) -> dict[str, Any]:
            trial = bayes.ask(dists)
            asked[i] = trial
            return dict(trial.params)
    else:  # Random, and Hyperband's sampling
        import numpy as np

        rng = np.random.default_rng(tuning.random_seed or 0)
        samples = [_sample_random(tuning.ranges, rng) for _ in range(total)]
        suggest = lambda i: samples[i]  # noqa: E731
        study = None

    def run_trial(i: int, params: dict[str, Any]) -> Trial:
        trial_dir = root / f"trial-{i:03d}"
        result = run_local_training(
            loaded,
            tuning.job,
            LocalTrainOptions(
                workdir=trial_dir,
                fresh=True,
                overrides={**static, **params},
                threads=threads,
                tracking=tracking,
                tracking_tags={"sagestack:tuning": key, "sagestack:trial": str(i)},
            ),
        )
        log = "\n".join(p.read_text() for p in result.log_files if p.exists())
        value = objective_from_log(log, regex) if result.succeeded else None
        status = "Completed" if value is not None else "Failed"
        failure = result.failure or (
            None if value is not None else f"no '{tuning.objective.metric}' in the log"
        )
        return Trial(i, params, value, status, failure, trial_dir)

    from sagestack.local.tracking import TrackingUnavailable, local_store, prepare

    store = local_store(loaded, tuning.job) if tracking else None
    if store is not None:
        # Once, before trials run side by side (each would otherwise create the schema); without
        # mlflow each trial says so in its log.
        with contextlib.suppress(TrackingUnavailable):
            prepare(store)
    trials: list[Trial] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        next_index = 0
        running: dict[Any, int] = {}
        while next_index < total or running:
            while next_index < total and len(running) < workers:
                params = suggest(next_index)
                running[pool.submit(run_trial, next_index, params)] = next_index
                next_index += 1
            done = next(iter(_wait_first(running)))
            running.pop(done)
            trial = done.result()
            trials.append(trial)
            if study is not None:
                study.tell(
                    asked[trial.number],
                    trial.objective if trial.objective is not None else None,
                    state=None if trial.objective is not None else _failed_state(),
                )
            on_trial(trial)
    ranked = rank(trials, maximize)
    if ranked and ranked[0].objective is not None:
        best = ranked[0]
        # What `sagestack local compile` serves for an endpoint whose model comes from this search.
        (root / "best.json").write_text(
            json.dumps(
                {
                    "trial": best.number,
                    "params": best.params,
                    "objective": best.objective,
                    "model_dir": str(best.workdir / "model"),
                },
                indent=2,
            )
        )
    return ranked


def _wait_first(futures: dict[Any, int]) -> set[Any]:
    from concurrent.futures import FIRST_COMPLETED, wait

    done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
    return done


def _failed_state() -> Any:
    import optuna

    return optuna.trial.TrialState.FAIL


def rank(trials: list[Trial], maximize: bool) -> list[Trial]:
    completed = [t for t in trials if t.objective is not None]
    failed = [t for t in trials if t.objective is None]
    completed.sort(key=lambda t: t.objective, reverse=maximize)  # type: ignore[arg-type,return-value]
    return completed + sorted(failed, key=lambda t: t.number)


def plot_objective(trials: list[Trial], tuning: TuningSpec, path: Path) -> Path | None:
    """A PNG: the objective against each tuned hyperparameter, one panel each."""
    done = [t for t in trials if t.objective is not None]
    if not done:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted(tuning.ranges)
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 4), dpi=110, squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        r = tuning.ranges[name]
        xs = [t.params[name] for t in done]
        ys = [t.objective for t in done]
        if r.categorical is not None:
            labels = [str(v) for v in r.categorical]
            ax.scatter([labels.index(str(x)) for x in xs], ys, color="tab:blue")
            ax.set_xticks(range(len(labels)), labels)
        else:
            ax.scatter(xs, ys, color="tab:blue")
            if r.scaling == "Logarithmic":
                ax.set_xscale("log")
        best = done[0]
        ax.scatter(
            [
                best.params[name]
                if r.categorical is None
                else [str(v) for v in r.categorical].index(str(best.params[name]))
            ],
            [best.objective],
            color="tab:red",
            s=80,
            label="best",
        )
        ax.set_xlabel(name)
        ax.set_ylabel(tuning.objective.metric)
    axes[0][0].legend()
    fig.suptitle(f"{tuning.strategy} search: {tuning.objective.type.lower()} {tuning.objective.metric}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
