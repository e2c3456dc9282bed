"""Whole-model benchmark (`python -m benchmarks.models`, docs/dense-ops.md)."""
