"""Benchmarks over the engine's own code paths, and SeCom's learning tools (bench/secom/):
`python -m bench <command> --help`. Not part of the app: the product (memory/, sessions/, ui/, app.py)
never imports this package (tests/test_layering.py); what the evaluation tab shares with it lives in
memory/evaluation/.
"""
