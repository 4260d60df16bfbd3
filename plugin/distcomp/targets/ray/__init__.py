"""The ray target: a job on a Ray cluster through its Jobs API, the core's node agent on each
node of a STRICT_SPREAD placement group (``_driver``); built only on the target contract."""
