"""Evaluation: datasets of examples, batch runs of an app over them, the benchmarks' official
metrics, reports and comparisons (docs/evaluation.md).

`metrics/` and `official.py` import nothing heavy, so `dagwright eval score` starts quickly.
"""
