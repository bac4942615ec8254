"""`sagestack local tune` with real trials: the objective read from each trial's log with the job's
own regex, ranked, and a learning rate found that beats the default on a small budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagestack.local.training.job import LocalTrainOptions
from sagestack.local.training.metric_series import last_value
from sagestack.local.training.train import run_local_training
from sagestack.local.training.tuning import plot_objective, run_local_tuning

pytestmark = pytest.mark.train

QUICK = """
  quick:
    job: classifier
    objective: {metric: val_accuracy, type: Maximize}
    strategy: STRATEGY
    random_seed: 1
    ranges:
      lr: {continuous: [0.002, 0.02], scaling: Logarithmic}
    max_jobs: 3
    max_parallel_jobs: 2
"""


def _with_search(project, strategy: str = "Random") -> None:
    spec = project.root / "config/sagestack.yaml"
    text = spec.read_text()
    assert "\ntuning:\n" in text
    spec.write_text(text.replace("\ntuning:\n", "\ntuning:" + QUICK.replace("STRATEGY", strategy), 1))


@pytest.mark.parametrize("strategy", ["Random", "Bayesian"])
def test_local_search_beats_the_default_learning_rate(digits_project, tmp_path, strategy):
    _with_search(digits_project, strategy)
    loaded = digits_project.load("dev")
    baseline = run_local_training(
        loaded,
        "classifier",
        LocalTrainOptions(workdir=tmp_path / "baseline", overrides={"epochs": 1}, tracking=False),
    )
    assert baseline.succeeded, baseline.failure
    default_accuracy = baseline.last("val_accuracy")

    tracked = strategy == "Random"  # the local MLflow store is read back once
    trials = run_local_tuning(
        loaded, "quick", overrides={"epochs": 1}, workdir=tmp_path / "search", tracking=tracked
    )
    assert len(trials) == 3 and all(t.status == "Completed" for t in trials)
    best = trials[0]
    assert best.objective == max(t.objective for t in trials)
    assert best.objective > default_accuracy, (best, default_accuracy)
    assert 0.002 <= best.params["lr"] <= 0.02
    # the objective is what the job's regex reads from the trial's own log
    log = (best.workdir / "logs" / "algo-1.log").read_text()
    assert last_value(log.splitlines(), r"val_accuracy=([0-9.]+)") == best.objective
    # SageMaker adds the objective to each trial's hyperparameters (raw, not JSON); the toolkit keeps
    # it from the script's arguments
    request = json.loads((best.workdir / "request.json").read_text())
    assert request["HyperParameters"]["_tuning_objective_metric"] == "val_accuracy"
    host = best.workdir / "hosts" / "algo-1" / "input" / "config" / "hyperparameters.json"
    assert json.loads(host.read_text())["_tuning_objective_metric"] == "val_accuracy"
    assert "_tuning_objective_metric" not in log
    if not tracked:
        return
    # every trial is a run in the job's experiment of the local MLflow store, tagged with its trial
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{digits_project.root}/.sagestack/local/dev/mlflow.db")
    experiment = client.get_experiment_by_name("digits-dev-classifier")
    runs = client.search_runs([experiment.experiment_id], filter_string="tags.`sagestack:tuning` = 'quick'")
    assert len(runs) == 3 and {r.info.status for r in runs} == {"FINISHED"}
    by_trial = {int(r.data.tags["sagestack:trial"]): r for r in runs}
    for t in trials:
        run = by_trial[t.number]
        assert float(run.data.params["lr"]) == pytest.approx(t.params["lr"])
        assert run.data.metrics["val_accuracy"] == pytest.approx(t.objective, abs=1e-6)
    png = plot_objective(trials, loaded.spec.tuning["quick"], tmp_path / "objective.png")
    assert png is not None and png.stat().st_size > 10_000


def test_objective_regex_that_matches_nothing_fails_the_trial(digits_project, tmp_path):
    _with_search(digits_project)
    spec = digits_project.root / "config/sagestack.yaml"
    spec.write_text(
        spec.read_text().replace(
            "val_accuracy: 'val_accuracy=([0-9.]+)'", "val_accuracy: 'valacc=([0-9.]+)'", 1
        )
    )
    trials = run_local_tuning(
        digits_project.load("dev"),
        "quick",
        budget=1,
        overrides={"epochs": 1},
        workdir=tmp_path / "search",
        tracking=False,
    )
    assert [t.status for t in trials] == ["Failed"]
    assert trials[0].failure == "no 'val_accuracy' in the log"


def test_local_tune_json_is_one_document_on_stdout_and_a_set_typo_warns_once(digits_project):
    """`local tune --json`: stdout holds the ranked trials and nothing else (the trials' progress
    and the --set warning go to stderr); --set batchsize (for batch_size_per_device) is named."""
    import json

    from typer.testing import CliRunner

    from sagestack.cli import app

    _with_search(digits_project)
    spec = digits_project.root / "config/sagestack.yaml"  # --set wins over a static hyperparameter
    spec.write_text(
        spec.read_text().replace(
            "    max_jobs: 3\n", "    max_jobs: 3\n    static_hyperparameters: {epochs: 4}\n", 1
        )
    )
    args = ["local", "tune", "quick", "--env", "dev", "--root", str(digits_project.root), "--max-jobs", "2"]
    done = CliRunner().invoke(app, [*args, "--set", "epochs=1", "--set", "batch_size_per_devic=64", "--json"])
    assert done.exit_code == 0, (done.stdout, done.stderr)
    document = json.loads(done.stdout)  # the whole of stdout is one document
    assert document["objective"] == {"metric": "val_accuracy", "type": "Maximize"}
    trials = document["trials"]
    assert [t["rank"] for t in trials] == [1, 2]
    assert trials[0]["objective"] >= trials[1]["objective"]
    assert set(trials[0]) == {"rank", "trial", "params", "objective", "status", "failure", "workdir"}
    assert 0.002 <= trials[0]["params"]["lr"] <= 0.02 and trials[0]["status"] == "Completed"
    assert (Path(trials[0]["workdir"]) / "model").is_dir()
    sent = json.loads(
        (Path(trials[0]["workdir"]) / "hosts/algo-1/input/config/hyperparameters.json").read_text()
    )
    assert json.loads(sent["epochs"]) == 1, sent
    assert document["plot"].endswith("objective.png")
    warning = (
        "warning: --set batch_size_per_devic: the job defines no hyperparameter 'batch_size_per_devic' "
        "(did you mean 'batch_size_per_device'?)"
    )
    assert done.stderr.count(warning) == 1, done.stderr
    assert "--set epochs" not in done.stderr  # a key the job defines
