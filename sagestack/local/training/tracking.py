"""The local MLflow store: `sagestack local train` / `local tune` of a project with tracking.mlflow
log each run to .sagestack/local/<env>/mlflow.db (SQLite, MLflow's own default backend) with
artifacts beside it, in the experiment the cloud uses (Names.mlflow_experiment), so `mlflow ui
--backend-store-uri sqlite:///…/mlflow.db` shows local trials as the tracking server shows cloud ones.

The store and the experiment are made here, once, before any training process starts (several
trials at once must not race to create the schema); the processes only log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagestack.core.names import Names
from sagestack.local.pasteable import program, shown_path
from sagestack.local.private import make_private, private_dir, write_private_bytes
from sagestack.project.loader import LoadedSpec


@dataclass(frozen=True)
class LocalStore:
    folder: Path
    experiment: str

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.folder / 'mlflow.db'}"

    @property
    def artifacts(self) -> Path:
        return self.folder / "mlartifacts"

    def environment(self, tags: dict[str, str] | None = None) -> dict[str, str]:
        """What the training processes get: where to log, and in which experiment."""
        import json

        env = {"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_EXPERIMENT_NAME": self.experiment}
        if tags:
            env["SAGESTACK_MLFLOW_TAGS"] = json.dumps(tags, sort_keys=True)
        return env

    def ui_hint(self, cwd: Path | None = None) -> str:
        """The command that shows this store in MLflow's UI, as it works pasted in `cwd`."""
        import shlex

        mlflow = program("mlflow")
        if mlflow is None:  # the client can log without it; the UI needs the full package
            return "the runs' UI needs MLflow's full package: pip install 'sagestack[train]'"
        store = shlex.quote(f"sqlite:///{shown_path(self.folder / 'mlflow.db', cwd)}")
        return f"{mlflow} ui --backend-store-uri {store}"


class TrackingUnavailable(Exception):
    """tracking.mlflow is on but this environment has no MLflow client."""


def local_store(loaded: LoadedSpec, job_key: str) -> LocalStore | None:
    """The store a job of this project logs to locally (None: tracking is off)."""
    if loaded.spec.tracking.mlflow is None:
        return None
    env = loaded.env or "project"
    folder = loaded.root / ".sagestack" / "local" / env
    return LocalStore(folder, Names(loaded.spec.project, env).mlflow_experiment(job_key))


def prepare(store: LocalStore) -> None:
    """Create the database (MLflow's schema) and the experiment, with its artifacts in the store's
    folder. TrackingUnavailable when mlflow is not installed."""
    import logging
    import os

    # The store is the user's alone (its folder 0700, the database 0600; SQLite gives its journal
    # the database's mode), whatever the umask; a store made before is narrowed here.
    private_dir(store.folder, narrow_existing=True)
    private_dir(store.artifacts, narrow_existing=True)
    database = store.folder / "mlflow.db"
    if database.exists():
        make_private(database)
    else:
        write_private_bytes(database, b"")  # an empty file is an empty SQLite database
    if _experiment_exists(store):
        return  # the common case, answered without importing mlflow (seconds)

    try:
        import mlflow
    except ImportError as e:
        raise TrackingUnavailable(
            "tracking.mlflow is on but the mlflow package is not installed here (pip install "
            "'sagestack[train]'); training goes on without logging"
        ) from e
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = mlflow.MlflowClient(tracking_uri=store.uri)
    if client.get_experiment_by_name(store.experiment) is None:
        client.create_experiment(store.experiment, artifact_location=store.artifacts.resolve().as_uri())


def _experiment_exists(store: LocalStore) -> bool:
    import sqlite3

    path = store.folder / "mlflow.db"
    if not path.exists():
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            row = db.execute(
                "SELECT 1 FROM experiments WHERE name = ? AND lifecycle_stage = 'active'", (store.experiment,)
            ).fetchone()
    except sqlite3.Error:
        return False
    return row is not None
