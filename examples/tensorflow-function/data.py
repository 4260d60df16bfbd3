"""The data and the model of the TensorFlow example: a sibling module of ``train.py``, so it
travels with the function to every rank (distcomp ships the whole folder)."""

from __future__ import annotations

from typing import Any

import numpy as np


def make_data(samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """y = x . w + noise: the same data on every worker (same seed)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 4)).astype("float32")
    w = rng.standard_normal((4, 1)).astype("float32")
    return x, (x @ w + 0.01 * rng.standard_normal((samples, 1))).astype("float32")


def build_model(lr: float) -> tuple[Any, Any]:
    """A linear Keras model and its optimizer; made inside the strategy's scope, their
    variables are mirrored on every worker."""
    import keras

    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(lr)
    optimizer.build(model.trainable_variables)  # before the step function is traced
    return model, optimizer
