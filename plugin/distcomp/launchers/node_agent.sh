#!/bin/sh
# Open MPI's remote-start agent when every "node" of a job is simulated on this machine:
# called as `node_agent.sh HOST COMMAND...` in place of ssh, it starts the node's daemon here,
# so each simulated node gets its own prted and its own OMPI_COMM_WORLD_LOCAL_* layout.
# Open MPI builds COMMAND as one shell command line, as ssh would receive it.
shift
exec /bin/sh -c "$*"
