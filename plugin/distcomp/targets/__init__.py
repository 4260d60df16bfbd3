"""Targets: the places a step runs. Each compiles a Topology into what runs there; the local
target also runs it."""
