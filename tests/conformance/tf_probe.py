"""The TensorFlow conformance tier's entry point: records what the script was given, then exercises
the distribution TF_CONFIG describes.

Writes output/data/probe-<rank>.json with its arguments, working directory and environment first,
then adds what it did:
- a `worker`-only cluster (MultiWorkerMirroredStrategy): a tiny Keras model trained under the
  strategy, every worker taking part in each all-reduce (`mwms`: replicas in sync, losses, weights);
- a cluster with `ps` tasks (parameter servers): a constant evaluated on every ps task through a
  session whose target is that task (`ps`: task -> device and value); the master then holds its
  own address (:2222) open until every worker has said it is done, as a TF1 master holds its
  server, so no host's ps stops while another still uses it;
- otherwise nothing more.
"""

import json
import os
import socket
import sys
import time
from pathlib import Path

rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("RANK") or "0"
out = Path(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
out.mkdir(parents=True, exist_ok=True)
record = {"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}


def save() -> None:
    (out / f"probe-{rank}.json").write_text(json.dumps(record, indent=1, sort_keys=True))


save()
tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
cluster = tf_config.get("cluster", {})
task = tf_config.get("task", {})


def mwms_fit() -> dict:
    """A Keras model trained under the strategy by a custom loop (strategy.run, the optimizer
    all-reducing the gradients). Not model.fit: Keras 3 (3.15.1 here) fails in fit under a
    multi-worker MultiWorkerMirroredStrategy (Trainer._maybe_symbolic_build calls strategy.reduce
    on the (x, y) batch, a nest, which CollectiveAllReduceStrategy cannot reduce:
    keras-team/keras#20585)."""
    import keras
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, kernel_initializer="zeros")])
        optimizer = keras.optimizers.SGD(0.05)
    x = np.arange(64 * 4, dtype="float32").reshape(64, 4) / 256.0
    y = x.sum(axis=1, keepdims=True)
    global_batch = 16
    batches = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)
    )

    @tf.function
    def step(xb, yb):
        def replica(xb, yb):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(model(xb, training=True) - yb)) / global_batch
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return strategy.reduce("SUM", strategy.run(replica, (xb, yb)), axis=None)

    losses = []
    for _ in range(2):
        losses.append(sum(float(step(xb, yb)) for xb, yb in batches))
    return {
        "num_replicas_in_sync": strategy.num_replicas_in_sync,
        "loss": losses,
        "weights": [w.tolist() for w in model.get_weights()],
    }


def ps_check() -> dict:
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    seen = {}
    for index, address in enumerate(cluster["ps"]):
        graph = tf.Graph()
        with graph.as_default():
            with tf.device(f"/job:ps/task:{index}"):
                value = tf.constant(40) + 2
            config = tf.compat.v1.ConfigProto(device_filters=[f"/job:ps/task:{index}"])
            with tf.compat.v1.Session(f"grpc://{address}", config=config) as session:
                result = session.run(value)
        seen[address] = {"device": value.device, "value": int(result)}
    return seen


def master_waits_for_workers() -> None:
    """Hold the master's address until every worker has connected and said `done` (others, such as
    the toolkit's curl, are hung up on)."""
    port = int(cluster["master"][0].rsplit(":", 1)[1])
    waiting = len(cluster.get("worker", []))
    with socket.create_server(("", port)) as server:
        server.settimeout(240)
        while waiting:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(5)
                try:
                    if conn.recv(16) == b"done":
                        waiting -= 1
                except OSError:
                    pass


def worker_tells_master() -> None:
    host, port = cluster["master"][0].rsplit(":", 1)
    for _ in range(600):
        try:
            with socket.create_connection((host, int(port)), timeout=5) as conn:
                conn.sendall(b"done")
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the master {cluster['master'][0]} never listened")


if cluster.get("ps"):
    record["ps"] = ps_check()
    save()
    if task.get("type") == "master":
        master_waits_for_workers()
    elif task.get("type") == "worker":
        worker_tells_master()
elif cluster.get("worker"):
    record["mwms"] = mwms_fit()
    save()
print(f"probe {rank}: done", flush=True)
