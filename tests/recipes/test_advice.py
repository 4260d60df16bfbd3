"""distcomp.core.advice: the warnings for a job whose library would quietly do the wrong
thing (accelerate on CPU without ACCELERATE_USE_CPU, Keras 3 under a tensorflow job). Real
specs and scripts on disk, loaded as ``distcomp run`` loads them; no training."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

from distcomp.core.advice import advice
from distcomp.spec import load

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
KERAS_MAJOR = int(metadata.version("keras").split(".")[0])


def job(tmp_path: Path, script: str, *, launcher: str = "torch.distributed", command: str = "python train.py",
        env: dict[str, str] | None = None) -> Path:
    """A spec in ``tmp_path`` whose command runs ``train.py`` (holding ``script``)."""
    (tmp_path / "train.py").write_text(textwrap.dedent(script))
    variables = "".join(f"\n  {k}: '{v}'" for k, v in (env or {}).items())
    spec = tmp_path / "component.yaml"
    spec.write_text("name: advised\nversion: 0.1.0\ntype: DistributedComponent\n"
                    f"launcher:\n  type: {launcher}\n  process_count_per_node: 2\n"
                    f"  additional_arguments: {command}\n"
                    + (f"environment_variables:{variables}\n" if variables else ""))
    return spec


ACCELERATE = """
    \"\"\"Mentions Accelerator(cpu=True) in a docstring only: that does not count.\"\"\"
    from accelerate import Accelerator
    accelerator = Accelerator()
"""


def test_accelerate_on_cpu_without_use_cpu_is_warned(tmp_path: Path) -> None:
    notes = advice(load(job(tmp_path, ACCELERATE)), gpu=False)
    assert len(notes) == 1 and "ACCELERATE_USE_CPU" in notes[0] and "trains alone" in notes[0], notes


@pytest.mark.parametrize("env", [{"ACCELERATE_USE_CPU": "true"}, {"ACCELERATE_USE_CPU": "1"}])
def test_accelerate_with_use_cpu_in_the_spec_is_fine(tmp_path: Path, env: dict[str, str]) -> None:
    assert advice(load(job(tmp_path, ACCELERATE, env=env)), gpu=False) == []


def test_use_cpu_from_the_run_counts_and_false_does_not(tmp_path: Path) -> None:
    spec = load(job(tmp_path, ACCELERATE, env={"ACCELERATE_USE_CPU": "true"}))
    assert advice(spec, env={"ACCELERATE_USE_CPU": "false"}, gpu=False) != []  # --env overrides the spec
    assert advice(load(job(tmp_path, ACCELERATE)), env={"ACCELERATE_USE_CPU": "yes"}, gpu=False) == []


def test_accelerator_cpu_true_or_a_gpu_needs_nothing(tmp_path: Path) -> None:
    assert advice(load(job(tmp_path, "import accelerate\nacc = accelerate.Accelerator(cpu=True)\n")), gpu=False) == []
    assert advice(load(job(tmp_path, ACCELERATE)), gpu=True) == []
    # gpu=None: the job's resources say it has one (a Kubernetes-style job, seed 003's draft dialect)
    (tmp_path / "train.py").write_text(textwrap.dedent(ACCELERATE))
    draft = tmp_path / "draft.yml"
    draft.write_text("command: python train.py\ndistributed:\n  pytorch:\n    worker:\n      count: 1\n"
                     "      slots_per: 2\n      resources: {limits: {nvidia.com/gpu: 1}}\n")
    assert advice(load(draft)) == []
    draft.write_text(draft.read_text().replace("nvidia.com/gpu", "cpu"))
    assert len(advice(load(draft), gpu=None if not Path("/dev/nvidiactl").exists() else False)) == 1


def test_accelerate_launch_in_the_command_is_warned(tmp_path: Path) -> None:
    spec = load(job(tmp_path, "print('no import here')\n", command="accelerate launch --num_processes 2 train.py"))
    assert len(advice(spec, gpu=False)) == 1


def test_a_script_without_accelerate_is_left_alone(tmp_path: Path) -> None:
    assert advice(load(job(tmp_path, "# accelerate\nimport torch\nx = 'import accelerate'\n")), gpu=False) == []
    assert advice(load(job(tmp_path, "this is not python (\n")), gpu=False) == []


KERAS = """
    import tensorflow as tf
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.fit(x, y)
"""
FIT = "model.fit(x, y)\n"


@pytest.mark.parametrize("script", [KERAS, "import keras\n" + FIT, "from tensorflow import keras\n" + FIT,
                                    "from tensorflow.keras import layers\n" + FIT])
def test_keras_3_on_a_tensorflow_job_is_warned(tmp_path: Path, script: str) -> None:
    assert KERAS_MAJOR >= 3  # what `import keras` gives here (tensorflow-cpu 2.21 requires keras 3)
    notes = advice(load(job(tmp_path, script, launcher="tensorflow.distributed")), gpu=False)
    assert len(notes) == 1 and f"Keras {KERAS_MAJOR}" in notes[0] and "TF_USE_LEGACY_KERAS=1" in notes[0], notes


def test_keras_with_legacy_keras_or_without_tensorflow_is_fine(tmp_path: Path) -> None:
    legacy = load(job(tmp_path, KERAS, launcher="tensorflow.distributed", env={"TF_USE_LEGACY_KERAS": "1"}))
    assert advice(legacy, gpu=False) == []
    assert advice(load(job(tmp_path, KERAS)), gpu=False) == []  # a torch job: not MultiWorkerMirroredStrategy
    no_keras = "import tensorflow as tf\nprint(tf.constant(1))\n"
    assert advice(load(job(tmp_path, no_keras, launcher="tensorflow.distributed")), gpu=False) == []


def test_the_recipes_need_no_advice() -> None:
    for spec in sorted(RECIPES.glob("*/component.yaml")):
        assert advice(load(spec), gpu=False) == [], spec


def test_advice_imports_no_framework(tmp_path: Path) -> None:
    spec = job(tmp_path, KERAS, launcher="tensorflow.distributed")
    code = ("import sys; from distcomp.spec import load; from distcomp.core.advice import advice; "
            f"assert advice(load({str(spec)!r}), gpu=False); "
            "print(sorted(m for m in ('tensorflow', 'keras', 'accelerate', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out


def test_the_keras_recipe_without_legacy_keras_is_warned() -> None:
    spec = load(RECIPES / "keras-mwms" / "component.yaml")
    assert spec.environment_variables["TF_USE_LEGACY_KERAS"] == "1"
    assert len(advice(spec, env={"TF_USE_LEGACY_KERAS": "0"}, gpu=False)) == 1


@pytest.mark.slow
def test_validate_and_run_give_the_advice(tmp_path: Path) -> None:
    """Wired in: `validate` warns, and `run` warns before the ranks start (here a rank that
    exits at once, so nothing trains)."""
    spec = job(tmp_path, textwrap.dedent(ACCELERATE) + "\nraise SystemExit(0)\n")
    check = subprocess.run([sys.executable, "-m", "distcomp", "validate", str(spec)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0 and f"{spec}: warning: " in check.stderr and "ACCELERATE_USE_CPU" in check.stderr
    run = subprocess.run([sys.executable, "-m", "distcomp", "run", str(spec), "--no-tracking", "--run-dir",
                          str(tmp_path / "runs" / "r"), "--quiet"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert "distcomp run: warning: " in run.stderr and "ACCELERATE_USE_CPU" in run.stderr, run.stderr
    quiet = subprocess.run([sys.executable, "-m", "distcomp", "run", str(spec), "--no-tracking", "--run-dir",
                            str(tmp_path / "runs" / "r2"), "--quiet", "--env", "ACCELERATE_USE_CPU=true"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "ACCELERATE_USE_CPU" not in quiet.stderr  # --env counts



def test_a_custom_training_loop_with_keras_3_is_not_warned(tmp_path: Path) -> None:
    """Keras 3's model.fit is what fails under MultiWorkerMirroredStrategy; a custom loop (the
    shipped tf-multiworker-train component's) works, and gets no warning."""
    loop = "import keras\nmodel = keras.Sequential([])\nwith tf.GradientTape() as tape:\n    loss = model(x)\n"
    assert advice(load(job(tmp_path, loop, launcher="tensorflow.distributed")), gpu=False) == []
    shipped = Path(__file__).resolve().parents[2] / "components" / "tf-multiworker-train" / "component.yaml"
    assert advice(load(shipped), gpu=False) == []
