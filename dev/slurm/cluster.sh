#!/usr/bin/env bash
# A real two-node Slurm cluster on 127.0.0.1, in a folder of its own (for trying and testing
# distcomp's slurm target):
#
#   dev/slurm/cluster.sh install           install slurm-wlm and munge with apt when missing (root;
#                                          once per machine: `make test` runs it, `start` does not)
#   dev/slurm/cluster.sh start  [FOLDER]   start munged, slurmctld, slurmd -N n1 and -N n2,
#                                          wait until both nodes are idle, print the SLURM_CONF line
#   dev/slurm/cluster.sh status [FOLDER]   which daemons run, and sinfo
#   dev/slurm/cluster.sh stop   [FOLDER]   cancel the cluster's jobs, end its daemons by pid
#
# FOLDER defaults to /tmp/distcomp-slurm. The cluster has its own munge key and socket and its
# own ports (picked free), so it neither needs nor touches a system Slurm or munge. Every
# command is idempotent. Exit 3: the cluster cannot be had here (the reason is printed).
set -euo pipefail

CMD=${1:-}
DIR=${2:-/tmp/distcomp-slurm}
CONF=$DIR/slurm.conf
NODES=(n1 n2)
IDLE_WAIT=${DISTCOMP_SLURM_START_WAIT:-60}  # seconds the nodes get to become idle

say() { echo "cluster.sh: $*" >&2; }
cannot() { say "cannot start a Slurm cluster here: $*"; exit 3; }

usage() {
    echo "usage: $0 install | start|stop|status [FOLDER]   (default FOLDER: /tmp/distcomp-slurm)" >&2
    exit 2
}

alive() {  # alive PIDFILE: the pid it names runs
    local pid
    [[ -s $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null
}

free_port() {  # a TCP port nothing listens on, not among the ones given
    local p
    while :; do
        p=$((20000 + RANDOM % 30000))
        [[ " $* " == *" $p "* ]] && continue
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

missing_packages() {  # the Debian packages the cluster needs that are not installed
    local missing=()
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        || missing+=(slurm-wlm)
    command -v munged >/dev/null || missing+=(munge)
    echo "${missing[*]}"
}

install() {  # the one place that installs system packages (apt), said once
    local missing log
    missing=$(missing_packages)
    [[ -n $missing ]] || { say "slurm-wlm and munge are installed"; return 0; }
    [[ $(id -u) == 0 ]] || cannot "$missing not installed, and installing needs root (sudo $0 install)"
    command -v apt-get >/dev/null || cannot "$missing not installed, and there is no apt-get (not Debian/Ubuntu)"
    log=$(mktemp -t distcomp-slurm-apt.XXXXXX.log)
    say "installing $missing with apt-get (system packages, for the Slurm dev cluster; log: $log)"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086  # one word per package
    if ! apt-get install -y -q --no-install-recommends $missing >"$log" 2>&1; then
        apt-get update -q >>"$log" 2>&1 || true
        apt-get install -y -q --no-install-recommends $missing >>"$log" 2>&1 \
            || cannot "apt-get install $missing failed (see $log)"
    fi
    say "installed $missing"
}

write_conf() {
    local host ctld p1 p2
    host=$(hostname)
    ctld=$(free_port)
    p1=$(free_port "$ctld")
    p2=$(free_port "$ctld" "$p1")
    mkdir -p "$DIR/state" "$DIR/spool"
    cat >"$CONF.tmp" <<EOF
# distcomp's dev cluster (dev/slurm/cluster.sh): two nodes on 127.0.0.1
ClusterName=distcomp
# job ids of their own (from the controller's free port), so two dev clusters on one host never
# share one: a node's processes carry SLURM_JOB_ID
FirstJobId=$((ctld * 1000))
SlurmctldHost=$host
SlurmctldPort=$ctld
SlurmdPort=$p1
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again (Slurm's default: 120 s)
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=30
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
# a node whose slurmd is gone is declared down (and its jobs requeued) after 30 s, not 300
SlurmdTimeout=30
KillWait=5
MinJobAge=600
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$p1 CPUs=2 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$p2 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
}

start_munge() {
    local m=$DIR/munge
    alive "$m/munged.pid" && return 0
    id munge >/dev/null 2>&1 || cannot "there is no user munge (is the munge package installed?)"
    mkdir -p "$m"
    chown munge: "$m"
    runuser -u munge -- test -x "$m" \
        || cannot "user munge cannot reach $m (a parent folder is private): give a FOLDER others may enter"
    chmod 0700 "$m"
    if [[ ! -s $m/munge.key ]]; then  # the cluster's own key
        dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 status=none
        chown munge: "$m/munge.key"
        chmod 0400 "$m/munge.key"
    fi
    runuser -u munge -- munged --force --socket="$m/munge.socket" --key-file="$m/munge.key" \
        --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed" \
        || cannot "munged did not start (see $m/munged.log)"
    # root reads the pid file and talks to the socket; the folder is the munge user's
    chmod 0711 "$m"
    local i
    for i in $(seq 50); do
        munge -n -S "$m/munge.socket" 2>/dev/null | unmunge -S "$m/munge.socket" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cannot "munged does not answer on $m/munge.socket (see $m/munged.log)"
}

node_states() {  # "n1 idle" lines
    sinfo -h -N -o "%N %t" 2>/dev/null | sort -u
}

start() {
    mkdir -p "$DIR" 2>/dev/null || cannot "cannot make $DIR"
    local missing
    missing=$(missing_packages)
    [[ -z $missing ]] || cannot "$missing not installed: run \`sudo $0 install\` once (make test does)"
    [[ $(id -u) == 0 ]] || cannot "munged and slurmd run as their own users here, which needs root (sudo $0 start)"
    if alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd-n1.pid" && alive "$DIR/slurmd-n2.pid" \
        && alive "$DIR/munge/munged.pid"; then
        say "already running in $DIR"
    else
        stop_daemons  # a half-started cluster: start it whole, with fresh ports
        write_conf
        start_munge
        export SLURM_CONF=$CONF
        slurmctld -f "$CONF" || cannot "slurmctld did not start (see $DIR/slurmctld.log)"
        local n
        for n in "${NODES[@]}"; do
            slurmd -N "$n" -f "$CONF" || cannot "slurmd -N $n did not start (see $DIR/slurmd-$n.log)"
        done
    fi
    export SLURM_CONF=$CONF
    local deadline=$((SECONDS + IDLE_WAIT)) states
    while :; do
        states=$(node_states)
        [[ $(grep -cE '^n[12] (idle|mix|alloc)' <<<"$states") == 2 ]] && break
        if ((SECONDS >= deadline)); then
            cannot "the nodes are not idle after ${IDLE_WAIT}s (sinfo: ${states:-no answer}; see $DIR/*.log)"
        fi
        sleep 0.3
    done
    say "two nodes up ($(tr '\n' ' ' <<<"$states"))"
    echo "export SLURM_CONF=$CONF"
}

stop_pids() {  # stop_pids PIDFILE...: SIGTERM to each at once, SIGKILL to any left after 10 s
    local file pid i pids=()
    for file in "$@"; do
        alive "$file" && pids+=("$(<"$file")")
        rm -f "$file"
    done
    ((${#pids[@]})) || return 0
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "${pids[@]}" 2>/dev/null || break  # true while any one of them runs
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null && { say "pid $pid did not end on SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
    done
    return 0
}

stop_daemons() {
    stop_pids "$DIR/slurmd-n1.pid" "$DIR/slurmd-n2.pid"
    stop_pids "$DIR/slurmctld.pid"
    stop_pids "$DIR/munge/munged.pid"
}

stop() {
    [[ -d $DIR ]] || { say "no cluster in $DIR"; return 0; }
    if [[ -f $CONF ]] && alive "$DIR/slurmctld.pid"; then
        export SLURM_CONF=$CONF
        local jobs i
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $jobs ]]; then  # the jobs' steps end with them, not left behind the daemons
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for i in $(seq 150); do
                [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break
                sleep 0.1
            done
        fi
    fi
    stop_daemons
    say "stopped the cluster in $DIR"
}

status() {
    local name file rc=0
    for name in munged slurmctld slurmd-n1 slurmd-n2; do
        file=$DIR/$name.pid
        [[ $name == munged ]] && file=$DIR/munge/munged.pid
        if alive "$file"; then echo "$name: running (pid $(<"$file"))"; else echo "$name: not running"; rc=1; fi
    done
    if ((rc == 0)); then
        SLURM_CONF=$CONF sinfo -N
        echo "export SLURM_CONF=$CONF"
    fi
    return $rc
}

case $CMD in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) usage ;;
esac
