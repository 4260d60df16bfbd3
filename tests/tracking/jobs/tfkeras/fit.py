"""Keras ``fit`` under ``mlflow.tensorflow.autolog()`` with MultiWorkerMirroredStrategy."""

import mlflow
import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
mlflow.tensorflow.autolog(log_datasets=False)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
rng = np.random.default_rng(0)
x, y = rng.normal(size=(32, 4)).astype("float32"), rng.normal(size=(32, 1)).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
model.fit(data.with_options(options), epochs=2, verbose=0)
