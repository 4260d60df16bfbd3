"""One TensorFlow worker: check TF_CONFIG, then an all-reduce with MultiWorkerMirroredStrategy."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: the shared _contract helpers

from _contract import (LOCALHOST, RankInfo, absent, arguments, check, env, expect, expect_rank_info,  # noqa: E402
                       expected_sum, finish, port_of)

args = arguments()
world = args.nodes * args.per_node

config = json.loads(env("TF_CONFIG"))
check(set(config) == {"cluster", "task", "environment"}, f"TF_CONFIG keys: {sorted(config)}")
check(config["environment"] == "cloud", f"TF_CONFIG environment: {config['environment']!r} (Azure ML's is cloud)")
cluster, task = config["cluster"], config["task"]
check(set(cluster) == {"worker"}, f"TF_CONFIG cluster roles: {sorted(cluster)} (expected only workers)")
workers = cluster["worker"]
check(len(workers) == world, f"TF_CONFIG lists {len(workers)} workers, expected {world}")
check(task.get("type") == "worker" and isinstance(task.get("index"), int), f"TF_CONFIG task: {task}")
index = task["index"]
check(0 <= index < world, f"task index {index} is outside 0..{world - 1}")
addresses = [w.rpartition(":") for w in workers]
# simulated node N listens on loopback address 127.0.0.N+1; workers fill the nodes in order
hosts = [f"127.0.0.{i // args.per_node + 1}" for i in range(world)]
check([host for host, _, _ in addresses] == hosts and all(sep == ":" for _, sep, _ in addresses),
      f"worker addresses: {workers} (expected hosts {hosts})")
ports = [port_of(p, f"worker port in {workers}") for _, _, p in addresses]
check(len(set(ports)) == world, f"workers share a port: {workers}")
expect("DISTCOMP_TEST_MARK", "tensorflow")
if not Path("/dev/nvidiactl").exists():
    expect("CUDA_VISIBLE_DEVICES", "-1")  # distcomp hides GPUs from TF on a machine without one
absent("torch", "openmpi", "azure", "kubeflow")
# the master is worker 0; workers on one address share a node
info = expect_rank_info(RankInfo(index, world, index % args.per_node, args.per_node, index // args.per_node,
                                 LOCALHOST, ports[0], "tensorflow", "worker"))

import tensorflow as tf  # noqa: E402  (slow: after the cheap checks)

strategy = tf.distribute.MultiWorkerMirroredStrategy()
resolver = strategy.cluster_resolver
check((resolver.task_type, resolver.task_id) == ("worker", index),
      f"TF resolved itself as {resolver.task_type} {resolver.task_id}, TF_CONFIG says worker {index}")
check(strategy.num_replicas_in_sync == world, f"{strategy.num_replicas_in_sync} replicas in sync, expected {world}")


@tf.function
def all_reduce() -> tf.Tensor:
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(index + 1)))


total = float(strategy.experimental_local_results(strategy.run(all_reduce))[0].numpy())
check(total == expected_sum(world), f"all_reduce gave {total}, expected {expected_sum(world)}")

finish(args.out, index, all_reduce=total, rank_info=info, tf_config=config,
       env={"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")})
