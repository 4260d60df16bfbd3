#!/usr/bin/env bash
# A real two-node Ray cluster on 127.0.0.1, in a folder of its own (for trying and testing
# distcomp's ray target):
#
#   dev/ray/cluster.sh start  [FOLDER]   `ray start --head` (node n1: GCS, dashboard and its Jobs
#                                        API) and `ray start --address` (node n2), one CPU each,
#                                        on free ports; wait until both nodes are alive, print the
#                                        RAY_ADDRESS line (the Jobs API's URL)
#   dev/ray/cluster.sh status [FOLDER]   its processes, and `ray status`
#   dev/ray/cluster.sh stop   [FOLDER]   end the cluster's processes by pid
#
# FOLDER defaults to /tmp/distcomp-ray. Ray is the one on PATH (else .venv/bin/ray: `make install`
# has it, the ray extra). Each node's processes carry DISTCOMP_RAY_CLUSTER=FOLDER and
# DISTCOMP_RAY_NODE=n1|n2 in their environment (Ray passes a node's environment on to its tasks):
# `stop` ends exactly the processes that carry this cluster's mark, never another Ray on the
# machine (no `ray stop`, which ends every Ray of the user). Every command is idempotent.
# Exit 3: the cluster cannot be had here (the reason is printed; what the start began is ended).
set -euo pipefail

CMD=${1:-}
DIR=${2:-/tmp/distcomp-ray}
UP_WAIT=${DISTCOMP_RAY_START_WAIT:-90}  # seconds the two nodes get to come up
OBJECT_STORE=${DISTCOMP_RAY_OBJECT_STORE:-100000000}  # bytes per node: small, the machine is shared

say() { echo "cluster.sh: $*" >&2; }
cannot() { say "cannot start a Ray cluster here: $*"; exit 3; }
# after the head started: what this start began is ended before it says why it failed
abandon() { stop >/dev/null 2>&1; cannot "$@"; }

usage() {
    echo "usage: $0 start|stop|status [FOLDER]   (default FOLDER: /tmp/distcomp-ray)" >&2
    exit 2
}

find_ray() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    if command -v ray >/dev/null; then command -v ray
    elif [[ -x $here/.venv/bin/ray ]]; then echo "$here/.venv/bin/ray"
    else cannot "no ray command (pip install 'ray[default]', or make install)"; fi
}

free_port() {  # a TCP port nothing listens on, not among the ones given
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        [[ " $* " == *" $p "* ]] && continue
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

marked() {  # the pids whose environment carries this cluster's mark (optionally: of node $1)
    local want="DISTCOMP_RAY_CLUSTER=$DIR" node=${1:-} env pid
    for env in /proc/[0-9]*/environ; do
        pid=${env#/proc/}; pid=${pid%/environ}
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        if { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "$want"; then
            if [[ -z $node ]] || { tr '\0' '\n' <"$env"; } 2>/dev/null | grep -qxF "DISTCOMP_RAY_NODE=$node"; then
                # a zombie or a process ending now has no cmdline: not ours to wait for
                grep -qa . "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
            fi
        fi
    done
}

running() {  # running PID...: true while any one runs (a zombie, which no parent reaps here, does not)
    local pid stat
    for pid in "$@"; do
        stat=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
        stat=${stat##*) }
        [[ ${stat%% *} != Z ]] && return 0
    done
    return 1
}

address() { [[ -s $DIR/address ]] && cat "$DIR/address"; }

alive_nodes() {  # how many nodes the cluster's GCS counts as alive
    local ray=$1
    RAY_ADDRESS="$(cat "$DIR/gcs")" "$ray" list nodes --filter "state=ALIVE" --format json 2>/dev/null \
        | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0
}

start() {
    local ray gcs dash client head_mark
    ray=$(find_ray)
    mkdir -p "$DIR" 2>/dev/null || cannot "cannot make $DIR"
    if [[ -n $(marked n1) && -n $(marked n2) && -s $DIR/gcs ]] && (($(alive_nodes "$ray") == 2)); then
        say "already running in $DIR"
        echo "export RAY_ADDRESS=$(address)"
        return 0
    fi
    stop_processes  # a half-started cluster: start it whole, with fresh ports
    gcs=$(free_port)
    dash=$(free_port "$gcs")
    client=$(free_port "$gcs" "$dash")
    # each node's dashboard agent on a port of its own: both default to 52365, and the head's
    # losing that race (or another Ray on the machine holding it) leaves the Jobs API with no
    # agent to run a job ("No available agent to submit job")
    local agent1 agent2
    agent1=$(free_port "$gcs" "$dash" "$client")
    agent2=$(free_port "$gcs" "$dash" "$client" "$agent1")
    # Ray's sockets live under its temp dir, in a session folder of ~60 characters, and a unix
    # socket's path holds 107 bytes: FOLDER/t when FOLDER is short, else a short folder in /tmp
    local temp=$DIR/t
    rm -rf "$temp"
    if ((${#DIR} > 24)); then temp=$(mktemp -d /tmp/ray-XXXXXX); else mkdir -p "$temp"; fi
    echo "$temp" >"$DIR/temp"
    export RAY_USAGE_STATS_ENABLED=0 DISTCOMP_RAY_CLUSTER=$DIR
    DISTCOMP_RAY_NODE=n1 "$ray" start --head --port "$gcs" \
        --ray-client-server-port "$client" --dashboard-host 127.0.0.1 --dashboard-port "$dash" \
        --include-dashboard true --dashboard-agent-listen-port "$agent1" --num-cpus 1 \
        --object-store-memory "$OBJECT_STORE" --temp-dir "$temp" \
        --disable-usage-stats >"$DIR/head.log" 2>&1 || abandon "ray start --head failed (see $DIR/head.log)"
    echo "127.0.0.1:$gcs" >"$DIR/gcs"
    echo "http://127.0.0.1:$dash" >"$DIR/address"
    DISTCOMP_RAY_NODE=n2 "$ray" start --address "127.0.0.1:$gcs" --num-cpus 1 --dashboard-agent-listen-port "$agent2" \
        --object-store-memory "$OBJECT_STORE" --disable-usage-stats >"$DIR/worker.log" 2>&1 \
        || abandon "ray start --address failed (see $DIR/worker.log)"
    local deadline=$((SECONDS + UP_WAIT)) n=0
    while :; do
        n=$(alive_nodes "$ray")
        # the Jobs API answers once the dashboard's job head is up
        ((n == 2)) && python3 - "$(address)" <<'EOF' 2>/dev/null && break
import sys, urllib.request
urllib.request.urlopen(sys.argv[1] + "/api/version", timeout=2).read()
EOF
        ((SECONDS >= deadline)) && abandon "$n of 2 nodes alive after ${UP_WAIT}s, or no Jobs API (see $DIR/*.log)"
        sleep 0.5
    done
    say "two nodes up (n1: head, jobs API $(address); n2)"
    echo "export RAY_ADDRESS=$(address)"
}

stop_processes() {  # SIGTERM to the marked processes, SIGKILL to any left after 10 s
    local pids pid i
    mapfile -t pids < <(marked)
    ((${#pids[@]})) || return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for i in $(seq 100); do
        running "${pids[@]}" || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        running "$pid" && { say "pid $pid still runs 10 s after SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
    done
    # what a raylet started while it was stopping (a worker) carries the mark too
    mapfile -t pids < <(marked)
    ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
    return 0
}

stop() {
    [[ -d $DIR ]] || { say "no cluster in $DIR"; return 0; }
    stop_processes
    rm -f "$DIR/gcs" "$DIR/address"
    local temp
    temp=$(cat "$DIR/temp" 2>/dev/null || true)
    [[ $temp == /tmp/ray-?????? ]] && rm -rf "$temp"  # a short temp dir of its own, made by start
    rm -f "$DIR/temp"
    say "stopped the cluster in $DIR"
}

status() {
    local node rc=0 ray
    for node in n1 n2; do
        if [[ -n $(marked "$node") ]]; then echo "$node: running ($(marked "$node" | wc -l) processes)"
        else echo "$node: not running"; rc=1; fi
    done
    if ((rc == 0)) && [[ -s $DIR/gcs ]]; then
        ray=$(find_ray)
        RAY_ADDRESS="$(cat "$DIR/gcs")" "$ray" status 2>/dev/null || true
        echo "export RAY_ADDRESS=$(address)"
    fi
    return $rc
}

case $CMD in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) usage ;;
esac
