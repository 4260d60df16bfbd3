# make install: a .venv with distcomp and every extra (the docs' mkdocs too);
# make test: the full suite CI runs: install, the Slurm dev cluster's packages, lint (ruff), types
#   (mypy), the layers (lint-imports), the docs (mkdocs), then every test;
# make test-fast: lint and the tests not marked slow (no cluster, no framework job), for every change;
# make demo: install, then the main job.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# pytest-xdist workers of make test (4 and 5 were measured too: 1-2 min faster, but at a load
# of 10-12 on 2 cores the Ray killed-node tests' timings broke)
WORKERS ?= 3

.PHONY: install slurm-packages test test-fast demo bench clean

install: $(STAMP)

# Reinstall only when the declared dependencies change.
$(STAMP): pyproject.toml Makefile
	@echo "==> distcomp's .venv: torch (CPU), DeepSpeed, then every extra (a few minutes on a fresh machine)"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip setuptools wheel
	# torch first and pinned, so nothing later pulls a CUDA build
	$(BIN)/pip install torch==2.13.0
	# DeepSpeed compiles no ops on this CPU-only machine and must see the installed torch
	DS_BUILD_OPS=0 $(BIN)/pip install --no-build-isolation deepspeed
	$(BIN)/pip install -e ".[all]"
	# tf-keras (the recipes' Keras 2) requires the full tensorflow wheel by name; tensorflow-cpu
	# provides the same module, so it goes in without its dependencies
	$(BIN)/pip install --no-deps tf-keras==2.21.0
	# byte-compile the editable package once: where PYTHONDONTWRITEBYTECODE is set, every
	# `distcomp` start would otherwise recompile it (~50 ms of each `distcomp run`)
	$(BIN)/python -m compileall -q plugin/distcomp
	touch $(STAMP)

# The Slurm dev cluster's system packages (slurm-wlm, munge: apt, root), said once; the tests'
# fixture only starts the cluster.
slurm-packages:
	bash dev/slurm/cluster.sh install

test: install slurm-packages
	$(BIN)/ruff check plugin tests benchmarks examples components docs
	$(BIN)/mypy
	# the layers (pyproject.toml's [tool.importlinter] contracts), read afresh: it takes about a second
	$(BIN)/lint-imports --no-cache
	# the documentation site, offline, every warning an error (tests/test_docs.py runs its commands)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir build/site
	# 3 workers on 2 cores: many tests wait (servers, clusters, outages) while others compute
	$(BIN)/python -m pytest -n $(WORKERS)

# lint and every test not marked slow: no cluster, no framework job, about a minute
test-fast: install
	$(BIN)/ruff check plugin tests benchmarks examples components docs
	$(BIN)/python -m pytest -m "not slow" -n 2

demo: install
	$(BIN)/python examples/demo.py

bench: install
	# each script prints its table and writes benchmarks/results/SCRIPT.json: commit those, the docs'
	# benchmarks page draws its plot and table from them (docs/hooks/benchmarks.py)
	# TorchX, the peer the 2x2 launch row is measured against; --no-deps: its own pins would
	# downgrade urllib3 under MLflow and kubernetes
	$(BIN)/pip install --no-deps torchx==0.7.0 pyre-extensions typing-inspect
	$(BIN)/python benchmarks/validate.py
	$(BIN)/python benchmarks/launch.py
	$(BIN)/python benchmarks/tracking.py
	$(BIN)/python benchmarks/new_store.py
	$(BIN)/python benchmarks/targets.py
	$(BIN)/python benchmarks/registry.py
	$(BIN)/python benchmarks/function.py
	$(BIN)/python benchmarks/slurm.py
	$(BIN)/python benchmarks/slurm_requeue.py
	$(BIN)/python benchmarks/system_metrics.py
	$(BIN)/python benchmarks/ray.py

clean:
	rm -rf $(VENV) build plugin/*.egg-info .pytest_cache .hypothesis
