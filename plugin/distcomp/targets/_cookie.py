"""The job's cookie: one environment variable every process of a job carries (a random value
per job), so what a job left behind can still be found and stopped after its ranks are gone:
the local target's supervisor, watchdog and ``distcomp reap`` (``local._procs``), the Slurm job
script's cleanup on each node (``slurm._script``)."""

COOKIE = "DISTCOMP_JOB_COOKIE"
