"""A function component for TensorFlow: MultiWorkerMirroredStrategy on CPU, one worker per rank.

    distcomp run examples/tensorflow-function/train.py:train --nproc-per-node 2 -o model=out/

The launcher (``tensorflow.distributed``) gives each rank its TF_CONFIG; every rank runs
``train`` with its values typed; the strategy all-reduces the gradients, so the workers end with
the same weights (each prints them); the chief (rank 0) logs the loss to MLflow and writes the
result. Keras' ``fit`` cannot start under this strategy in Keras 3 (keras-team/keras#20585):
a custom step does the same."""

from __future__ import annotations

import json
import os

from data import build_model, make_data  # a sibling module: it travels with the function

import distcomp
from distcomp import runtime


@distcomp.component(name="tensorflow-function", version="1.0.0", launcher="tensorflow.distributed",
                    nproc_per_node=2,
                    env={"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0", "KERAS_BACKEND": "tensorflow"})
def train(model: distcomp.Output, epochs: int = 3, lr: float = 0.1, samples: int = 256, seed: int = 0) -> None:
    """Linear regression with Keras under MultiWorkerMirroredStrategy (CPU)."""
    import numpy as np
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # reads TF_CONFIG
    workers = strategy.num_replicas_in_sync
    x, y = make_data(samples, seed)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32 * workers, drop_remainder=True).with_options(options)
    tf.keras.utils.set_random_seed(seed)  # the same initial weights on every worker
    with strategy.scope():
        net, optimizer = build_model(lr)

    def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(net(features, training=True) - labels)) / (32 * workers)
        optimizer.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, loss)

    @tf.function
    def epoch_loss(iterator: object, steps: tf.Tensor) -> tf.Tensor:
        total = tf.constant(0.0)
        for _ in tf.range(steps):
            total += strategy.experimental_local_results(strategy.run(step, args=next(iterator)))[0]
        return total / tf.cast(steps, tf.float32)

    iterator = iter(strategy.experimental_distribute_dataset(data.repeat()))
    steps = tf.constant(samples // (32 * workers))
    losses = []
    for epoch in range(epochs):
        losses.append(float(epoch_loss(iterator, steps)))  # the gradients are all-reduced at every step
        runtime.log_metric("loss", losses[-1], step=epoch)  # the chief's only
    weights = np.concatenate([v.numpy().ravel() for v in net.trainable_variables])
    print(f"worker {runtime.rank_info().rank} weights: {json.dumps(weights.tolist())}", flush=True)  # all equal
    if runtime.rank_info().rank == 0:
        os.makedirs(model, exist_ok=True)
        with open(os.path.join(model, "summary.json"), "w") as f:
            json.dump({"workers": workers, "losses": losses, "weights": weights.tolist()}, f)
