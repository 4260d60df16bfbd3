"""A spec as a KFP v2 component: ``load_component`` for pipelines, ``compile_component`` for a file.

The component is a *lightweight Python component* (what ``@dsl.component`` makes), because
that is the one kind kfp.local's SubprocessRunner runs, and it runs unchanged on a cluster:
its function unpacks the embedded spec and code, writes a job record (``distcomp.core.jobrecord``)
of what KFP delivered and runs ``python -m distcomp.worker`` on it, which starts every rank of
the one node in the step's container. For several nodes the record's action is ``submit`` to
the kubeflow target instead: a Kubeflow training job whose pods share a volume with the step.
The compiled component holds the record's template with its format, never CLI flags. kfp is
imported on first call.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...spec import ComponentSpec, check_file
from .._spec import SpecLike, resolve_spec
from ._bundle import pack
from ._errors import KfpTargetError, ask, name
from ._interface import step_interface
from ._source import Submit, function_source

if TYPE_CHECKING:
    from kfp.dsl.python_component import PythonComponent

DEFAULT_IMAGE = "python:3.11"  # kfp's own default for lightweight components
# Linux refuses a single command-line argument of 128 KiB or more (MAX_ARG_STRLEN), and
# KFP passes the whole component source as one: the bundle must fit in it.
MAX_ARG_BYTES = 128 * 1024 - 1


def load_component(spec_or_path: SpecLike, nodes: int | None = None, nproc_per_node: int | None = None,
                   image: str | None = None, *, packages_to_install: Sequence[str] = (),
                   pip_index_urls: Sequence[str] | None = None, install_kfp_package: bool = True,
                   code_path: str | None = None, timeout: float | None = None,
                   max_restarts: int = 0, shared_volume: tuple[str, str] | None = None,
                   poll: float | None = None,
                   job_options: "Mapping[str, Any] | Sequence[str] | None" = None) -> "PythonComponent":
    """The spec as a KFP component whose step runs every rank of one node, or, for several
    nodes, creates a Kubeflow training job and waits for it.

    ``spec_or_path``: a ComponentSpec loaded from a file, a spec file, or a folder holding
    ``component.yaml``. ``nodes``/``nproc_per_node`` override the spec. ``image`` defaults
    to the spec's ``environment`` image, else python:3.11; it (or ``packages_to_install``)
    must provide distcomp and what the command needs (e.g. torch). ``code_path``: the code
    folder's path inside the image, instead of embedding the spec's code folder in the
    component. ``timeout`` is ``distcomp run``'s ``--timeout``. ``max_restarts``: every task of
    the component retries its failed step up to that many times (its ``retryPolicy``,
    ``set_retry``), the whole step, every node: the restarts of issue 36's contract.

    Several nodes: the step submits to the kubeflow target (its image, ``image`` or the spec's,
    which the pods run too, needs the kubernetes client, and its service account the right
    to create the job). ``shared_volume=(CLAIM, MOUNT_PATH)``, a PersistentVolumeClaim the
    pods mount too, carries the spec, code, inputs and outputs between the step and the
    pods; mount it on the task as well (``kfp.kubernetes.mount_pvc(task, pvc_name=CLAIM,
    mount_path=MOUNT_PATH)``). ``timeout`` deletes the job after that long; ``poll`` is the
    job status interval in seconds (10). ``job_options``: more options of the kubeflow target
    for the training pods, by name (``{"gpus_per_node": 1, "memory": "16Gi"}``), checked here
    against the target's declared options (a list of ``NAME=VALUE`` words is read as
    ``--job-option`` reads them).
    """
    spec, launchers = _resolve(spec_or_path)
    if max_restarts is not None and (isinstance(max_restarts, bool) or not isinstance(max_restarts, int)
                                     or max_restarts < 0):
        raise KfpTargetError(f"{name('max_restarts')} must be a whole number >= 0 (got {max_restarts!r})")
    if nodes is not None or nproc_per_node is not None:
        _positive(nodes, "nodes")
        _positive(nproc_per_node, "nproc_per_node")
        spec = spec.with_overrides(nodes=nodes, processes_per_node=nproc_per_node)
    interface = step_interface(spec)
    bundle = pack(spec, code_path, launchers)
    origin = spec.source.name if spec.source else spec.name
    if spec.distribution.nodes == 1:
        source = function_source(interface, bundle, _run_options(spec, launchers, timeout), origin)
    else:
        image = _cluster_image(spec, image, shared_volume)
        assert shared_volume is not None  # _cluster_image checked it
        options = _submit_template(spec, image, timeout, poll, _job_options(job_options))
        source = function_source(interface, bundle, options, origin,
                                 Submit(shared_volume[0], shared_volume[1], _job_prefix(spec), code_path))

    from kfp import dsl

    with tempfile.TemporaryDirectory(prefix="distcomp-kfp-") as tmp:
        # A real file, so that kfp's inspect.getsource finds the function.
        path = Path(tmp) / f"{interface.function}.py"
        path.write_text(source, encoding="utf-8")
        module_spec = importlib.util.spec_from_file_location(f"distcomp_kfp_{interface.function}", path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        try:
            component = dsl.component(
                getattr(module, interface.function), base_image=image or _spec_image(spec),
                packages_to_install=list(packages_to_install),
                pip_index_urls=list(pip_index_urls) if pip_index_urls else None,
                install_kfp_package=install_kfp_package)
        except Exception as exc:  # what kfp found wrong with the generated function, without its traceback
            raise KfpTargetError(f"{spec.ref}: kfp rejected the component made from it: {exc}") from None
    program = max(component.component_spec.implementation.container.command, key=len)
    if len(program.encode("utf-8")) > MAX_ARG_BYTES:
        raise KfpTargetError(
            f"{spec.ref}: the step's program with the embedded code is {len(program) / 1024:.0f} KiB, over the "
            f"128 KiB a container command argument may have (largest files from {spec.code}: {bundle.largest()}); "
            f"give data as an input rather than in the code folder, or put the code in the image and give its folder "
            f"there: {ask('code_path')}")
    if max_restarts:
        from ._retry import RetriedComponent

        return RetriedComponent(component, max_restarts)
    return component


def compile_component(spec_or_path: SpecLike, path: str | os.PathLike[str], *, nodes: int | None = None,
                      nproc_per_node: int | None = None, image: str | None = None,
                      packages_to_install: Sequence[str] = (), pip_index_urls: Sequence[str] | None = None,
                      install_kfp_package: bool = True, code_path: str | None = None,
                      timeout: float | None = None, max_restarts: int = 0,
                      shared_volume: tuple[str, str] | None = None, poll: float | None = None,
                      job_options: "Mapping[str, Any] | Sequence[str] | None" = None) -> Path:
    """Write the component to ``path`` as KFP's compiler does (IR YAML), which
    ``kfp.components.load_component_from_file`` loads with the same interface. The arguments
    are load_component's; the same spec and arguments always give the same bytes."""
    component = load_component(spec_or_path, nodes, nproc_per_node, image, packages_to_install=packages_to_install,
                               pip_index_urls=pip_index_urls, install_kfp_package=install_kfp_package,
                               code_path=code_path, timeout=timeout, max_restarts=max_restarts,
                               shared_volume=shared_volume, poll=poll, job_options=job_options)
    return write_component(component, path)


def write_component(component: "PythonComponent", path: str | os.PathLike[str]) -> Path:
    """A loaded component as the file ``compile_component`` writes."""
    from kfp import compiler

    out = Path(path)
    try:
        compiler.Compiler().compile(component, package_path=str(out))
    except OSError as exc:
        raise KfpTargetError(f"{out}: cannot write the component: {exc.strerror or exc}") from None
    return out


def _resolve(spec_or_path: SpecLike) -> tuple[ComponentSpec, Mapping[str, str]]:
    return resolve_spec(spec_or_path, KfpTargetError)


def _run_options(spec: ComponentSpec, launchers: Mapping[str, str], timeout: float | None) -> dict[str, Any]:
    """The job record's template (``distcomp.worker``): its format, and the run's options that
    differ from the spec file the step carries. The step adds the values KFP delivers. No
    ``max_restarts`` here: KFP's retry of the whole step is the restart (both would multiply)."""
    from ...core.jobrecord import KEY, JobRecord

    assert spec.source is not None  # pack() checked it
    written = check_file(spec.source, launchers).spec
    options: dict[str, Any] = {}
    if written is None or written.distribution.nodes != spec.distribution.nodes:
        options["nodes"] = spec.distribution.nodes
    if written is None or written.distribution.processes_per_node != spec.distribution.processes_per_node:
        if spec.distribution.processes_per_node is not None:
            options["nproc_per_node"] = spec.distribution.processes_per_node
    if timeout is not None:
        if timeout <= 0:
            raise KfpTargetError(f"{name('timeout')} must be > 0 seconds (got {timeout})")
        options["timeout"] = float(timeout)
    if spec.distribution.max_restarts:  # the spec's own restarts are the task's retry, not the step's too
        options["max_restarts"] = 0
    return {KEY: JobRecord("run", options=options).version, "options": options}


# a PersistentVolumeClaim's name: a DNS-1123 subdomain
_CLAIM = re.compile(r"(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def _cluster_image(spec: ComponentSpec, image: str | None, shared_volume: tuple[str, str] | None) -> str:
    """The image of the step and the pods, once what several nodes need is known to be there."""
    nodes = spec.distribution.nodes
    if shared_volume is None:
        raise KfpTargetError(
            f"{spec.ref}: {nodes} nodes: the step then creates a Kubeflow training job (as distcomp compile "
            f"--target kubeflow writes it), whose pods cannot see the step's files: pass {ask('shared_volume')}, a "
            "PersistentVolumeClaim the step and the pods both mount (mount it on the task with "
            f"kfp.kubernetes.mount_pvc), or {ask('nodes', '1')}")
    if (not isinstance(shared_volume, tuple) or len(shared_volume) != 2
            or not all(isinstance(part, str) for part in shared_volume)
            or not _CLAIM.match(shared_volume[0]) or not shared_volume[1].startswith("/")):
        shape, got = ask("shared_volume")[len(name("shared_volume")):].lstrip("= "), repr(shared_volume)
        if name("shared_volume").startswith("-") and isinstance(shared_volume, tuple):  # as the flag gave it
            got = repr(":".join(map(str, shared_volume)))
        raise KfpTargetError(f"{name('shared_volume')} must be {shape}: a PersistentVolumeClaim's name and an "
                             f"absolute path (got {got})")
    chosen = image or (spec.environment.image if spec.environment else None)
    if not chosen:
        raise KfpTargetError(f"{spec.ref}: {nodes} nodes: the pods need an image holding distcomp and the "
                             f"command's dependencies; pass {ask('image')} (the spec's environment names none)")
    from ...core.plugins import PluginError, get_plugin_manager

    try:  # an unknown launcher would only fail inside the step (one with no Kubeflow kind runs the node agent)
        get_plugin_manager().launcher(spec.distribution.launcher)
    except PluginError as exc:
        raise KfpTargetError(f"{spec.ref}: {exc}") from None
    return chosen


def _submit_template(spec: ComponentSpec, image: str, timeout: float | None, poll: float | None,
                     job_options: Mapping[str, Any]) -> dict[str, Any]:
    """The submit record's template (``distcomp.worker``): its format, the target, and the
    kubeflow target's options the compile fixed (the layout and image always spelled out). The
    step adds where the spec, code and data are. The job itself restarts nothing (max_restarts
    0, which the spec's launcher.max_restarts would otherwise give it): the step's retry submits
    it again, every pod, and a restart inside it too would multiply the two."""
    from ...core.jobrecord import KEY, JobRecord

    options: dict[str, Any] = {"nodes": spec.distribution.nodes}
    if spec.distribution.processes_per_node is not None:
        options["nproc_per_node"] = spec.distribution.processes_per_node
    options["image"] = image
    options["max_restarts"] = 0
    if timeout is not None:
        if timeout <= 0:
            raise KfpTargetError(f"{name('timeout')} must be > 0 seconds (got {timeout})")
        options["timeout"] = float(timeout)
    if poll is not None:
        if poll <= 0:
            raise KfpTargetError(f"{name('poll')} must be > 0 seconds (got {poll})")
        options["poll"] = float(poll)
    options.update(job_options)
    record = JobRecord("submit", target="kubeflow", options=options)
    return {KEY: record.version, "action": record.action, "target": record.target, "options": options}


def _job_options(given: "Mapping[str, Any] | Sequence[str] | None") -> dict[str, Any]:
    """``job_options`` as the kubeflow target's options, checked against its declared ones (a
    typo fails at compile time, not in the cluster); a list: ``NAME=VALUE`` words."""
    from ._joboptions import checked, from_texts

    if not given:
        return {}
    if isinstance(given, str):
        raise KfpTargetError(f"job_options must map kubeflow target options to values (got the text {given!r}), "
                             "e.g. {'gpus_per_node': 1, 'memory': '16Gi'}")
    if not isinstance(given, Mapping):
        given = from_texts([str(w) for w in given])
    return checked(given)


def _job_prefix(spec: ComponentSpec) -> str:
    """The job name's start: a DNS-1123 label of <= 33, leaving 7 for the step's ``-XXXXXX``."""
    name = re.sub(r"[^a-z0-9-]+", "-", spec.name.lower()).strip("-")[:33].strip("-")
    if not name or not name[0].isalpha():
        name = ("job-" + name)[:33].strip("-")
    return name


def _spec_image(spec: ComponentSpec) -> str:
    env = spec.environment
    return env.image if env is not None and env.image else DEFAULT_IMAGE


def _positive(value: int | None, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise KfpTargetError(f"{name(what)} must be a whole number >= 1 (got {value!r})")
