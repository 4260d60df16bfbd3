"""distcomp's node agent: ``python -m distcomp.agent JOB.json``, started once per node.

It reads a versioned node record (``record``), starts the replicas of its node with their env,
supervises them and reports how each ended (``exits/NAME.json``). It uses the standard library
only and no other part of distcomp, so it runs where only Python and the user's code exist
(an srun task, a pod, an Azure ML instance). What it shares with the core (placeholder binding,
the masking rule, writing a file whole) is ``shared``: the core imports it, so there is one copy.
The writer of the record is ``distcomp.core.agentjob``.
"""
