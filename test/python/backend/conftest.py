"""Fixtures of the stage cache tests (test_stage_cache.py,
test_pre_export_cache.py; `fresh` is test/python/conftest.py's) and of the
int8-activation tests (test_quant_int8_activations*.py)."""

import pytest


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


@pytest.fixture
def int8_on():
    """The int4 products' int8-activation switch on (blas.set_quant_activations)
    for one test, then back as it was."""
    from torch_mlir_flex.backend import blas

    before = blas.quant_activations()
    assert blas.set_quant_activations("int8") == "int8"
    yield
    blas.set_quant_activations(before)
