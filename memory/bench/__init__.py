"""Benchmarks over the engine's own code paths: `python -m memory.bench <command> --help`."""
