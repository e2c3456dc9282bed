"""Test tree (a package so that `python -m test.robustness.<tool>` finds our
robustness tools rather than the standard library's `test` package)."""
