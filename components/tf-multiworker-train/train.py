"""Keras training with tf.distribute.MultiWorkerMirroredStrategy, one process per worker.

Each worker reads its place in the cluster from TF_CONFIG (which ``distcomp run``, a TFJob
and Azure ML's TensorFlow distribution set), builds the same synthetic data set from
``--seed`` (an XOR of two random half-spaces: a hidden layer is needed to learn it) and feeds
its share of every global batch (tf.data auto-sharding by DATA). A Keras model and optimizer
created in the strategy's scope train in a custom loop (``strategy.run``): the optimizer
all-reduces the gradients across the workers at every step. Keras 3's ``Model.fit`` cannot
start under this strategy (keras-team/keras#20585: its first batch is reduced as a tuple),
which the loop sidesteps.

Only the chief logs: ``distcomp.runtime`` sends from rank 0, which for TensorFlow is the
chief, or worker 0 when the cluster has no chief, the same task TensorFlow treats as the chief.
Saving follows TensorFlow's multi-worker rules: every worker calls ``model.save``, the chief
into ``--out``, the others into a temporary folder they delete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from distcomp import runtime

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

MODEL_FILE = "model.keras"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="MultiWorkerMirroredStrategy training of a Keras MLP")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="per worker; the global batch is n times it")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--units", type=int, default=32, help="hidden units")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the chief writes the model here")
    return parser.parse_args()


def xor_of_halfspaces(samples: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Label 1 where exactly one of two random hyperplanes has the point on its positive side."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, features)).astype("float32")
    planes = rng.standard_normal((features, 2)).astype("float32")
    sides = (x @ planes) > 0
    return x, (sides[:, 0] ^ sides[:, 1]).astype("float32")


def is_chief(task_type: str | None, task_id: int | None, cluster: dict[str, Any]) -> bool:
    """TensorFlow's rule: the chief task, else worker 0 of a cluster without one."""
    if task_type is None or task_type == "chief":
        return True
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def main() -> None:
    args = parse_args()
    import keras
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    cluster = resolver.cluster_spec().as_dict()
    chief = is_chief(resolver.task_type, resolver.task_id, cluster)
    workers = strategy.num_replicas_in_sync
    me = f"{resolver.task_type} {resolver.task_id}"
    keras.utils.set_random_seed(args.seed)  # the same initial weights on every worker

    global_batch = args.batch_size * workers
    x, y = xor_of_halfspaces(args.samples, args.features, args.seed)
    n_val = len(x) // 5
    steps = max(1, (len(x) - n_val) // global_batch)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA

    def batches(a: np.ndarray, b: np.ndarray, shuffle: bool) -> tf.data.Dataset:
        ds = tf.data.Dataset.from_tensor_slices((a, b))
        if shuffle:
            ds = ds.shuffle(len(a), seed=args.seed, reshuffle_each_iteration=True)
        return ds.repeat().batch(global_batch, drop_remainder=True).with_options(options)

    with strategy.scope():  # variables are mirrored on every worker and kept in sync
        model = keras.Sequential([
            keras.Input(shape=(args.features,)),
            keras.layers.Dense(args.units, activation="relu"),
            keras.layers.Dense(args.units, activation="relu"),
            keras.layers.Dense(1, activation="sigmoid"),
        ])
        optimizer = keras.optimizers.Adam(args.lr)
        optimizer.build(model.trainable_variables)  # its slots too, before the step function is traced

    runtime.log_params({"workers": workers, "global_batch": global_batch, "steps_per_epoch": steps,
                        "train_samples": len(x) - n_val, "val_samples": n_val, "tensorflow": tf.__version__,
                        "keras": keras.__version__})
    print(f"{me} of {workers} (chief: {chief}): {steps} steps of {global_batch} per epoch", flush=True)

    def scores(features: tf.Tensor, labels: tf.Tensor, train: bool) -> tf.Tensor:
        """One replica's step: [summed loss, correct, samples] of its batch, summed over the workers."""
        with tf.GradientTape() as tape:
            prob = model(features, training=train)
            per_sample = keras.losses.binary_crossentropy(labels[:, None], prob)
            # gradients are summed over the workers: scale by the global batch for its mean
            loss = tf.nn.compute_average_loss(per_sample, global_batch_size=global_batch)
        if train:
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        hits = tf.cast(tf.equal(prob[:, 0] > 0.5, labels > 0.5), tf.float32)
        mine = tf.stack([tf.reduce_sum(per_sample), tf.reduce_sum(hits), tf.cast(tf.size(labels), tf.float32)])
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, mine)

    @tf.function
    def run(iterator: Any, count: tf.Tensor, train: bool) -> tf.Tensor:
        total = tf.zeros(3)
        for _ in tf.range(count):
            features, labels = next(iterator)
            out = strategy.run(scores, args=(features, labels, train))
            total += strategy.experimental_local_results(out)[0]
        return total

    train_it = iter(strategy.experimental_distribute_dataset(batches(x[n_val:], y[n_val:], True)))
    val_it = iter(strategy.experimental_distribute_dataset(batches(x[:n_val], y[:n_val], False)))
    val_steps = max(1, n_val // global_batch)
    history: list[dict[str, float]] = []
    for epoch in range(args.epochs):
        began = time.perf_counter()
        seen = run(train_it, tf.constant(steps), True).numpy()
        held = run(val_it, tf.constant(val_steps), False).numpy()
        row = {"loss": seen[0] / seen[2], "accuracy": seen[1] / seen[2],
               "val_loss": held[0] / held[2], "val_accuracy": held[1] / held[2],
               "epoch_seconds": time.perf_counter() - began}
        row = {k: float(v) for k, v in row.items()}
        history.append({"epoch": epoch, **row})
        runtime.log_metrics(row, step=epoch)  # a no-op except on the chief
        if chief:
            print(f"epoch {epoch + 1}/{args.epochs}: " + " ".join(f"{k} {v:.4f}" for k, v in row.items()),
                  flush=True)

    # every worker holds its own copy of the variables: all-reduced updates keep them equal
    checksum = tf.constant(sum(float(np.sum(w, dtype="float64")) for w in model.get_weights()), tf.float32)

    def gather() -> tf.Tensor:
        return tf.distribute.get_replica_context().all_gather(checksum[None], axis=0)

    sums = strategy.experimental_local_results(strategy.run(tf.function(gather)))[0].numpy()
    drift = float(sums.max() - sums.min())  # 0 when every worker ended with the same weights

    target = args.out if chief else Path(tempfile.mkdtemp(prefix=f"tf-worker{resolver.task_id}-"))
    target.mkdir(parents=True, exist_ok=True)
    model.save(target / MODEL_FILE)
    if chief:
        (target / "history.json").write_text(json.dumps({"workers": workers, "saved_by": me, "weights_drift": drift,
                                                         "history": history}, indent=1))
        runtime.log_artifact(target / MODEL_FILE, "model")
        runtime.log_artifact(target / "history.json", "model")
        print(f"{me}: saved the model to {target}", flush=True)
    else:
        shutil.rmtree(target, ignore_errors=True)
        print(f"{me}: saved to a temporary folder, removed", flush=True)


if __name__ == "__main__":
    main()
