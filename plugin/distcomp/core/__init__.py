"""The core: what every job goes through, whatever its target.

- ``plan``: the job's one Plan (the spec with its overrides, the launcher's Topology, warnings);
  ``own`` and ``advice``: the command's own launcher and what a framework needs;
- ``target``: the target contract; ``hookspec`` and ``plugins``: the plugin contract and manager;
- ``submission``: the job handle's side of a submitted job (its masker, its one MLflow run, its
  record in ``$XDG_STATE_HOME/distcomp/jobs``, its end);
- ``jobs``: a job before it starts (inputs, outputs, its run folder); ``jobrecord``: the record a
  process distcomp starts for itself reads; ``agentjob``/``agentboot``: the node agent's record and
  its boot payload; ``kinds``: native mappings; ``nodes``: a node count or range; ``owned``: what
  ``--force`` may replace.

Record types live below it, in ``distcomp.records``; the spec in ``distcomp.spec``. Nothing here
imports a target, the API or the CLI (an import-linter ``layers`` contract).
"""
