"""Homing benchmarks: `make bench` (python -m bench.run)."""
