"""One TFJob pod's TensorFlow worker: a MultiWorkerMirroredStrategy all-reduce, then what it saw."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: _report

from _report import arguments, check, environ, expected_sum, finish, rank_info  # noqa: E402

args = arguments()
task = json.loads(os.environ["TF_CONFIG"])["task"]

import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()
resolver = strategy.cluster_resolver
check((resolver.task_type, resolver.task_id) == (task["type"], task["index"]),
      f"TF resolved itself as {resolver.task_type} {resolver.task_id}, TF_CONFIG says {task}")
world = strategy.num_replicas_in_sync
check(world == args.world, f"{world} replicas in sync, the test asked for {args.world}")


@tf.function
def all_reduce() -> tf.Tensor:
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(task["index"] + 1)))


total = float(strategy.experimental_local_results(strategy.run(all_reduce))[0].numpy())
check(total == expected_sum(world), f"all_reduce gave {total}, expected {expected_sum(world)}")

finish(args.out, task["index"], world=world, all_reduce=total, task=task, rank_info=rank_info(),
       env=environ("TF_CONFIG", "CUDA_VISIBLE_DEVICES", "DISTCOMP_TEST_MARK", "HOSTNAME"))
