"""Shared by every pytest file below test/python: our LLVM loads first, and
`fresh`, the fixture of the torch.compile backend tests."""

# Our MLIR/LLVM must load before torch-mlir's (see torch_mlir_flex._load_order).
import torch_mlir_flex  # noqa: F401

import logging

import pytest


@pytest.fixture
def fresh():
    """A clean Dynamo cache and counters, and (delta, warned): `delta(key)` the change of
    `torch_mlir_flex.dynamo.stats[key]` since the test began, `warned` the
    warnings of the torch_mlir_flex logger during the test."""
    import torch

    from torch_mlir_flex import dynamo, log

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()  # graph breaks, unique graphs
    before = dict(dynamo.stats)
    with log.capture(logging.WARNING) as warned:
        yield lambda key: dynamo.stats[key] - before.get(key, 0), warned
