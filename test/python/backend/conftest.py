"""Fixtures shared by the torch.compile backend tests (test_dynamo*.py) and
the stage cache tests (test_stage_cache.py, test_pre_export_cache.py)."""

import logging

import pytest


@pytest.fixture
def fresh():
    """A clean Dynamo cache, and (delta, warned): `delta(key)` the change of
    `torch_mlir_flex.dynamo.stats[key]` since the test began, `warned` the
    warnings of the torch_mlir_flex logger during the test."""
    import torch

    from torch_mlir_flex import dynamo, log

    torch._dynamo.reset()
    before = dict(dynamo.stats)
    with log.capture(logging.WARNING) as warned:
        yield lambda key: dynamo.stats[key] - before.get(key, 0), warned


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """The compile cache in a fresh directory, on (stage entries too), its
    statistics cleared."""
    from torch_mlir_flex.backend import cache, stage_cache

    monkeypatch.setenv(cache.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(stage_cache.ENABLE_ENV, raising=False)
    cache.stats.clear()
    return tmp_path
