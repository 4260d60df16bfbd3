"""One TensorFlow worker under the ray target: TF_CONFIG with each worker's node address and
port, then a MultiWorkerMirroredStrategy all-reduce."""

import argparse
import json
import os
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
config = json.loads(os.environ["TF_CONFIG"])
role, index = config["task"]["type"], config["task"]["index"]

import tensorflow as tf  # noqa: E402

from distcomp.runtime import rank_info  # noqa: E402

info = rank_info()
strategy = tf.distribute.MultiWorkerMirroredStrategy()


@tf.function
def all_reduce() -> "tf.Tensor":
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(info.rank + 1)))


total = float(strategy.experimental_local_results(strategy.run(all_reduce))[0].numpy())
result = {"role": role, "index": index, "rank": info.rank, "world": info.world_size, "all_reduce": total,
          "replicas": strategy.num_replicas_in_sync, "cluster": config["cluster"],
          "node": os.environ.get("DISTCOMP_RAY_NODE")}
(args.out / f"{role}-{index}.json").write_text(json.dumps(result))
print(f"{role} {index} on {result['node']}: {total}", flush=True)
