"""distcomp's own targets, registered through ``distcomp_targets`` as a plugin's would be.

Only the records live here, so that listing targets or building their flags imports nothing
heavy; each factory imports its target's module when a target is used.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterator, Mapping

from ..core.hookspec import hookimpl
from ..core.target import EXPERIMENT, TRACKING, Target, TargetOption, TargetType
from .kubeflow._podtemplate import PodTemplateOption

INPUTS = TargetOption("inputs", "pairs", flag="--input", short="-i", metavar="NAME=VALUE",
                      help="an input value (repeatable)")
IMAGE = TargetOption("image", metavar="IMAGE", help="container image (default: the spec's environment image)")


class JobOptionsOption(TargetOption):
    """KFP's ``--job-option NAME=VALUE`` (repeatable) on the command line; a mapping from Python."""

    def check(self, value: Any, target: str) -> Any:
        return dict(value) if isinstance(value, Mapping) else super().check(value, target)


# what every submitting target takes, each saying what it means there
TIMEOUT = TargetOption("timeout", "float", metavar="SECONDS", submit_only=True, minimum=1e-9,
                       help="stop the job after this long (restarts included)")
# What each node's agent watches (issue 37): resolved into the Plan, flag > spec > default.
SYSTEM_METRICS = TargetOption("system_metrics", "bool",
                              help="log every node's CPU, memory, disk, network (and GPU) metrics to the run as "
                                   "system/<node>/... (default: on, or the spec's launcher.system_metrics)")
SYSTEM_METRICS_INTERVAL = TargetOption("system_metrics_interval", "float", metavar="SECONDS", minimum=0.1,
                                       help="seconds between two samples of each node (default 10)")
HANG_TIMEOUT = TargetOption("hang_timeout", "float", metavar="SECONDS", minimum=1,
                            help="end the job, with each rank's stack in the root cause, when no rank has made "
                                 "progress for SECONDS (default: off, or the spec's launcher.hang_timeout)")
WATCH = (SYSTEM_METRICS, SYSTEM_METRICS_INTERVAL, HANG_TIMEOUT)


def _local() -> Target:
    from .local._target import LocalTarget

    return LocalTarget()


def _kubeflow() -> Target:
    from .kubeflow._target import KubeflowTarget

    return KubeflowTarget()


def _kfp() -> Target:
    from .kfp._target import KfpTarget

    return KfpTarget()


def _azureml() -> Target:
    from .azureml._target import AzureMLTarget

    return AzureMLTarget()


def _slurm() -> Target:
    from .slurm._target import SlurmTarget

    return SlurmTarget()


def _ray() -> Target:
    from .ray._target import RayTarget

    return RayTarget()


def _mlflow() -> Target:
    from .mlflow._target import MlflowTarget

    return MlflowTarget()


LOCAL = TargetType(
    name="local", factory=_local, submits=True, job_ids="the job's run folder",
    shares_files=True,
    description="real ranks on this machine (--nodes simulates nodes); compile shows each process's "
                "command, submit starts the job in the background",
    options=(
        INPUTS,
        TargetOption("outputs", "pairs", path="here", writes=True, flag="--output", short="-o", metavar="NAME=PATH",
                     help="where an output goes (default RUN_DIR/outputs/NAME)"),
        TargetOption("run_dir", path="here", writes=True, metavar="DIR", submit_only=True,
                     help="folder for logs, outputs and status.json (default ./runs/NAME-TIME-ID)"),
        TargetOption("env", "pairs", metavar="NAME=VALUE", submit_only=True,
                     help="a variable for every rank (repeatable; over the spec's environment_variables)"),
        TIMEOUT,
        TargetOption("max_restarts", "int", metavar="K", submit_only=True, minimum=0,
                     help="start every rank again up to K times after a failure (default: the spec's "
                          "launcher.max_restarts, else 0)"),
        TargetOption("grace", "float", default=5.0, metavar="SECONDS", submit_only=True, minimum=0,
                     help="time between SIGTERM and SIGKILL when ranks are stopped (default 5)"),
        TRACKING,
        EXPERIMENT,
        *(replace(o, submit_only=True) for o in WATCH),
    ))

KUBEFLOW = TargetType(
    name="kubeflow", factory=_kubeflow, submits=True, job_ids="NAMESPACE/KIND/NAME",
    description="a Kubeflow training job: PyTorchJob (torch.distributed, deepspeed), MPIJob v2beta1 (mpi), "
                "TFJob (tensorflow), or a Trainer v2 TrainJob",
    options=(
        replace(INPUTS, help="an input value (repeatable); a port input is a path inside the pod"),
        TargetOption("output_paths", "pairs", flag="--output-path", metavar="NAME=PATH",
                     help="where an output goes inside the pod (default: on the first --volume, else uploaded "
                          "to --store)"),
        IMAGE,
        TargetOption("name", metavar="NAME", help="job name (default: from the component name)"),
        TargetOption("namespace", metavar="NS", help="Kubernetes namespace (default: the current one)"),
        TargetOption("env", "pairs", metavar="NAME=VALUE",
                     help="an env variable for every pod (repeatable), e.g. MLFLOW_TRACKING_URI"),
        TargetOption("workdir", metavar="DIR", help="the container's working folder (default: the image's)"),
        TargetOption("volumes", "pairs", flag="--volume", separator=":", metavar="CLAIM:PATH",
                     help="mount PersistentVolumeClaim CLAIM at PATH in every pod (repeatable): shared storage"),
        TargetOption("code", metavar="MODE", default="auto",
                     help="how the code folder reaches the pods: configmap (small code, made at submit), store "
                          "(--store: uploaded, fetched by an init container), image (it holds the code); auto "
                          "(default): store when --store is given, else configmap when small, else image"),
        TargetOption("store", metavar="s3://BUCKET/PREFIX",
                     help="an S3-compatible store (AWS_ENDPOINT_URL, AWS_* credentials) for the code and the outputs"),
        TargetOption("store_secret", metavar="SECRET",
                     help="a Secret holding AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, with which the pods reach --store"),
        TargetOption("store_endpoint", metavar="URL",
                     help="the store's endpoint as the pods reach it (default $AWS_ENDPOINT_URL)"),
        TargetOption("packages", "list", metavar="REQUIREMENT",
                     help="pip installs it in every pod before the command (repeatable), e.g. --packages numpy==2.1"),
        TargetOption("scratch", "list", metavar="OUTPUT",
                     help="this output may stay on the pod's own disk and be lost (repeatable)"),
        TargetOption("download", path="here", metavar="DIR", submit_only=True,
                     help="after success, download the outputs uploaded to --store into DIR/NAME"),
        TargetOption("gpus_per_node", "int", metavar="N", minimum=0,
                     help="nvidia.com/gpu per node pod (default: the spec's roles or instance_type)"),
        TargetOption("cpu", metavar="CPU", help="CPU requested and limited per node pod, e.g. 8 or 500m"),
        TargetOption("memory", metavar="SIZE", help="memory requested and limited per node pod, e.g. 32Gi"),
        TargetOption("shm_size", metavar="SIZE", help="a memory-backed /dev/shm of SIZE (default: on for torch-style "
                                                      "jobs, sized by the spec's shm_size); 0: none"),
        PodTemplateOption("pod_template", path="here", metavar="FILE",
                          help="a partial pod template (YAML: nodeSelector, tolerations, affinity, imagePullSecrets, "
                               "serviceAccountName, env/envFrom, volumes...) merged into every pod; "
                               "from Python, a mapping"),
        TargetOption("inherit_pod", "bool", default=False,
                     help="inside a pod (a KFP step's): pass its node selector, tolerations, affinity, image pull "
                          "secrets, service account, secret/config map env and volumes, PVC mounts, labels and "
                          "annotations on to every training pod (its service account needs get on pods)"),
        TargetOption("restart_policy", metavar="POLICY",
                     help="each pod's restart policy: Never (default: a failed rank fails the job), OnFailure, ExitCode"),
        TargetOption("backoff_limit", "int", metavar="N", minimum=0,
                     help="pod restarts before the job fails (default: what --max-restarts needs)"),
        TargetOption("max_restarts", "int", metavar="K", minimum=0,
                     help="start the failed job's pods again up to K times (restartPolicy OnFailure, "
                          "runPolicy.backoffLimit; elastic: torchrun's maxRestarts); default: the spec's "
                          "launcher.max_restarts, else 0"),
        TargetOption("ttl_seconds", "int", flag="--ttl-seconds-after-finished", metavar="SECONDS", minimum=0,
                     help="delete the finished job and its pods after this long"),
        TargetOption("active_deadline", "int", flag="--active-deadline-seconds", metavar="SECONDS", minimum=1,
                     help="the cluster fails the job after this long (default: --timeout)"),
        TargetOption("elastic", metavar="MIN:MAX",
                     help="an elastic PyTorchJob of MIN to MAX nodes (elasticPolicy, c10d rendezvous)"),
        TargetOption("gang", "bool", default=False,
                     help="gang scheduling: every pod or none (schedulingPolicy.minAvailable)"),
        TargetOption("queue", metavar="NAME", help="the Kueue LocalQueue (label kueue.x-k8s.io/queue-name)"),
        TargetOption("trainer_v2", "bool", default=False, help="a Kubeflow Trainer v2 TrainJob instead"),
        TargetOption("runtime", metavar="[KIND/]NAME",
                     help="the TrainJob's runtime: a ClusterTrainingRuntime NAME, or TrainingRuntime/NAME in the "
                          "job's namespace (default: torch-distributed / deepspeed-distributed)"),
        TargetOption("kubeconfig", path="here", metavar="FILE", submit_only=True,
                     help="kubeconfig file (default: in-cluster, else $KUBECONFIG)"),
        # in the manifest (activeDeadlineSeconds): compiled, not submit-only
        replace(TIMEOUT, submit_only=False, help="delete the job after this long (default 24 h)"),
        TargetOption("poll", "float", default=10.0, metavar="SECONDS", submit_only=True, minimum=0,
                     help="status poll interval (10)"),
        SYSTEM_METRICS, SYSTEM_METRICS_INTERVAL,  # the agent in each pod samples it; hang detection needs shared beats
        replace(TRACKING, help="one MLflow run for the job (needs MLFLOW_TRACKING_URI=http://...)"),
        EXPERIMENT,
    ))

KFP = TargetType(
    name="kfp", factory=_kfp,
    description="a KFP v2 component file whose step starts the ranks of one node (several nodes: it "
                "submits a Kubeflow job sharing --volume with the step)",
    options=(
        IMAGE,
        TargetOption("volume", metavar="CLAIM:PATH",
                     help="the PersistentVolumeClaim the step shares with the pods of a multi-node job"),
        TargetOption("code_path", path="there", metavar="PATH",
                     help="the code folder inside the image: the step embeds no code (for a code folder over "
                          "the 128 KiB a step may embed)"),
        TargetOption("max_restarts", "int", metavar="K", minimum=0,
                     help="retry the failed step up to K times, every node (the task's retryPolicy); default: the "
                          "spec's launcher.max_restarts, else 0"),
        JobOptionsOption("job_options", "list", flag="--job-option", metavar="NAME=VALUE",
                         help="an option of the kubeflow target for a multi-node job's pods, by its Python name "
                              "(repeatable; a list or pairs option repeats too), e.g. --job-option gpus_per_node=1"),
    ))

AZUREML = TargetType(
    name="azureml", factory=_azureml,
    description="an azure-ai-ml command component (distribution, resources.instance_count), checked by "
                "azure-ai-ml",
    options=(
        TargetOption("environment", metavar="azureml:NAME:VERSION",
                     help="the registered environment to run in (default: the spec's)"),
        IMAGE,
        TargetOption("max_restarts", "int", metavar="K", minimum=0,
                     help="restarts after a failure: Azure ML retries no command step, so compile says so "
                          "(default: the spec's launcher.max_restarts, else 0)"),
    ))

SLURM = TargetType(
    name="slurm", factory=_slurm, submits=True, job_ids="the Slurm job id", shares_files=True,
    description="an sbatch script run on a Slurm cluster (SLURM_CONF, else the system's): one srun task per "
                "torch/deepspeed rank or TF task, mpirun in the allocation for mpi; code and logs in a job folder",
    options=(
        INPUTS,
        TargetOption("outputs", "pairs", path="here", writes=True, flag="--output", short="-o", metavar="NAME=PATH",
                     help="where an output goes, on the shared file system (default JOB_FOLDER/outputs/NAME)"),
        TargetOption("partition", metavar="NAME", help="Slurm partition (default: the cluster's)"),
        TargetOption("account", metavar="NAME", help="Slurm account to charge"),
        TargetOption("time", "int", metavar="MINUTES", minimum=1,
                     help="the job's time limit (default: from --timeout, else the partition's)"),
        TargetOption("gpus_per_node", "int", metavar="N", minimum=0, help="GPUs per node (default: the spec's)"),
        TargetOption("mem", metavar="SIZE", help="memory per node, as sbatch --mem takes it (16G)"),
        TargetOption("cpus_per_task", "int", metavar="N", minimum=1, help="CPUs per rank"),
        TargetOption("sbatch", "list", metavar="OPTION",
                     help="an extra #SBATCH line, e.g. --sbatch=--qos=high (repeatable)"),
        TargetOption("job_dir", path="here", writes=True, metavar="DIR",
                     help="shared folder for job folders (default $DISTCOMP_SLURM_DIR, else ~/distcomp-slurm)"),
        TargetOption("code_store", metavar="s3://BUCKET/PREFIX",
                     help="for nodes that do not see the code folder: submit uploads the code to this S3-compatible "
                          "store (AWS_* settings) and each node fetches it into a folder of its own before the job "
                          "starts"),
        TargetOption("node_dir", path="there", writes=True, metavar="DIR",
                     help="with --code-store: the node-local folder each node fetches the code into, in a "
                          "subfolder of the job's own, removed when the job ends (default /tmp/distcomp-USER)"),
        replace(TIMEOUT, submit_only=False,  # in the script (--time): compiled, not submit-only
                help="the job's time limit in seconds (rounded up to minutes) when --time is not given"),
        TargetOption("max_restarts", "int", metavar="K", minimum=0,
                     help="start every rank on every node again up to K times after a failure, inside the "
                          "allocation (default: the spec's launcher.max_restarts, else 0); a requeue or a "
                          "preemption is no failure"),
        TargetOption("preempt_grace", "int", default=60, metavar="SECONDS", minimum=1,
                     help="Slurm's notice (sbatch --signal=B:USR1@SECONDS) comes this long before the time limit: "
                          "the ranks see runtime.preempted(), save and leave, and the job requeues itself (default 60)"),
        *WATCH,
        replace(TRACKING, help="one MLflow run per job in $MLFLOW_TRACKING_URI, else sqlite:///JOB_DIR/mlflow.db"),
        EXPERIMENT,
    ))

RAY = TargetType(
    name="ray", factory=_ray, submits=True, job_ids="the Ray submission id",
    description="a Ray Jobs API job: one placement bundle per node (STRICT_SPREAD), distcomp's node agent on "
                "each; the cluster needs ray, no distcomp",
    options=(
        INPUTS,
        TargetOption("outputs", "pairs", path="there", writes=True, flag="--output", short="-o", metavar="NAME=PATH",
                     help="where an output goes: an absolute path every node sees (each output needs one)"),
        TargetOption("address", metavar="URL", submit_only=True,
                     help="the cluster's Jobs API, http://HOST:8265 (default $RAY_ADDRESS)"),
        TargetOption("cpus_per_node", "float", metavar="N", minimum=0, help="CPUs in each node's bundle (default 1)"),
        TargetOption("gpus_per_node", "int", metavar="N", minimum=0,
                     help="GPUs in each node's bundle (default: the spec's resources or instance_type)"),
        TargetOption("memory", metavar="SIZE", help="memory in each node's bundle, e.g. 16G or 512Mi"),
        TargetOption("resources", metavar="JSON", help="custom resources in each node's bundle, e.g. '{\"accel\": 1}'"),
        TargetOption("packages", "list", metavar="REQUIREMENT",
                     help="pip installs it for the job (runtime_env pip; repeatable), e.g. --packages numpy==2.1"),
        TargetOption("python", metavar="PATH", help="the cluster's Python that has ray, for the driver (default python)"),
        TargetOption("placement_timeout", "float", default=300.0, metavar="SECONDS", minimum=1,
                     help="fail when the cluster has not had the nodes free for this long (default 300); a request "
                          "it can never hold fails at once"),
        TargetOption("max_restarts", "int", metavar="K", minimum=0,
                     help="restart every rank on every node up to K times after a rank's failure (default: the "
                          "spec's launcher.max_restarts, else 0); a lost node is no failure: the job starts again, "
                          "uncounted, once Ray has placed the node's bundle again"),
        TargetOption("checkpoint_dir", metavar="DIR",
                     help="a folder every node sees (a shared file system): each rank's runtime.checkpoint_dir(), "
                          "kept across the job's restarts"),
        *WATCH,
        replace(TRACKING, help="one MLflow run per job in $MLFLOW_TRACKING_URI (the nodes must reach it), else "
                               "sqlite:///$PWD/mlflow.db"),
        EXPERIMENT,
    ))

MLFLOW = TargetType(
    name="mlflow", factory=_mlflow,
    description="an MLflow project folder (MLproject, the spec, its code) that `mlflow run DIR -b distcomp` "
                "runs as a distributed job")


@hookimpl
def distcomp_targets() -> Iterator[TargetType]:
    yield from (LOCAL, KUBEFLOW, KFP, AZUREML, MLFLOW, SLURM, RAY)
