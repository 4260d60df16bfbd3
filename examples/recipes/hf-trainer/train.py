"""A Hugging Face Transformers Trainer under distcomp's torch.distributed launcher (or torchrun).

The Trainer reads torchrun's variables (LOCAL_RANK, WORLD_SIZE, ...) and joins that world
(gloo on CPU); it logs to MLflow through its MLflowCallback (report_to=["mlflow"]), which
opens a run in train() and another in evaluate(): distcomp keeps both in the job's run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlflow
import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

VOCAB, LENGTH = 64, 16


class Synthetic(Dataset):
    """Token sequences labelled by whether their first half sums higher than their second."""

    def __init__(self, samples: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (samples, LENGTH), generator=g)
        half = LENGTH // 2
        self.labels = (self.ids[:, :half].sum(1) > self.ids[:, half:].sum(1)).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(LENGTH, dtype=torch.long),
                "labels": self.labels[i]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--output-dir", type=Path, required=True)
    args = p.parse_args()

    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=LENGTH, num_labels=2)
    model = BertForSequenceClassification(config)
    training = TrainingArguments(
        output_dir=str(args.output_dir), num_train_epochs=args.epochs, per_device_train_batch_size=16,
        per_device_eval_batch_size=32, learning_rate=1e-3, logging_steps=2, eval_strategy="no",
        save_strategy="no", report_to=["mlflow"], use_cpu=True, ddp_backend="gloo", disable_tqdm=True,
        dataloader_num_workers=0, seed=0,
        # True (the default) logs each rank's loss times the world size: 1.386 for a 2-class chance of 0.693
        average_tokens_across_devices=False)
    trainer = Trainer(model=model, args=training, train_dataset=Synthetic(args.samples, 0),
                      eval_dataset=Synthetic(args.samples // 4, 1))
    trainer.train()
    metrics = trainer.evaluate()  # a second mlflow.start_run(): still the job's run

    if trainer.is_world_process_zero():
        mlflow.log_param("world_size", training.world_size)  # plain MLflow: the run the Trainer left active
        (args.output_dir / "metrics.json").write_text(json.dumps({"world_size": training.world_size, **metrics}))
        print(f"trained on {training.world_size} ranks: eval_loss {metrics['eval_loss']:.4f}", flush=True)


if __name__ == "__main__":
    main()
