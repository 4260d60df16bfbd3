"""Prints the wall clock in ns the moment it runs (the YAML side of benchmarks/launch.py's function row)."""
import time

print(time.time_ns(), flush=True)
