"""The Ray job's driver travels with the job: it may import only ray and the standard library
(the cluster has no distcomp), and its placement check, root cause and restart bindings are plain
functions."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from distcomp.records import Replica, Topology
from distcomp.targets.ray import _driver
from distcomp.targets.ray._driver import attempt_record, placeable, restarting, root_cause

DRIVER = Path(_driver.__file__)


def test_the_driver_imports_only_ray_and_the_standard_library() -> None:
    """...and the agent's restart rule, which travels beside it (the agent's files are staged
    into the driver's package): ``from . import longjob``, or distcomp's own where it is imported."""
    found = set()
    relative = []
    for node in ast.walk(ast.parse(DRIVER.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            relative.append((node.level, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom):
            found.add((node.module or "").split(".")[0])
    assert found - set(sys.stdlib_module_names) == {"ray"}
    # each of the agent's modules the driver uses (longjob, progress, ...) from beside it, else distcomp's own
    assert (1, None, ["longjob", "progress"]) in relative and (3, "agent", ["longjob", "progress"]) in relative
    assert sorted(names for level, module, names in relative if level == 1 and module is None) == sorted(
        names for level, module, names in relative if level == 3 and module == "agent")
    assert all((level, module) in ((1, None), (3, "agent")) for level, module, _names in relative)


def test_the_staged_driver_imports_where_neither_distcomp_nor_ray_is_installed(tmp_path: Path) -> None:
    import subprocess

    from distcomp.targets.ray._stage import stage

    package = stage(tmp_path, {"job": "j"}, None)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import distcomp_ray.driver as d; "
             "r = d.longjob.RestartRule(1); print(r.again('boom'), d.long_job_env('/ck', 1, 1)['DISTCOMP_CHECKPOINT_DIR'])")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", probe, str(package.parent)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "/ck"]


def test_placeable_gives_each_bundle_a_node_of_its_own() -> None:
    cpu = {"CPU": 1.0}
    assert placeable([cpu, cpu], [{"CPU": 1.0}, {"CPU": 2.0}])
    assert not placeable([cpu, cpu], [{"CPU": 4.0}])  # STRICT_SPREAD: one node cannot hold two
    assert not placeable([{"CPU": 1.0, "GPU": 1.0}] * 2, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0}])
    # a matching, not a greedy pick: the big node must go to the big bundle
    assert placeable([{"CPU": 1.0}, {"CPU": 4.0}], [{"CPU": 4.0}, {"CPU": 1.0}])


def test_the_root_cause_is_the_first_replica_that_failed_by_itself() -> None:
    exits = [{"name": "rank0", "node": 0, "host": "10.0.0.1", "failed": False, "stopped": True, "ended": 3.0},
             {"name": "rank3", "node": 1, "host": "10.0.0.2", "failed": True, "stopped": False, "ended": 2.0,
              "exit_code": 7, "tail": ["loading", "boom"]},
             {"name": "rank2", "node": 1, "host": "10.0.0.2", "failed": True, "stopped": False, "ended": 2.5,
              "signal": 9}]
    assert root_cause(exits, {}) == "rank3 (node 1, 10.0.0.2) exited with code 7\n    loading\n    boom"
    # no replica's report (the agent could not start them): the agent's own last lines
    assert root_cause([], {0: (0, []), 1: (2, ["distcomp agent: bad record"])}) == (
        "the node agent of node 1 exited with code 2\n    distcomp agent: bad record")


def test_each_attempt_binds_restart_and_max_restarts_as_the_local_target_does() -> None:
    from distcomp.agent.record import bind
    from distcomp.targets.local._prepare import bindings

    record = {"job": "j", "values": {"job_id": "j"}, "ports": []}
    for restart in (0, 1, 2):
        values = attempt_record(record, restart, 2)["values"]
        one = Topology("torch.distributed", 1, 1, 1, (Replica("worker", 0, 0),))
        local = bindings(one, Path("/x"), "j", restart, 2)
        assert values == {"job_id": "j", "restart": str(restart), "max_restarts": "2"}
        assert bind("{{restart}}/{{max_restarts}}", values) == bind("{{restart}}/{{max_restarts}}", local)
    assert record["values"] == {"job_id": "j"}  # the job's record is left as it was


def test_the_restart_line_says_the_count_and_the_causes_first_line() -> None:
    from distcomp.agent.longjob import RestartRule

    cause = "rank1 (node 1, 10.0.0.2) exited with code 5\n    boom"
    rule = RestartRule(3)
    assert rule.again(cause)
    assert restarting(rule, cause) == "restarting every rank (restart 1 of 3): rank1 (node 1, 10.0.0.2) exited with code 5"
    assert rule.again("", failure=True) and restarting(rule, "") == "restarting every rank (restart 2 of 3): a failure"
    lost = "node 1 (10.0.0.2, Ray node abc) was lost mid-job: ..."
    assert rule.again(lost, failure=False)  # a lost node: a preemption, not one of the 3
    assert restarting(rule, lost, lost=True) == ("restarting every rank after a lost node (not counted against "
                                                 f"--max-restarts): {lost}")
    assert (rule.attempt, rule.failures) == (3, 2)
    assert rule.causes == ["attempt 1 failed: rank1 (node 1, 10.0.0.2) exited with code 5",
                           "attempt 2 failed: no cause given", f"attempt 3 was preempted: {lost}"]
    assert rule.again("x") and not rule.again("y")  # the third failure's restart was the last
    assert rule.again("z", failure=False)  # preemptions still start it again


def test_ports_are_agreed_free_on_every_node() -> None:
    import socket

    # a port held here is taken, a free one is not (each node runs this for the others' ports)
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        busy = held.getsockname()[1]
        free = _driver.free_ports(2)
        assert len(set(free)) == 2 and busy not in free
        assert _driver.taken([busy, *free]) == [busy]
        # node 0 proposed a port node 1 holds: a new proposal, until none is held anywhere
        proposals = iter([[free[0]], [free[1]]])
        assert _driver.agree([busy], lambda: next(proposals), lambda ports: set(_driver.taken(ports))) == [free[0]]
    # a port that stays taken: after PORT_TRIES tries the last proposal (its replica then says so)
    tries: list[int] = []
    assert _driver.agree([1], lambda: tries.append(1) or [2], lambda ports: set(ports)) == [2]
    assert len(tries) == _driver.PORT_TRIES - 1
