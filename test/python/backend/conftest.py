"""Fixtures shared by the torch.compile backend tests (test_dynamo*.py)."""

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
