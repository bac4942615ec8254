"""`sagestack local tune`: a tuning job's trials on this machine, before paying for them.

Each trial is a `sagestack local train` run of the tuned job with one sample of the ranges; the
objective is read from the trial's log with the job's own metric regex, exactly as SageMaker reads
it (local/training/metric_series.py: the last value of the trial's series, its FinalMetricDataList entry).
Random and Grid sample exactly as the service does; Bayesian uses optuna's TPE sampler;
Hyperband is sampled at random here (its early stopping needs the service's resource scheduling).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.contract import cpu_count
from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.tracking import TrackingUnavailable, local_store, prepare
from sagestack.local.training.train import run_local_training
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


class Search:
    """The strategy's samples: `suggest(i)` gives trial i's hyperparameters, `tell(trial)` reports
    its objective back (Bayesian learns from it; the others sample ahead)."""

    def __init__(self, tuning: TuningSpec, total: int) -> None:
        self.total = total
        self._study: Any = None
        self._asked: dict[int, Any] = {}  # Bayesian: trial number -> optuna trial, told when it finishes
        self._samples: list[dict[str, Any]] = []
        if tuning.strategy == "Grid":
            self._samples = grid_points(tuning)[:total]
            self.total = len(self._samples)
        elif tuning.strategy == "Bayesian":
            import optuna

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            self._study = optuna.create_study(
                direction="maximize" if tuning.objective.type == "Maximize" else "minimize",
                sampler=optuna.samplers.TPESampler(
                    seed=tuning.random_seed or 0, n_startup_trials=min(4, total)
                ),
            )
            self._distributions = _optuna_distributions(tuning.ranges)
        else:  # Random, and Hyperband's sampling
            import numpy as np

            rng = np.random.default_rng(tuning.random_seed or 0)
            self._samples = [_sample_random(tuning.ranges, rng) for _ in range(total)]

    def suggest(self, i: int) -> dict[str, Any]:
        if self._study is None:
            return self._samples[i]
        trial = self._study.ask(self._distributions)
        self._asked[i] = trial
        return dict(trial.params)

    def tell(self, trial: Trial) -> None:
        if self._study is not None:
            self._study.tell(
                self._asked[trial.number],
                trial.objective if trial.objective is not None else None,
                state=None if trial.objective is not None else _failed_state(),
            )


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
    total = budget or max_jobs(tuning)
    workers = max(1, min(parallel or tuning.max_parallel_jobs, cpu_count(), total))
    threads = max(1, cpu_count() // workers)
    root = workdir or loaded.root / ".sagestack" / "local" / (loaded.env or "project") / f"tune-{key}"
    static = {**tuning.static_hyperparameters, **(overrides or {})}  # --set wins, as on local train
    search = Search(tuning, total)

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
                tuning_objective=tuning.objective.metric,
            ),
        )
        # the trial's FinalMetricDataList entry: the job's regex over every line of every host
        value = result.series.last(tuning.objective.metric) if result.succeeded else None
        status = "Completed" if value is not None else "Failed"
        failure = result.failure or (
            None if value is not None else f"no '{tuning.objective.metric}' in the log"
        )
        return Trial(i, params, value, status, failure, trial_dir)

    if tracking:
        _prepare_store(loaded, tuning.job)
    trials = _run_trials(search, workers, run_trial, on_trial)
    ranked = rank(trials, tuning.objective.type == "Maximize")
    if ranked and ranked[0].objective is not None:
        _write_best(root / "best.json", ranked[0])
    return ranked


def _prepare_store(loaded: LoadedSpec, job_key: str) -> None:
    """The local MLflow store, made once before trials run side by side (each would otherwise
    create the schema); without mlflow each trial says so in its log."""

    store = local_store(loaded, job_key)
    if store is not None:
        with contextlib.suppress(TrackingUnavailable):
            prepare(store)


def _run_trials(
    search: Search,
    workers: int,
    run_trial: Callable[[int, dict[str, Any]], Trial],
    on_trial: Callable[[Trial], None],
) -> list[Trial]:
    """Every trial, `workers` at a time; each next one suggested as a slot frees (so a Bayesian
    search learns from every trial finished before it)."""
    trials: list[Trial] = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        next_index = 0
        running: dict[Any, int] = {}
        while next_index < search.total or running:
            while next_index < search.total and len(running) < workers:
                params = search.suggest(next_index)
                running[pool.submit(run_trial, next_index, params)] = next_index
                next_index += 1
            done = next(iter(_wait_first(running)))
            running.pop(done)
            trial = done.result()
            trials.append(trial)
            search.tell(trial)
            on_trial(trial)
    return trials


def _write_best(path: Path, best: Trial) -> None:
    """What `sagestack local compile` serves for an endpoint whose model comes from this search."""
    path.write_text(
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


def log_ticks(low: float, high: float, most: int = 5) -> list[float]:
    """A log axis's ticks from low to high, few enough to read: 1-2-5 of each decade, thinned to
    the powers of ten (then every n-th of them) when there are more than `most`."""
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    ticks: list[float] = []
    for subs in ((1, 2, 5), (1,)):
        candidates = (float(f"{m}e{e}") for e in decades for m in subs)  # 2e-3 exactly, not 2 * 10.0**-3
        ticks = [x for x in candidates if low * (1 - 1e-9) <= x <= high * (1 + 1e-9)]
        if len(ticks) <= most:
            break
    if len(ticks) > most:
        ticks = ticks[:: math.ceil(len(ticks) / most)]
    return ticks or [low, high]


def objective_figure(trials: list[Trial], tuning: TuningSpec) -> Any:
    """The objective against each tuned hyperparameter, one panel each (None: no trial finished)."""
    done = [t for t in trials if t.objective is not None]
    if not done:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    names = sorted(tuning.ranges)
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 4), dpi=110, squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        r = tuning.ranges[name]
        labels = [str(v) for v in r.categorical] if r.categorical is not None else []

        def x_of(value: Any, labels: list[str] = labels) -> Any:
            return labels.index(str(value)) if labels else value

        ax.scatter(
            [x_of(t.params[name]) for t in done], [t.objective for t in done], color="tab:blue", label="trial"
        )
        best = done[0]
        ax.scatter([x_of(best.params[name])], [best.objective], color="tab:red", s=80, label="best")
        if labels:
            ax.set_xticks(range(len(labels)), labels)
        elif r.scaling == "Logarithmic":
            low, high = r.continuous or r.integer  # type: ignore[misc]
            ax.set_xscale("log")
            ax.set_xlim(low / 1.15, high * 1.15)
            ax.xaxis.set_major_locator(FixedLocator(log_ticks(low, high)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
            ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(name + (" (log scale)" if r.scaling == "Logarithmic" else ""))
        ax.set_ylabel(tuning.objective.metric)
    axes[0][0].legend()
    fig.suptitle(f"{tuning.strategy} search: {tuning.objective.type.lower()} {tuning.objective.metric}")
    fig.tight_layout()
    return fig


def plot_objective(trials: list[Trial], tuning: TuningSpec, path: Path) -> Path | None:
    """objective.png (objective_figure), or None when no trial finished."""
    fig = objective_figure(trials, tuning)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
