"""The Ray job's driver travels with the job: it may import only ray and the standard library
(the cluster has no distcomp), and its placement check and root cause are plain functions."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from distcomp.targets.ray import _driver
from distcomp.targets.ray._driver import placeable, root_cause

DRIVER = Path(_driver.__file__)


def test_the_driver_imports_only_ray_and_the_standard_library() -> None:
    found = set()
    for node in ast.walk(ast.parse(DRIVER.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"a relative import in the driver: line {node.lineno}"
            found.add((node.module or "").split(".")[0])
    assert found - set(sys.stdlib_module_names) == {"ray"}


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
