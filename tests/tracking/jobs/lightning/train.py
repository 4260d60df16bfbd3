"""A tiny Lightning model trained with DDP (gloo, CPU) and logged with ``MLFlowLogger()`` as a
Lightning user writes it: no run id, no experiment, nothing about distcomp."""

import argparse

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers import MLFlowLogger
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
args = p.parse_args()


class Tiny(LightningModule):
    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _index):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
trainer = Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=args.epochs, logger=MLFlowLogger(),
                  log_every_n_steps=1, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False)
trainer.fit(Tiny(), DataLoader(data, batch_size=8))
