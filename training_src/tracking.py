"""MLflow tracking for train.py: parameters, metrics per logged step and the model, from the
leader process, when MLFLOW_TRACKING_URI is set (SageMaker's MlflowConfig and `sagestack local
train` set it). Tracking never fails training: without the MLflow client, or when the server does
not answer, the job trains on and says why it logs nothing.

Run names follow the training job (MLFLOW_RUN_NAME, else the job's name), so a spot restart or a
local `--interrupt-at` rerun continues the run it interrupted instead of starting another. A restart
replays the steps between its checkpoint and the interruption (bitwise the same, since resuming is);
what the run already holds for a step is not logged again, so each metric's history stays one value
per step, in order."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_ACTIVE: list[Tracker] = []  # the run a failure must end (train.main ends it with end_active)


def end_active(failed: bool) -> None:
    while _ACTIVE:
        _ACTIVE.pop().end(failed=failed)


class Tracker:
    def __init__(
        self, mlflow: Any = None, run_id: str | None = None, logged: dict[str, int] | None = None
    ) -> None:
        self._mlflow = mlflow
        self.run_id = run_id
        self._logged = dict(logged or {})  # metric -> the last step the run already holds
        if mlflow is not None:
            _ACTIVE.append(self)

    @property
    def active(self) -> bool:
        return self._mlflow is not None

    @classmethod
    def start(cls, leader: bool, params: dict[str, Any], log: Any = print) -> Tracker:
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not leader or not uri:
            return cls()
        try:
            import mlflow
        except ImportError:
            log("tracking: MLFLOW_TRACKING_URI is set but the mlflow package is not installed; not logging")
            return cls()
        try:
            mlflow.set_tracking_uri(uri)
            experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or "sagestack"
            mlflow.set_experiment(experiment)
            name = run_name()
            run = _unfinished_run(mlflow, experiment, name)
            active = mlflow.start_run(run_id=run, run_name=None if run else name)
            tags = json.loads(os.environ.get("SAGESTACK_MLFLOW_TAGS", "{}"))
            if tags:
                mlflow.set_tags(tags)
            if run is None:
                mlflow.log_params({k: _param(v) for k, v in sorted(params.items())})
            log(f"tracking: MLflow run {active.info.run_id} ({name}) in experiment '{experiment}'")
            return cls(mlflow, active.info.run_id, _logged_steps(mlflow, run) if run else None)
        except Exception as e:  # a tracking server that does not answer must not stop training
            log(f"tracking: MLflow at {uri} unavailable ({type(e).__name__}: {e}); not logging")
            return cls()

    def metrics(self, values: dict[str, float], step: int) -> None:
        if self._mlflow is None:
            return
        values = {k: v for k, v in values.items() if step > self._logged.get(k, -1)}
        if not values:
            return
        try:
            self._mlflow.log_metrics(values, step=step)
        except Exception as e:
            print(f"tracking: could not log metrics at step {step} ({e})", flush=True)

    def model(self, folder: Path) -> None:
        """The saved model's files (TorchScript, state dict, model info) as the run's model/ artifacts."""
        if self._mlflow is None:
            return
        try:
            for name in ("model.pt", "model_info.json"):
                if (folder / name).exists():
                    self._mlflow.log_artifact(str(folder / name), artifact_path="model")
        except Exception as e:
            print(f"tracking: could not log the model ({e})", flush=True)

    def end(self, failed: bool = False) -> None:
        if self._mlflow is None:
            return
        try:
            self._mlflow.end_run(status="FAILED" if failed else "FINISHED")
        except Exception as e:
            print(f"tracking: could not end the run ({e})", flush=True)
        self._mlflow = None
        if self in _ACTIVE:
            _ACTIVE.remove(self)


def run_name() -> str:
    """MLFLOW_RUN_NAME, else the training job's name (SageMaker's TRAINING_JOB_NAME, or the
    toolkit's SM_TRAINING_ENV job_name), else 'train'."""
    explicit = os.environ.get("MLFLOW_RUN_NAME") or os.environ.get("TRAINING_JOB_NAME")
    if explicit:
        return explicit
    try:
        return str(json.loads(os.environ.get("SM_TRAINING_ENV", "{}")).get("job_name") or "train")
    except ValueError:
        return "train"


def _unfinished_run(mlflow: Any, experiment: str, name: str) -> str | None:
    """The run of this name still RUNNING — its process was killed (a spot reclaim, an interrupt)
    and this is its restart — else None (a finished or failed run is not continued)."""
    found = mlflow.search_runs(
        experiment_names=[experiment],
        filter_string=f"attributes.run_name = '{name}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
        output_format="list",
    )
    if found and found[0].info.status == "RUNNING":
        return str(found[0].info.run_id)
    return None


def _logged_steps(mlflow: Any, run_id: str) -> dict[str, int]:
    """The last step of each metric the interrupted run already logged."""
    client = mlflow.MlflowClient()
    return {
        key: max(m.step for m in history)
        for key in client.get_run(run_id).data.metrics
        if (history := client.get_metric_history(run_id, key))
    }


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:6000]
