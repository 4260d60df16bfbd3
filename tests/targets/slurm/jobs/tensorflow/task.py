"""One TensorFlow task under the slurm target: TF_CONFIG as built from the allocation, then
(--tf 1) a MultiWorkerMirroredStrategy all-reduce; a parameter server only serves (it is
stopped once the chief and workers are done), and the workers end only once every one serves."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--tf", type=int, default=1)
p.add_argument("--out", type=Path, required=True)
args = p.parse_args()
env = os.environ


def check(ok: bool, message: str) -> None:
    if not ok:
        print(f"contract broken: {message}", flush=True)
        sys.exit(2)


config = json.loads(env["TF_CONFIG"])
cluster, task = config["cluster"], config["task"]
role, index = task["type"], task["index"]
addresses = [a for members in cluster.values() for a in members]
check(all(a.rpartition(":")[0] == "127.0.0.1" for a in addresses), f"addresses {addresses} (NodeAddr 127.0.0.1)")
check(len({a.rpartition(":")[2] for a in addresses}) == len(addresses), f"tasks share a port: {addresses}")
check(env.get("DISTCOMP_TEST_MARK") == "tensorflow", "the spec's environment_variables")
check(not any(n in env for n in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "OMPI_COMM_WORLD_RANK")), "another contract")

from distcomp.runtime import rank_info  # noqa: E402

info = rank_info()
check(info.source == "tensorflow" and info.role == role, f"rank_info {info}")
check("SLURM_PROCID" not in env, "the node agent's task variables")  # the agent's srun task is not this one's
result = {"role": role, "index": index, "nodeid": int(env["SLURM_NODEID"]), "node": env["SLURMD_NODENAME"],
          "cluster": cluster, "rank": info.rank, "world": info.world_size}
if role == "ps":
    (args.out / f"ps-{index}.json").write_text(json.dumps(result))
    print(f"ps {index} on {env['SLURMD_NODENAME']}: serving", flush=True)
    time.sleep(3600)  # a parameter server serves until it is stopped
if cluster.get("ps"):
    # a worker of a ps job talks to its parameter servers before it is done: wait for each to serve
    deadline = time.monotonic() + 120
    while len(list(args.out.glob("ps-*.json"))) < len(cluster["ps"]):
        check(time.monotonic() < deadline, "no parameter server served within 120 s")
        time.sleep(0.05)
if args.tf:
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    check(strategy.num_replicas_in_sync == info.world_size, f"{strategy.num_replicas_in_sync} replicas in sync")

    @tf.function
    def all_reduce() -> "tf.Tensor":
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(info.rank + 1)))

    result["all_reduce"] = float(strategy.experimental_local_results(strategy.run(all_reduce))[0].numpy())
(args.out / f"{role}-{index}.json").write_text(json.dumps(result))
print(f"{role} {index} on {env['SLURMD_NODENAME']}: {result.get('all_reduce', 'no all-reduce')}", flush=True)
