"""A Keras training script in the SageMaker TensorFlow container's contract, written by
`sagestack init --framework tensorflow`.

The container (and `sagestack local train`) runs `python train.py --epochs 5 --lr 0.01 ...`: the
job's hyperparameters become arguments. SM_MODEL_DIR is where the model must be saved (SageMaker
uploads it as model.tar.gz): a SavedModel in SM_MODEL_DIR/1/, the numbered version folder the
TensorFlow Serving container loads. SM_CHANNEL_<NAME> holds each input channel's data. The job's
metric_definitions (regexes such as `val_accuracy=([0-9.]+)`) read the values from the lines it
prints, in the cloud and in `sagestack local train` alike.

Distribution follows what the container sets up from the job's `distribution:`:
- multi_worker_mirrored_strategy: TF_CONFIG names a cluster of workers; every host trains one
  model with MultiWorkerMirroredStrategy (worker 0 is the chief).
- parameter_server: TF_CONFIG names master, ps and worker tasks. Keras 3's model.fit cannot train
  with ParameterServerStrategy (it has no ClusterCoordinator support, and that strategy refuses a
  cluster with the container's `master` task), so each host trains its own copy; the master's is
  saved.
- mpi: Open MPI starts one process per GPU; Horovod (horovod.tensorflow.keras) averages gradients.
- none: MirroredStrategy over this host's GPUs (none or one: TensorFlow's default strategy).
The learning rate is scaled with the number of replicas (the global batch grows with them) and
warmed up over the first epoch when there is more than one.

Checkpoints: at the end of each epoch the training state (weights, optimizer) is backed up to the
job's checkpoint folder, which SageMaker syncs to S3; a run that finds a backup there (a spot
reclaim, a restart) resumes after the last epoch it holds. Only the chief writes there: under
MultiWorkerMirroredStrategy every other worker writes to a folder of its own (TensorFlow's rule
for multi-worker checkpoints), and all of them read the chief's.

Replace the data and the model with yours; keep the contract.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

BACKUP_FOLDER = "keras_backup"  # inside the checkpoint folder: the chief's backup, read by all


@dataclass
class World:
    """How this process trains: the strategy, how many replicas share a step, whether it is the
    chief (the one that writes the model and the shared backup)."""

    kind: str
    strategy: Any
    replicas: int
    chief: bool
    task: str
    workers: int = 1  # the processes MultiWorkerMirroredStrategy spans
    hvd: Any = None  # horovod.tensorflow.keras under MPI


def make_world() -> World:
    """The strategy for what the container set up. Call it first: MultiWorkerMirroredStrategy must
    be created before any other TensorFlow operation runs."""
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster, task = tf_config.get("cluster", {}), tf_config.get("task", {})
    task_type, index = task.get("type", "worker"), int(task.get("index", 0))
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        return horovod_world()
    if "ps" in cluster:
        print(
            "parameter_server: Keras 3's model.fit cannot train with ParameterServerStrategy "
            f"(no ClusterCoordinator support), so this host ({task_type} {index}) trains its own "
            "copy of the model and the master's is saved; use multi_worker_mirrored_strategy to "
            "train one model on all hosts",
            flush=True,
        )
        strategy = local_strategy()
        chief = task_type in ("master", "chief")
        return World(
            "parameter_server", strategy, strategy.num_replicas_in_sync, chief, f"{task_type}:{index}"
        )
    if cluster.get("worker"):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG
        chief = task_type == "chief" or (task_type == "worker" and index == 0 and "chief" not in cluster)
        return World(
            "multi_worker_mirrored",
            strategy,
            strategy.num_replicas_in_sync,
            chief,
            f"{task_type}:{index}",
            len(cluster["worker"]) + len(cluster.get("chief", [])),
        )
    strategy = local_strategy()
    return World("local", strategy, strategy.num_replicas_in_sync, True, "worker:0")


def local_strategy() -> Any:
    gpus = tf.config.list_physical_devices("GPU")
    return tf.distribute.MirroredStrategy() if len(gpus) > 1 else tf.distribute.get_strategy()


def horovod_world() -> World:
    try:
        import horovod.tensorflow.keras as hvd
    except ImportError as e:
        sys.exit(
            f"error: this job runs under MPI (OMPI_COMM_WORLD_SIZE={os.environ['OMPI_COMM_WORLD_SIZE']}) "
            f"but Horovod cannot be imported ({e}): use an image with horovod.tensorflow.keras, or "
            "distribution: {multi_worker_mirrored_strategy: {}}"
        )
    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:  # one GPU per process
        tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
    return World(
        "horovod", tf.distribute.get_strategy(), hvd.size(), hvd.rank() == 0, f"rank:{hvd.rank()}", hvd
    )


def load_data(channel: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """The `train` channel's .npz files (arrays `x`: samples x features, `y`: class ids) when the
    job has one, else scikit-learn's bundled digits (no download). 20% is held out to validate."""
    if channel:
        files = sorted(Path(channel).glob("**/*.npz"))
        if not files:
            sys.exit(f"error: the train channel ({channel}) holds no .npz file with arrays x and y")
        parts = [np.load(f) for f in files]
        x = np.concatenate([p["x"] for p in parts]).astype("float32")
        y = np.concatenate([p["y"] for p in parts]).astype("int64")
        source = f"channel train ({len(files)} files)"
    else:
        from sklearn.datasets import load_digits

        x, y = load_digits(return_X_y=True)
        x, y, source = (x / 16.0).astype("float32"), y.astype("int64"), "digits"
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    split = int(len(x) * 0.8)
    return x[:split], y[:split], x[split:], y[split:], source


def report(**values: float | int) -> None:
    """One progress line. SageMaker applies the job's metric_definitions to every line of the log,
    so `train_loss=0.41` here becomes a CloudWatch datapoint in the cloud as it does locally. The
    `metrics:` prefix and step / total_steps are for `sagestack local train` alone (its progress
    bar: step of total and an ETA): they are not metric_definitions, so SageMaker publishes no
    'step' metric (it allows 40 definitions per job) and the container sees an ordinary line."""
    pairs = (f"{k}={v}" if isinstance(v, int) else f"{k}={v:.4f}" for k, v in values.items())
    print("metrics: " + " ".join(pairs), flush=True)


class Report(keras.callbacks.Callback):
    """Prints the `metrics:` lines: every 5 steps, and each epoch's end with its validation."""

    def __init__(self, steps_per_epoch: int, epochs: int) -> None:
        super().__init__()
        self.steps_per_epoch, self.total_steps = steps_per_epoch, steps_per_epoch * epochs
        self.epoch = 0
        self.last: dict[str, float] = {}

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.epoch = epoch

    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        step = self.epoch * self.steps_per_epoch + batch + 1
        if step % 5 == 0 and batch + 1 < self.steps_per_epoch:  # the epoch's last step reports below
            loss = float((logs or {})["loss"])
            report(epoch=self.epoch, step=step, total_steps=self.total_steps, train_loss=loss)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = logs or {}
        self.last = {
            "train_loss": float(logs["loss"]),
            "val_loss": float(logs["val_loss"]),
            "val_accuracy": float(logs["val_accuracy"]),
        }
        step = (epoch + 1) * self.steps_per_epoch
        report(epoch=epoch, step=step, total_steps=self.total_steps, **self.last)


class Backup(keras.callbacks.Callback):
    """keras.callbacks.BackupAndRestore's job, with TensorFlow's multi-worker rule (Keras 3's own
    callback reads and writes one folder on every worker): every worker saves at each epoch's end
    (saving may need all of them), the chief into the shared folder, the others into their own.
    Each save is whole or absent: written in `staging` (beside the checkpoint folder, so SageMaker
    never uploads half a file), renamed into place, then backup.json names it."""

    def __init__(self, write_dir: Path, staging: Path) -> None:
        super().__init__()
        self.write_dir, self.staging = write_dir, staging

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self.write_dir.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        weights = f"epoch-{epoch + 1:04d}.weights.h5"
        partial = self.staging / weights
        self.model.save_weights(partial)  # the model's and the optimizer's variables
        os.replace(partial, self.write_dir / weights)
        state = self.staging / "backup.json"
        state.write_text(json.dumps({"epochs_done": epoch + 1, "weights": weights}))
        os.replace(state, self.write_dir / "backup.json")
        for old in self.write_dir.glob("epoch-*.weights.h5"):
            if old.name != weights:
                old.unlink()


def backed_up_epochs(backup_dir: Path) -> int:
    """The epochs the chief's newest backup holds (0: none)."""
    state_file = backup_dir / "backup.json"
    return int(json.loads(state_file.read_text())["epochs_done"]) if state_file.is_file() else 0


def restore(model: keras.Model, backup_dir: Path, world: World) -> None:
    """Loads the chief's newest backup into the model and its optimizer."""
    state = json.loads((backup_dir / "backup.json").read_text())
    with world.strategy.scope():  # the optimizer's variables must exist to be loaded, mirrored
        model.optimizer.build(model.trainable_variables)
        model.load_weights(backup_dir / state["weights"])


def agree_on_start(world: World, start_epoch: int) -> None:
    """Every worker of MultiWorkerMirroredStrategy must resume from the same epoch, or the one that
    runs out of epochs first leaves the others waiting on it. They read the chief's backup, so they
    agree when the checkpoint folder is shared (SageMaker syncs it to S3 and gives every host the
    same copy): if not, stop here with the reason rather than hang."""
    if world.workers < 2:
        return

    @tf.function
    def across_workers() -> Any:  # the mean of the epoch and of its square over all replicas
        own = world.strategy.run(lambda: tf.constant([float(start_epoch), float(start_epoch) ** 2]))
        return world.strategy.reduce("MEAN", own, axis=None)

    mean, mean_square = across_workers().numpy()
    if mean_square - mean**2 > 1e-6:
        sys.exit(
            f"error: the workers found different backups (this one: {start_epoch} epochs done) in "
            f"{checkpoint_dir() / BACKUP_FOLDER}: every host must see the chief's; give the job a "
            "`checkpoint:` (SageMaker syncs it for every host), or start without backups"
        )


class Warmup(keras.optimizers.schedules.LearningRateSchedule):
    """From the single-replica rate to the scaled one over the first `steps`, then constant."""

    def __init__(self, base: float, peak: float, steps: int) -> None:
        self.base, self.peak, self.steps = base, peak, max(1, steps)

    def __call__(self, step: Any) -> Any:
        done = keras.ops.minimum(1.0, (keras.ops.cast(step, "float32") + 1.0) / self.steps)
        return self.base + (self.peak - self.base) * done

    def get_config(self) -> dict[str, Any]:
        return {"base": self.base, "peak": self.peak, "steps": self.steps}


class Model(keras.Model):
    """keras.Model, made to train under MultiWorkerMirroredStrategy with more than one worker,
    which Keras 3's model.fit does not do as it comes (keras-team/keras#20585): it reduces the first
    (x, y) batch as one nest before the first step, and each step's scalar logs along an axis 0
    they lack, and that strategy can do neither. The first batch only gives the shapes that build
    the loss and metrics, so zeros of the same shapes are given instead; the logs get that axis.
    With one worker (or none) Keras runs as it comes."""

    multi_worker = False

    def _maybe_symbolic_build(self, iterator: Any = None, data_batch: Any = None) -> None:
        if self.multi_worker and iterator is not None and data_batch is None:
            data_batch = (np.zeros((1, self.input_shape[1]), "float32"), np.zeros((1,), "int64"))
            iterator = None
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def train_step(self, data: Any) -> Any:
        logs = super().train_step(data)
        return {k: tf.reshape(v, [1]) for k, v in logs.items()} if self.multi_worker else logs

    def test_step(self, data: Any) -> Any:
        logs = super().test_step(data)
        return {k: tf.reshape(v, [1]) for k, v in logs.items()} if self.multi_worker else logs


def build_model(features: int, classes: int, learning_rate: Any, world: World) -> keras.Model:
    with world.strategy.scope():
        inputs = keras.Input(shape=(features,), name="features")
        hidden = keras.layers.Dense(64, activation="relu")(inputs)
        outputs = keras.layers.Dense(classes, activation="softmax", name="probabilities")(hidden)
        model = Model(inputs, outputs)
        model.multi_worker = world.workers > 1
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate)
        if world.hvd is not None:
            optimizer = world.hvd.DistributedOptimizer(optimizer)
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def batches(x: np.ndarray, y: np.ndarray, batch: int, world: World, train: bool) -> tf.data.Dataset:
    """Global batches; a strategy splits each across its replicas (each worker reads its share)."""
    data = tf.data.Dataset.from_tensor_slices((x, y))
    if world.hvd is not None:  # Horovod: each process reads its own shard, in per-process batches
        data = data.shard(world.hvd.size(), world.hvd.rank())
    if train:
        data = data.shuffle(len(x), seed=0, reshuffle_each_iteration=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.batch(batch, drop_remainder=train).with_options(options)


def checkpoint_dir() -> Path:
    """The job's checkpoint folder: CheckpointConfig.LocalPath, which the request passes as
    SAGESTACK_CHECKPOINT_DIR; else /opt/ml/checkpoints (under SAGEMAKER_BASE_DIR when set)."""
    base = Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    return Path(os.environ.get("SAGESTACK_CHECKPOINT_DIR", base / "checkpoints"))


def backup_folders(world: World) -> tuple[Path, Path, Path]:
    """(the chief's backup, read by all; where this process writes its own; where its writes in
    progress live). The chief's live in the checkpoint folder, its writes in progress beside it
    (same file system, outside what SageMaker uploads); another worker's in a folder of its own."""
    checkpoints = checkpoint_dir()
    shared = checkpoints / BACKUP_FOLDER
    if world.chief:
        real = checkpoints.resolve()
        return shared, shared, real.parent / f".{real.name}.partial"
    own = Path(tempfile.mkdtemp(prefix=f"keras_backup-{world.task.replace(':', '')}-"))
    return shared, own, own / ".partial"


def main() -> None:
    world = make_world()  # first: see make_world
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.01, help="for one replica; scaled with them")
    parser.add_argument("--batch_size", type=int, default=64, help="per replica")
    parser.add_argument(
        "--warmup_epochs",
        type=float,
        default=1.0,
        help="with several replicas: epochs to reach the scaled lr",
    )
    # The SDK's TensorFlow estimator passes --model_dir: an s3:// URI (or /opt/ml/model under MPI)
    # meant for TF1 estimators' checkpoints. This script does not use it: its SavedModel goes to
    # SM_MODEL_DIR, which SageMaker uploads, and its backups to the checkpoint folder.
    parser.add_argument("--model_dir", default=None)
    args, unknown = parser.parse_known_args()
    if unknown:
        print(f"warning: ignoring unknown arguments {unknown}", flush=True)
    model_dir = Path(os.environ.get("SM_MODEL_DIR", "model"))
    output_dir = Path(os.environ.get("SM_OUTPUT_DATA_DIR", "output"))

    keras.utils.set_random_seed(0)
    x_train, y_train, x_val, y_val, source = load_data(os.environ.get("SM_CHANNEL_TRAIN"))
    global_batch = args.batch_size * world.replicas
    # what one step reads: a global batch a strategy splits; under Horovod each process's own batch
    batch, readers = (global_batch, 1) if world.hvd is None else (args.batch_size, world.hvd.size())
    steps_per_epoch = len(x_train) // readers // batch
    if steps_per_epoch < 1:
        sys.exit(f"error: {len(x_train)} training samples make no global batch of {global_batch}")
    peak_lr = args.lr * world.replicas
    warmup = round(steps_per_epoch * args.warmup_epochs) if world.replicas > 1 else 0
    learning_rate = Warmup(args.lr, peak_lr, warmup) if warmup else peak_lr
    model = build_model(x_train.shape[1], int(y_train.max()) + 1, learning_rate, world)

    shared, own, staging = backup_folders(world)
    start_epoch = backed_up_epochs(shared)
    agree_on_start(world, start_epoch)  # before any step that only a resuming worker would take
    if start_epoch:
        restore(model, shared, world)
        print(
            f"resumed from backup at step {start_epoch * steps_per_epoch} "
            f"(epoch {start_epoch} of {args.epochs}): {shared}",
            flush=True,
        )
    print(
        f"training: strategy={world.kind} task={world.task} chief={str(world.chief).lower()} "
        f"workers={world.workers} replicas={world.replicas} global_batch={global_batch} (per replica {args.batch_size}) "
        f"lr={peak_lr:g} (x{world.replicas}) warmup_steps={warmup} "
        f"total_steps={steps_per_epoch * args.epochs} data={source}",
        flush=True,
    )
    callbacks: list[keras.callbacks.Callback] = []
    if world.hvd is not None:  # every process starts from rank 0's variables
        callbacks.append(world.hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    report_callback = Report(steps_per_epoch, args.epochs)
    callbacks += [Backup(own, staging), report_callback]
    model.fit(
        batches(x_train, y_train, batch, world, train=True),
        validation_data=batches(x_val, y_val, batch, world, train=False),
        epochs=args.epochs,
        initial_epoch=start_epoch,
        steps_per_epoch=steps_per_epoch,
        callbacks=callbacks,
        shuffle=False,  # the dataset shuffles itself
        verbose=0,
    )

    # Every worker exports (saving may need all of them); only the chief into SM_MODEL_DIR/1/.
    export_to = model_dir / "1" if world.chief else Path(tempfile.mkdtemp(prefix="keras_export-")) / "1"
    model.export(str(export_to), format="tf_saved_model", verbose=False)
    if world.chief:
        output_dir.mkdir(parents=True, exist_ok=True)
        final = report_callback.last or {}
        (output_dir / "metrics.json").write_text(json.dumps(final))
    else:
        shutil.rmtree(export_to.parent, ignore_errors=True)
    # Trained to the end: the backup has done its job (a finished job's restart trains anew).
    for folder in (own, staging):
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
