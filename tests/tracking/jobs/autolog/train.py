"""A plain DDP step that calls mlflow.autolog() first, as many scripts do."""

import mlflow
import torch
import torch.distributed as dist

mlflow.autolog()
dist.init_process_group("gloo")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = model(torch.ones(8, 4)).pow(2).mean()
loss.backward()
opt.step()
if dist.get_rank() == 0:
    mlflow.log_metric("loss", loss.item())
print(f"rank {dist.get_rank()}: telemetry off={mlflow.environment_variables.MLFLOW_DISABLE_TELEMETRY.get()}"
      f" step done", flush=True)
dist.destroy_process_group()
