"""Advice on a job whose training library would quietly do the wrong thing on its ranks.

These jobs run without an error, which is why they need a word before they start:

- accelerate on a machine without a GPU forms no world unless ``ACCELERATE_USE_CPU`` is true
  (or ``Accelerator(cpu=True)``): every rank trains alone, on all the data, and the job
  "succeeds" N times over;
- Keras 3's ``model.fit`` under ``tf.distribute.MultiWorkerMirroredStrategy`` fails (also
  without distcomp); tf-keras with ``TF_USE_LEGACY_KERAS=1`` works.

Cheap by design (called before every run): it reads the command and the script it starts,
never imports accelerate, keras or TensorFlow.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from ..spec import ComponentSpec

TENSORFLOW = "tensorflow.distributed"
MAX_SCRIPT = 1 << 20  # a script bigger than this is not read (it is not a training script)
TRUE = ("1", "true", "yes", "on")  # accelerate's parse_flag_from_env, TF's TF_USE_LEGACY_KERAS


@dataclass(frozen=True)
class Script:
    """What a script's code (not its comments or docstrings) uses."""

    accelerate: bool = False  # imports accelerate
    accelerate_cpu: bool = False  # calls Accelerator(cpu=True)
    keras: bool = False  # imports keras, or uses tf.keras
    fit: bool = False  # calls a .fit(...): Keras 3's fit is what fails (a custom loop works)


def advice(spec: "ComponentSpec", *, env: Mapping[str, str] | None = None, gpu: bool | None = None) -> list[str]:
    """Warnings for ``spec``'s job, one sentence each (empty: nothing to say).

    ``env``: variables the ranks get on top of the spec's (``--env``; for a local run, the
    caller's environment, which the ranks inherit). ``gpu``: whether the job's machines have
    a GPU; None asks this machine (a local run).
    """
    variables = {**spec.environment_variables, **(env or {})}
    words = _words(spec)
    scripts = [_uses(text) for text in (_read(spec.code, w) for w in words) if text is not None]
    notes: list[str] = []

    uses_accelerate = _launches_accelerate(words) or any(s.accelerate for s in scripts)
    if uses_accelerate and not (_gpu(spec) if gpu is None else gpu):
        cpu_asked = str(variables.get("ACCELERATE_USE_CPU", "")).strip().lower() in TRUE
        if not cpu_asked and not any(s.accelerate_cpu for s in scripts):
            notes.append(
                "the command uses accelerate on a job without a GPU and ACCELERATE_USE_CPU is not true: accelerate "
                "then forms no world and each of the ranks trains alone, with no error. Set it in the spec "
                "(environment_variables: {ACCELERATE_USE_CPU: 'true'}), pass --env ACCELERATE_USE_CPU=true, or "
                "create Accelerator(cpu=True)")

    if spec.distribution.launcher == TENSORFLOW and any(s.keras and s.fit for s in scripts):
        legacy = str(variables.get("TF_USE_LEGACY_KERAS", "")).strip().lower() in TRUE
        keras = _keras_major()
        if not legacy and keras is not None and keras >= 3:
            notes.append(
                f"the script uses Keras on a tensorflow job and `import keras` gives Keras {keras}: its model.fit "
                "fails under MultiWorkerMirroredStrategy (also without distcomp). Install tf-keras (matching "
                "TensorFlow's version) and set TF_USE_LEGACY_KERAS=1 in the spec's environment_variables; "
                "tf.keras is then tf-keras")
    return notes


def _words(spec: "ComponentSpec") -> list[str]:
    """The command's words, split as the shell splits them (values as placeholders)."""
    try:
        return spec.command.render(lambda ref: f"<{ref.name}>")
    except Exception:  # advice never stops a job: validation reports a bad command
        return spec.command.source.split()


def _launches_accelerate(words: list[str]) -> bool:
    """``accelerate launch ...`` or ``python -m accelerate.commands.launch ...``."""
    return any((Path(w).name == "accelerate" and nxt == "launch") or (w == "-m" and nxt.startswith("accelerate"))
               for w, nxt in zip(words, [*words[1:], ""]))


def _read(code: Path, word: str) -> str | None:
    """The text of a Python script the command runs (a ``*.py`` word, relative to the code folder)."""
    if not word.endswith(".py"):
        return None
    path = Path(word) if os.path.isabs(word) else code / word
    try:
        if not path.is_file() or path.stat().st_size > MAX_SCRIPT:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _uses(text: str) -> Script:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # not Python: nothing to say about it
        return Script()
    modules: set[str] = set()
    accelerate_cpu = keras = fit = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "keras":  # tf.keras.layers...
            keras = keras or (isinstance(node.value, ast.Name) and node.value.id in ("tf", "tensorflow"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fit":
            fit = True
        if isinstance(node, ast.Call) and _name(node.func) == "Accelerator":
            accelerate_cpu = accelerate_cpu or any(
                k.arg == "cpu" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords)
    roots = {m.split(".")[0] for m in modules}
    return Script(accelerate="accelerate" in roots, accelerate_cpu=accelerate_cpu,
                  keras=keras or "keras" in roots or any(m.startswith("tensorflow.keras") for m in modules), fit=fit)


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _gpu(spec: "ComponentSpec") -> bool:
    """Whether the job has a GPU: asked for in its resources (``nvidia.com/gpu``, ``gpu: 1``), or
    on this machine."""
    asked = [spec.resources, *(role.resources for role in spec.distribution.roles)]
    if any("gpu" in repr(dict(r)).lower() for r in asked):
        return True
    return Path("/dev/nvidiactl").exists()


def _keras_major() -> int | None:
    """The major version of the installed ``keras`` distribution (None: not installed)."""
    from importlib import metadata  # only for a Keras script on a tensorflow job: it costs every start ~15 ms

    try:
        return int(metadata.version("keras").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return None
