"""``model.fit`` under ``mlflow.keras.autolog()``, which opens and ends a run of its own around
the fit on every rank; the data differ per rank (rank 1's targets are 10 higher), so their
losses do too."""

import argparse
import os

import keras
import mlflow
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
args = p.parse_args()
rank = int(os.environ["RANK"])

mlflow.keras.autolog(log_models=False, log_datasets=False)
rng = np.random.default_rng(rank)
x, y = rng.normal(size=(32, 4)).astype("float32"), rng.normal(size=(32, 1)).astype("float32") + 10 * rank
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.fit(x, y, batch_size=8, epochs=args.epochs, verbose=0)
