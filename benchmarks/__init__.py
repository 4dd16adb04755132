"""Reproducible measurements; run each as `python -m benchmarks.<name>` from the repo root."""
