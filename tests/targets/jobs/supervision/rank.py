"""A rank for the supervision tests: plain Python, so a job starts in a fraction of a second.

Every rank writes STATE_DIR/rank{RANK}.{TORCHELASTIC_RESTART_COUNT}.json once it is set up:
its pid, the pids of the processes it started (``started``) and its MASTER_PORT. Modes:

  talk            print five lines, then sleep (a job to kill)
  escape_session  start ``sleep`` with start_new_session=True (out of the job's group), then --end
                  (ok: leave; wait: wait to be stopped; fail: rank 1 fails, rank 0 waits)
  escape_setsid   daemonize ``sleep`` (fork, setsid, fork) with an empty environment, then --end
  scribe          daemonize ``sleep`` as escape_setsid, then append ``tick N`` to a log of its own,
                  RUN_DIR/logs/rank{RANK}.own.log, every 0.1 s until stopped (never to stdout: the
                  pipe to a dead supervisor would end the rank)
  bind            rank 0 binds MASTER_PORT for --hold seconds; rank 1 connects and checks it
                  reached its own job (after the barrier in $BARRIER_DIR, if set)
  squat           like bind, but rank 1 first has another process take MASTER_PORT (once)
  partial         rank 0 writes a checkpoint into --result, then fails on attempt 0 (always with --end fail)
  secret          print --password (and $API_TOKEN); rank 1 then fails naming it
"""

import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

# the fault job's record(): the same state files, written the same atomic way
_fault = importlib.util.spec_from_file_location("fault_rank", Path(__file__).resolve().parents[1] / "fault" / "rank.py")
assert _fault is not None and _fault.loader is not None
fault_rank = importlib.util.module_from_spec(_fault)
_fault.loader.exec_module(fault_rank)
record = fault_rank.record

SQUATTER = ("import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); "
            "print('ready', flush=True); time.sleep(60)")


def end(how: str, rank: int, state: Path) -> None:
    """ok: leave; wait: wait to be stopped; fail: rank 1 fails once rank 0 is set up, rank 0 waits."""
    if how == "fail" and rank == 1:
        deadline = time.monotonic() + 30
        while not list(state.glob("rank0.*.json")) and time.monotonic() < deadline:
            time.sleep(0.02)
        print(f"rank {rank}: failing on purpose", flush=True)
        sys.exit(3)
    if how in ("wait", "fail"):
        time.sleep(120)


def daemon() -> int:
    """The classic double fork: the sleep ends up in a session of its own, its parent gone, its
    environment empty (no job cookie): only the supervisor's subreaper can find it."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.execve(shutil.which("sleep") or "/bin/sleep", ["sleep", "120"], {})
        os.write(write, str(grandchild).encode())
        os._exit(0)
    os.close(write)
    pid = int(os.read(read, 32))
    os.waitpid(child, 0)
    return pid


def barrier() -> None:
    """Wait until $BARRIER_COUNT ranks have arrived in $BARRIER_DIR (jobs started together)."""
    folder = os.environ.get("BARRIER_DIR")
    if not folder:
        return
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < int(os.environ["BARRIER_COUNT"]) and time.monotonic() < deadline:
        time.sleep(0.05)


def serve(port: int, hold: float, result: Path) -> None:
    """Rank 0: bind the rendezvous port, tell rank 1 whose job this is, hold the port a while."""
    s = socket.socket()
    try:
        s.bind((os.environ["MASTER_ADDR"], port))
    except OSError as exc:
        print(f"rank 0: cannot bind MASTER_PORT {port}: {exc}", flush=True)
        sys.exit(1)
    s.listen()
    t0 = time.monotonic()
    conn, _ = s.accept()
    conn.sendall(os.environ["TORCHELASTIC_RUN_ID"].encode())
    conn.close()
    time.sleep(max(0.0, hold - (time.monotonic() - t0)))
    result.mkdir(parents=True, exist_ok=True)
    (result / "port.txt").write_text(f"{port}\n")
    print(f"rank 0: held port {port}", flush=True)


def reach(port: int) -> None:
    """Rank 1: connect to rank 0 and check it is this job's."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=5) as c:
                got = c.recv(200).decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    if got != os.environ["TORCHELASTIC_RUN_ID"]:
        print(f"rank 1: port {port} is job {got}'s, not mine", flush=True)
        sys.exit(4)
    print(f"rank 1: reached rank 0 on port {port}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--end", required=True)
    p.add_argument("--hold", type=float, required=True)
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--password")
    p.add_argument("--result", type=Path, required=True)
    args = p.parse_args()
    rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    port, state = int(os.environ["MASTER_PORT"]), args.state_dir
    name = f"rank{rank}.{attempt}.json"

    if args.mode == "talk":
        for i in range(5):
            print(f"rank {rank} line {i}", flush=True)
        record(state, name, pid=os.getpid(), started=[], port=port)
        time.sleep(120)
    elif args.mode in ("escape_session", "escape_setsid"):
        child = subprocess.Popen(["sleep", "120"], start_new_session=True).pid if args.mode == "escape_session" \
            else daemon()
        record(state, name, pid=os.getpid(), started=[child], port=port)
        print(f"rank {rank}: started {child}, which left the job's process group", flush=True)
        end(args.end, rank, state)
    elif args.mode == "scribe":
        child = daemon()
        own = args.result.parents[1] / "logs" / f"rank{rank}.own.log"  # --result is RUN_DIR/outputs/result
        print(f"rank {rank}: started {child}; writing {own}", flush=True)
        with open(own, "a", buffering=1) as log:
            log.write("tick 0\n")
            record(state, name, pid=os.getpid(), started=[child], port=port)
            for i in range(1, 1200):
                time.sleep(0.1)
                log.write(f"tick {i}\n")
    elif args.mode in ("bind", "squat"):
        started = []
        squat = state / "squat.json"
        if args.mode == "squat" and rank == 1 and not squat.exists():
            taker = subprocess.Popen([sys.executable, "-c", SQUATTER, str(port)], stdout=subprocess.PIPE, text=True)
            assert taker.stdout is not None and taker.stdout.readline() == "ready\n"
            started.append(taker.pid)
            record(state, "squat.json", port=port, pid=taker.pid)
        record(state, name, pid=os.getpid(), started=started, port=port)
        if args.mode == "squat" and rank == 0:
            deadline = time.monotonic() + 30
            while not squat.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        barrier()
        serve(port, args.hold, args.result) if rank == 0 else reach(port)
    elif args.mode == "partial":
        record(state, name, pid=os.getpid(), started=[], port=port)
        if rank == 0:
            args.result.mkdir(parents=True, exist_ok=True)
            (args.result / f"ckpt-{attempt}.txt").write_text("w" * 100)
            if attempt == 0 or args.end == "fail":
                print(f"rank 0: wrote ckpt-{attempt}.txt, then failed", flush=True)
                sys.exit(3)
            print(f"rank 0: resumed from {sorted(os.listdir(args.result))}", flush=True)
    elif args.mode == "secret":
        record(state, name, pid=os.getpid(), started=[], port=port)
        print(f"rank {rank}: connecting with password {args.password}", flush=True)
        if os.environ.get("API_TOKEN"):  # a secret of the job's env (--env), printed like the input
            print(f"rank {rank}: token {os.environ['API_TOKEN']}", flush=True)
        if rank == 1:
            time.sleep(0.3)
            print(f"rank 1: login refused for password={args.password}", flush=True)
            sys.exit(3)
        time.sleep(120)
    else:
        raise SystemExit(f"unknown mode {args.mode}")


if __name__ == "__main__":
    main()
