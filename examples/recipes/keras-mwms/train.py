"""Keras ``model.fit`` under ``tf.distribute.MultiWorkerMirroredStrategy``, one process per
worker, each with the TF_CONFIG distcomp's tensorflow launcher (a TFJob, Azure ML) sets.

``tf.keras`` is tf-keras here (TF_USE_LEGACY_KERAS=1 in the spec): Keras 3's ``fit`` cannot
start under this strategy. ``mlflow.tensorflow.autolog()`` logs each epoch's metrics; every
worker runs it, and only the chief's land in the job's run.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import mlflow
import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--model-dir", type=Path, required=True)
    args = p.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # must come before any other TF op
    workers = strategy.num_replicas_in_sync
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    chief = task["type"] == "chief" or (task["type"] == "worker" and task["index"] == 0)

    rng = np.random.default_rng(0)  # the same data on every worker: fit shards it by batch
    x = rng.normal(size=(args.samples, 8)).astype("float32")
    y = np.sin(x @ (rng.normal(size=(8, 1)) / 3)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32 * workers)  # the global batch
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = data.with_options(options)

    mlflow.tensorflow.autolog(log_models=False, log_datasets=False, checkpoint=False)
    with strategy.scope():  # variables mirrored on every worker, gradients all-reduced
        model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(32, activation="tanh"),
                                     tf.keras.layers.Dense(1)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(data, epochs=args.epochs, verbose=2 if chief else 0)
    mlflow.log_param("world_size", workers)  # after fit: autolog's run is closed, this opens the job's again

    if chief:
        args.model_dir.mkdir(parents=True, exist_ok=True)
        keras = type(model).__module__.split(".")[0]  # tf_keras, not keras
        (args.model_dir / "metrics.json").write_text(
            json.dumps({"world_size": workers, "keras": keras, "loss": history.history["loss"]}))
        print(f"trained on {workers} workers with {keras}: loss {history.history['loss']}", flush=True)


if __name__ == "__main__":
    main()
