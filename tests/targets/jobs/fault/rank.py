"""A rank that misbehaves on purpose, for the local target's fault tests.

Every rank first writes STATE_DIR/rank{RANK}.{TORCHELASTIC_RESTART_COUNT}.json (its pid, the
pid of any grandchild it started, its folder and the torchrun contract it was given), so a
test can wait until the job is up and, afterwards, check that none of those processes is
left. Then the rank --bad-rank misbehaves as --mode says, and the others wait, finish or
behave as that mode needs. Plain Python (fast) unless --torch true: then every rank joins a
gloo process group and all-reduces first.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CONTRACT = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE",
            "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
            "OMP_NUM_THREADS", "PYTHONUNBUFFERED")
# a grandchild that ignores SIGTERM, says when it is ready, and would live a minute
STUBBORN = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")


def record(state: Path, name: str, **data: object) -> None:
    """Write JSON atomically, so a test polling for the file never reads half of it."""
    state.mkdir(parents=True, exist_ok=True)
    tmp = state / f".{name}.{os.getpid()}"
    tmp.write_text(json.dumps(data))
    tmp.replace(state / name)


def fail(code: int) -> None:
    """Exit with ``code``. A rank still in a gloo group leaves at once: left to the interpreter,
    gloo's teardown can abort (SIGABRT) while a peer is connected, hiding the code under test."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


def linger(rank: int) -> None:
    """What a healthy rank does while another one fails: wait a minute, unless stopped."""
    time.sleep(60)
    print(f"rank {rank} slept 60 s: nobody stopped it", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--bad-rank", type=int, required=True)
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--torch", choices=("true", "false", "True", "False"), required=True)
    p.add_argument("--data", type=Path)
    p.add_argument("--result", type=Path, required=True)
    args = p.parse_args()

    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    bad, mode, state = rank == args.bad_rank, args.mode, args.state_dir

    if mode in ("ignore_term", "flood"):
        def on_term(signum: int, frame: object) -> None:
            print(f"rank {rank} got SIGTERM and ignores it", flush=True)
            (state / f"rank{rank}.term").touch()
        signal.signal(signal.SIGTERM, on_term)

    if args.torch.lower() == "true":
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo")
        total = torch.tensor([rank + 1])
        dist.all_reduce(total)
        print(f"rank {rank}: all_reduce over {dist.get_world_size()} ranks gave {int(total)}", flush=True)

    grandchild = None
    if bad and mode == "grandchild":
        grandchild = subprocess.Popen(["sleep", "60"])
    elif bad and mode == "grandchild_hang":
        grandchild = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
        assert grandchild.stdout.readline() == "ready\n"
    record(state, f"rank{rank}.{attempt}.json", pid=os.getpid(), cwd=os.getcwd(),
           grandchild=grandchild.pid if grandchild else None,
           env={k: os.environ.get(k) for k in CONTRACT})
    print(f"rank {rank} of {os.environ['WORLD_SIZE']} started (attempt {attempt}, pid {os.getpid()})", flush=True)

    if mode == "ok":
        if rank == 0:
            args.result.mkdir(parents=True, exist_ok=True)
            (args.result / "done.txt").write_text("ok\n")
        if args.torch.lower() == "true":
            # a rank that leaves the group undestroyed while its peer exits can abort in gloo's
            # teardown ("terminate called without an active exception"): end it as DDP code should
            dist.barrier()
            dist.destroy_process_group()
        return
    if mode == "chatty":
        for i in range(5000):
            print(f"rank {rank} line {i} " + "x" * 60)
        return
    if mode == "sleep":
        return linger(rank)
    if mode == "flood":  # lots of output from the bad rank, then every rank waits, deaf to SIGTERM
        for i in range(5000 if bad else 0):
            print(f"rank {rank} line {i} " + "x" * 60)
        return linger(rank)
    if not bad:
        if mode in ("hang", "grandchild_hang", "flaky", "always_fail"):
            return  # the others succeed: only the bad rank decides how the job ends
        if mode == "bytes":  # a last line the rank never ends: it must not be lost when stopped
            sys.stdout.buffer.write(b"partial line of rank %d \x80" % rank)
            sys.stdout.buffer.flush()
        return linger(rank)

    time.sleep(0.3)  # let the other ranks start and record themselves
    if mode == "exit":
        print(f"rank {rank}: disk full, giving up", flush=True)
        fail(3)
    if mode == "kill":
        print(f"rank {rank}: about to be killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hang":
        print(f"rank {rank}: hanging", flush=True)
        time.sleep(60)
    if mode == "flaky":
        if attempt == 0:
            print(f"rank {rank}: flaky failure on attempt {attempt}", flush=True)
            fail(5)
        print(f"rank {rank}: recovered on attempt {attempt}", flush=True)
        return
    if mode == "always_fail":
        print(f"rank {rank}: failing on attempt {attempt}", flush=True)
        fail(4)
    if mode == "ignore_term":
        print(f"rank {rank}: failing while the others ignore SIGTERM", flush=True)
        fail(3)
    if mode == "grandchild":
        print(f"rank {rank}: failing, leaving sleep {grandchild.pid} behind", flush=True)
        fail(3)
    if mode == "grandchild_hang":
        print(f"rank {rank}: hanging, with grandchild {grandchild.pid} that ignores SIGTERM", flush=True)
        time.sleep(60)
    if mode == "bytes":
        out = sys.stdout.buffer
        out.write(b"caf\xe9 latin-1 \xff\xfe bytes\n")
        out.write(b"last words without newline \xc3\xa9t\xe9")
        out.flush()
        os._exit(7)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
