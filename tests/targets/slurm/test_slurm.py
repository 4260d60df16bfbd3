"""The slurm target against a real two-node Slurm cluster (dev/slurm/cluster.sh): compile,
torch across both nodes, a failing rank, MPI, status/logs, cancel and the job's MLflow run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import distcomp
from distcomp.records import JobState
from distcomp.core.target import JOB_NAME

from .._jobs import FAULT, clean_env
from .conftest import JOBS, record_of

TORCH = JOBS / "torch" / "component.yaml"
MPI = JOBS / "mpi" / "component.yaml"


def _mlflow_run(job_dir: Path, run_id: str):  # type: ignore[no-untyped-def]
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_run(run_id)


def test_compile_is_a_readable_sbatch_script(tmp_path: Path) -> None:
    """Pure: nothing is submitted or written; #SBATCH lines carry the job's shape and options."""
    compiled = distcomp.compile(TORCH, "slurm", nodes=2, nproc_per_node=2, inputs={"per_node": 2}, time=7,
                                partition="debug", account="ml", gpus_per_node=1, mem="4G", cpus_per_task=1,
                                sbatch=["--qos=high", "--exclusive"], job_dir=str(tmp_path / "jobs"))
    text = compiled.text or ""
    assert not (tmp_path / "jobs").exists()
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH ")]
    assert sbatch[:3] == ["#SBATCH --job-name=slurm-test-torch", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2"]
    for line in ("--time=7", "--partition=debug", "--account=ml", "--gpus-per-node=1", "--mem=4G",
                 "--cpus-per-task=1", "--qos=high", "--exclusive"):
        assert f"#SBATCH {line}" in sbatch
    # the job folder is named after the job when it is submitted: a placeholder here
    assert f"#SBATCH --output={tmp_path}/jobs/{JOB_NAME}/slurm-%j.out" in sbatch
    # one node agent per node, whatever the launcher: the Topology is in its record, as data
    assert [line for line in text.splitlines() if line.startswith("srun ")] == [
        'srun --kill-on-bad-exit=1 --nodes=2 --ntasks=2 --cpus-per-task="$DISTCOMP_CPUS" \\']
    assert f'{sys.executable} -m distcomp.agent "$DISTCOMP_JOB_FOLDER/node.json"' in text
    record = record_of(text)
    assert [(r["name"], r["node"], r["env"]["RANK"], r["env"]["LOCAL_RANK"], r["env"]["NODE_RANK"])
            for r in record["replicas"]] == [("rank0", 0, "0", "0", "0"), ("rank1", 0, "1", "1", "0"),
                                             ("rank2", 1, "2", "0", "1"), ("rank3", 1, "3", "1", "1")]
    assert {(r["env"]["MASTER_ADDR"], r["env"]["MASTER_PORT"], r["env"]["WORLD_SIZE"]) for r in record["replicas"]} == {
        ("{{host:0}}", "{{port:master}}", "4")}
    # the allocation gives what the placeholders stand for, in the variables the record names
    assert record["bind_env"]["host:0"] == "DISTCOMP_HOST_0" and record["bind_env"]["port:master"] == "DISTCOMP_PORT_0"
    assert record["node_env"] == ["SLURM_NODEID"]
    for contract in ('scontrol show hostnames "$SLURM_JOB_NODELIST"', '"DISTCOMP_HOST_$i=${addr:-${DISTCOMP_NODES[$i]}}"',
                     "next_port; export DISTCOMP_PORT_0=$PORT  # {{port:master}}"):
        assert contract in text
    assert " ".join(record["command"][:9]) == "python rank.py --per-node 2 --fail-rank -1 --sleep 0 --out"
    assert text.startswith("#!/bin/bash\n") and record["env"] == {"DISTCOMP_TEST_MARK": "torch"}
    assert "import distcomp.launchers" not in text and "torch.distributed" not in text.split("#SBATCH")[-1].split(
        "DISTCOMP_NODE_RECORD")[-1]
    # the script is bash that parses
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_compile_refuses_a_bad_sbatch_line() -> None:
    with pytest.raises(distcomp.errors.UsageError, match="one sbatch option per flag"):
        distcomp.compile(TORCH, "slurm", sbatch=["qos=high"])


def test_slurm_accepts_the_compiled_script(slurm_cluster: Path, tmp_path: Path) -> None:
    """Slurm itself checks the script (sbatch --test-only: nothing runs)."""
    compiled = distcomp.compile(TORCH, "slurm", nodes=2, time=5, job_dir=str(tmp_path))
    script = tmp_path / "job.sbatch"
    script.write_text(compiled.text or "")
    proc = subprocess.run(["sbatch", "--test-only", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0 and "to start at" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_the_script_sbatch_tested_is_the_one_submitted(job_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile once, submit what was compiled: the script `sbatch --test-only` judged in check,
    the one `distcomp compile` prints, and the one queued differ only by what exists once the
    job is submitted: its name (the job folder's) and its MLflow run's env in the record."""
    from distcomp.targets.slurm import _slurm

    tested: list[str] = []
    queued: list[str] = []
    test, submit = _slurm.test, _slurm.submit
    monkeypatch.setattr(_slurm, "test", lambda text: (tested.append(text), test(text))[1])
    monkeypatch.setattr(_slurm, "submit", lambda path: (queued.append(Path(path).read_text()), submit(path))[1])
    options = dict(nodes=2, nproc_per_node=1, inputs={"per_node": 1}, job_dir=str(job_dir), timeout=300.0)
    compiled = distcomp.compile(TORCH, "slurm", **options)
    assert compiled.text is not None and JOB_NAME in compiled.text and "--time=5" in compiled.text
    first = distcomp.submit(TORCH, "slurm", **options)  # = distcomp.submit(distcomp.dryrun(TORCH, "slurm", ...))
    second = distcomp.submit(compiled, experiment="same-script")  # that very Compiled
    outcomes = [first.wait(), second.wait()]
    assert tested == [compiled.text, compiled.text]  # check judged the compiled script, unbound
    folders = [Path(o.details["folder"]) for o in outcomes]
    assert folders[0] != folders[1] and folders[0].parent == folders[1].parent == job_dir  # one folder per submit
    for outcome, folder, script in zip(outcomes, folders, queued):
        assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
        assert outcome.tracking is not None and (folder / "job.sbatch").read_text() == script
        unbound = script.replace(folder.name, JOB_NAME).splitlines()
        lines = compiled.text.splitlines()
        assert len(unbound) == len(lines)
        changed = [(a, b) for a, b in zip(lines, unbound) if a != b]
        assert [a.startswith(' "env": ') for a, _b in changed] == [True]  # the record's env: the run's, nothing else
        env, compiled_env = record_of(script)["env"], record_of(compiled.text)["env"]
        run_env = {k: v for k, v in env.items() if k not in compiled_env}
        assert {k: env[k] for k in compiled_env} == compiled_env
        assert run_env["MLFLOW_RUN_ID"] == outcome.tracking.run_id
        assert run_env["MLFLOW_TRACKING_URI"] == f"sqlite:///{job_dir}/mlflow.db"
    from mlflow import MlflowClient  # a submit-only option given with the Compiled: its run's experiment

    run = _mlflow_run(job_dir, outcomes[1].tracking.run_id)  # type: ignore[union-attr]
    assert MlflowClient(f"sqlite:///{job_dir}/mlflow.db").get_experiment(run.info.experiment_id).name == "same-script"


@pytest.mark.slow
def test_torch_2x2_on_both_nodes_with_one_mlflow_run(job_dir: Path) -> None:
    job = distcomp.submit(TORCH, "slurm", nodes=2, nproc_per_node=2, inputs={"per_node": 2}, job_dir=str(job_dir))
    assert str(job).startswith("slurm:") and job.id.isdigit()
    outcome = job.wait()
    folder = Path(outcome.details["folder"])
    assert outcome.state is JobState.SUCCEEDED and outcome.exit_code == 0, outcome.root_cause + outcome.message
    ranks = [json.loads((Path(outcome.outputs["result"]) / f"rank{r}.json").read_text()) for r in range(4)]
    assert [r["node"] for r in ranks] == ["n1", "n1", "n2", "n2"]  # one world across both Slurm nodes
    assert all(r["all_reduce"] == 10.0 and r["nodes"] == ["n1", "n1", "n2", "n2"] for r in ranks)
    # the job ran from its own snapshot of the code, not the working copy
    assert Path(outcome.outputs["result"]).parent.parent == folder and (folder / "code" / "rank.py").is_file()
    assert sorted(p.name for p in (folder / "logs").iterdir()) == [f"rank{r}.log" for r in range(4)]
    # one MLflow run: created before sbatch, handed to every rank, ended with the job's state
    assert outcome.tracking is not None
    assert {r["run_id"] for r in ranks[1:]} == {outcome.tracking.run_id}
    run = _mlflow_run(job_dir, outcome.tracking.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["all_reduce"] == 10.0
    assert run.data.tags["distcomp.state"] == "succeeded" and run.data.tags["distcomp.world_size"] == "4"
    # status and logs by the Slurm job id, from another handle (as `distcomp status|logs` do)
    again = distcomp.job(str(job))
    assert again.status().state is JobState.SUCCEEDED
    assert any("rank 2 on n2: all_reduce=10.0" in line for line in again.logs(rank=2))
    assert any(line.startswith("[rank3] rank 3 on n2") for line in again.logs())


@pytest.mark.slow
def test_a_failing_job_tells_why_in_the_same_tag_on_slurm_and_here(job_dir: Path, tmp_path: Path) -> None:
    """One failure tag for every target: the Slurm job's run says why it failed under the same
    ``distcomp.failure`` as a local job's (Slurm's used to be ``distcomp.message`` only)."""
    store = f"sqlite:///{job_dir}/mlflow.db"
    local = subprocess.run([sys.executable, "-m", "distcomp", "run", str(FAULT), "--quiet", "--run-dir",
                            str(tmp_path / "run"), "--input", "mode=exit", "--input", f"state_dir={tmp_path}"],
                           cwd=tmp_path, env=clean_env(MLFLOW_TRACKING_URI=store), capture_output=True, text=True,
                           timeout=120)
    assert local.returncode == 1, local.stderr
    here = _mlflow_run(job_dir, json.loads((tmp_path / "run" / "status.json").read_text())["mlflow"]["run_id"])
    outcome = distcomp.submit(TORCH, "slurm", nodes=2, inputs={"fail_rank": 1}, job_dir=str(job_dir)).wait()
    assert outcome.tracking is not None
    there = _mlflow_run(job_dir, outcome.tracking.run_id)
    for run, said in ((here, "rank 1: disk full, giving up"), (there, "rank 1 fails on purpose")):
        assert run.info.status == "FAILED" and run.data.tags["distcomp.state"] == "failed"
        why = run.data.tags["distcomp.failure"]
        assert "rank1" in why and "exited with code 3" in why and said in why, why


@pytest.mark.slow
def test_a_failing_rank_ends_the_job_and_is_named(job_dir: Path) -> None:
    job = distcomp.submit(TORCH, "slurm", nodes=2, inputs={"fail_rank": 1}, job_dir=str(job_dir))
    outcome = job.wait()
    assert outcome.state is JobState.FAILED and outcome.exit_code == 1
    first = outcome.root_cause.splitlines()[0]
    assert first == "rank1 (node n2) exited with code 3", outcome.root_cause
    assert "rank 1 fails on purpose" in outcome.root_cause
    assert outcome.tracking is not None
    assert _mlflow_run(job_dir, outcome.tracking.run_id).info.status == "FAILED"
    # no restart was left: the batch script recorded the failure while its EXIT trap swept the nodes,
    # and ended once both were done; the sweep found nothing of the job (the recorder is no rank)
    folder = Path(outcome.details["folder"])
    assert json.loads((folder / "attempts.json").read_text())["running"] is False
    said = (folder / f"slurm-{outcome.job_id.partition(':')[2]}.out").read_text()
    assert "distcomp: attempt 1 failed: rank1 (node n2) exited with code 3; no restart left (0 of 0 used)" in said, said
    assert "stopping what the ranks left" not in said, said


def test_rank_info_answers_from_an_srun_task() -> None:
    from distcomp.runtime import RankInfo, rank_info

    task = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
            "SLURM_STEP_ID": "0", "SLURM_TASKS_PER_NODE": "2(x2)", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert rank_info(task) == RankInfo(3, 4, 1, 2, 1, "10.0.0.1", 29500, "slurm")
    # the batch script's own shell (no step) is no rank; a launcher's contract wins over Slurm's
    assert rank_info({k: v for k, v in task.items() if k != "SLURM_STEP_ID"}).source == "single"
    assert rank_info({**task, "RANK": "0", "WORLD_SIZE": "1"}).source == "torch"


@pytest.mark.slow
def test_mpi_across_both_nodes(job_dir: Path) -> None:
    outcome = distcomp.submit(MPI, "slurm", nodes=2, job_dir=str(job_dir), tracking=False).wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause
    ranks = [json.loads((Path(outcome.outputs["result"]) / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["node"], r["all_reduce"], r["world"]) for r in ranks] == [("n1", 3, 2), ("n2", 3, 2)]
    assert [r["rank_info"] for r in ranks] == [[0, 2, "openmpi"], [1, 2, "openmpi"]]
    assert outcome.tracking is None
    # mpirun hosts both ranks: the node agent routes its tagged lines to each rank's log (the
    # launcher's rank_prefix, as data), so `distcomp logs slurm:ID --rank 1` shows rank 1's
    folder = Path(outcome.details["folder"])
    assert sorted(p.name for p in (folder / "logs").iterdir()) == ["launcher0.log", "rank0.log", "rank1.log"]
    assert (folder / "logs" / "rank1.log").read_text() == "rank 1 on n2: allreduce=3\n"
    assert "allreduce" not in (folder / "logs" / "launcher0.log").read_text()


@pytest.mark.slow
def test_detach_status_logs_then_cancel_leaves_nothing_running(job_dir: Path) -> None:
    import psutil

    job = distcomp.submit(TORCH, "slurm", nodes=2, inputs={"sleep": 120}, job_dir=str(job_dir))
    handle = distcomp.job(str(job))  # as `distcomp status|logs|cancel slurm:ID` find it
    follow = handle.logs(follow=True)
    lines = [next(follow) for _ in range(2)]  # both ranks reached their sleep
    assert sorted(line.split(" sleeping")[0] for line in lines) == ["[rank0] rank 0", "[rank1] rank 1"]
    assert handle.status().state is JobState.RUNNING
    outcome = handle.cancel()
    assert outcome.state is JobState.CANCELLED and outcome.exit_code == 130
    folder = outcome.details["folder"]
    assert subprocess.run(["squeue", "-h", "-j", job.id], capture_output=True, text=True).stdout.strip() == ""
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"]) if folder in " ".join(p.info["cmdline"] or ())]
    assert left == []
    assert outcome.tracking is not None
    assert _mlflow_run(job_dir, outcome.tracking.run_id).info.status == "KILLED"
    assert handle.status().state is JobState.CANCELLED  # recorded: Slurm may forget the job


HOSTILE = "$(touch PWNED) `touch PWNED` it's \"two words\" $HOME \\"


@pytest.mark.slow
def test_a_value_is_exact_inside_substitutions_on_every_slurm_rank(job_dir: Path, tmp_path: Path) -> None:
    """Issue 22: `"${X:-${{inputs.v}}}"`, `"$(printf %s ${{inputs.v}})"` and backticks ran a
    `$(touch ...)` in the value on the nodes; now each rank's program gets the value as given."""
    pwned = tmp_path / "pwned"
    value = HOSTILE.replace("PWNED", str(pwned))
    job = distcomp.submit(JOBS / "quoting" / "component.yaml", "slurm", inputs={"value": value},
                          job_dir=str(job_dir))
    outcome = job.wait()
    assert outcome.state is JobState.SUCCEEDED, outcome.root_cause + outcome.message
    ranks = [json.loads((Path(outcome.outputs["result"]) / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["node"] for r in ranks] == ["n1", "n2"]
    for rank in ranks:
        argv = rank["argv"]
        assert [argv[argv.index(flag) + 1] for flag in ("--default", "--sub", "--tick", "--plain")] == [value] * 4
    assert not pwned.exists()
