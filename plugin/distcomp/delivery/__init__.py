"""How a job's code reaches the nodes that run it, for every target whose nodes may not see the
submitter's files (Kubeflow's pods, Slurm nodes that share no folder, Ray's workers).

One job per module:

- ``plan``: the record of what a target decided (``Delivery``): the code is in a folder the
  nodes share, baked into the image, in a ConfigMap, or in an object store (a content-addressed
  archive), and the stdlib fetch step a node runs before its node agent starts;
- ``code``: the code folder's files as a publish takes them (no .git, .venv, caches, .env);
- ``store``: the submit side of the object store (``s3://BUCKET/PREFIX``): the reproducible
  archive, its upload, the download of outputs;
- ``fetcher``: the S3 client and fetch step itself, standard library only, run on a node as
  ``python -c SOURCE fetch ...`` (nothing of distcomp need be installed there);
- ``transfer``: what submit moves: the code up before the job, the outputs down after it;
- ``wheel``: distcomp's own wheel, for an image or a node that must install it.

A core package: it imports no target and no launcher. What is one platform's own (a
ConfigMap manifest, a Kubernetes Secret, an sbatch line) stays in that target.
"""
