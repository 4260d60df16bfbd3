"""One torch.distributed rank: check torchrun's env contract, then a gloo all-reduce."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # jobs/: the shared _contract helpers

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from _contract import arguments, check, env, expect, expect_torch_rank, expected_sum, finish  # noqa: E402

args = arguments()
rank, world, master_port, info = expect_torch_rank(args, "torch")
# the rest of torchrun's worker env
expect("GROUP_WORLD_SIZE", args.nodes)
expect("ROLE_NAME", "default")
expect("ROLE_RANK", rank)
expect("ROLE_WORLD_SIZE", world)
expect("TORCHELASTIC_RESTART_COUNT", 0)
expect("TORCHELASTIC_MAX_RESTARTS", 0)
expect("TORCHELASTIC_USE_AGENT_STORE", "False")

dist.init_process_group("gloo")  # env://, with rank 0 hosting the store at MASTER_ADDR:MASTER_PORT
check(dist.get_rank() == rank and dist.get_world_size() == world,
      f"process group says rank {dist.get_rank()} of {dist.get_world_size()}, env says {rank} of {world}")
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)  # default op: SUM
check(total.item() == expected_sum(world), f"all_reduce gave {total.item()}, expected {expected_sum(world)}")
# every rank must agree on where the master is: a rank of another job would not
peers = [None] * world
dist.all_gather_object(peers, {"rank": rank, "master": f"{env('MASTER_ADDR')}:{master_port}",
                               "run_id": env("TORCHELASTIC_RUN_ID")})
check([p["rank"] for p in peers] == list(range(world)), f"all_gather order: {peers}")
check(len({(p["master"], p["run_id"]) for p in peers}) == 1, f"ranks disagree on the master or run id: {peers}")
dist.barrier()
dist.destroy_process_group()

finish(args.out, rank, all_reduce=total.item(), rank_info=info, peers=peers,
       env={k: env(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
                                 "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")})
