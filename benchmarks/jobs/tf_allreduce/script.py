"""One MultiWorkerMirroredStrategy all-reduce on CPU; exits 1 if the sum is wrong."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the same for both launch styles

import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ["TF_CONFIG"])["task"]


@tf.function
def step():
    ctx = tf.distribute.get_replica_context()
    mine = tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.fill([4], mine))


result = strategy.experimental_local_results(strategy.run(step))[0].numpy()
world = strategy.num_replicas_in_sync
expected = world * (world + 1) / 2
if not (result == expected).all():
    print(f"{task}: all-reduce gave {result.tolist()}, expected {expected}", file=sys.stderr)
    sys.exit(1)
print(f"{task['type']} {task['index']} of {world}: all-reduce ok ({expected})")
