"""pytest: the backend's pipelines are ordered lists of named stages
(backend/pipelines.py): a reason each, unique names, the optional stages
present exactly when their options ask, in the list's order, and every
assembled pipeline parses as an MLIR pass pipeline."""

import pytest

from torch_mlir_flex.backend import pipelines
from torch_mlir_flex.backend.pipelines import (PIPELINES, REFERENCE_STAGES, TILED_STAGES,
                                               TO_LLVM_STAGES, LoweringOptions, assemble,
                                               tiled_pipeline)
from torch_mlir_flex.mlir import ir, passmanager

LISTS = {"reference": REFERENCE_STAGES, "tiled": TILED_STAGES, "to_llvm": TO_LLVM_STAGES}


@pytest.mark.parametrize("name", list(LISTS))
def test_names_unique_and_a_reason_each(name):
    stages = LISTS[name]
    names = [s.name for s in stages]
    assert len(set(names)) == len(names)
    for s in stages:
        assert isinstance(s.why, str) and len(s.why.strip()) > 10 and "\n" not in s.why, s.name


def test_both_pipelines_end_in_the_llvm_stages():
    n = len(TO_LLVM_STAGES)
    assert REFERENCE_STAGES[-n:] == TO_LLVM_STAGES and TILED_STAGES[-n:] == TO_LLVM_STAGES


def test_reference_is_its_stage_list():
    assert PIPELINES["reference"] == assemble(REFERENCE_STAGES, LoweringOptions())
    assert "convert-linalg-to-loops,flex-widen-i1-memrefs" in PIPELINES["reference"]
    assert "flex-to-flash" not in PIPELINES["reference"]


def _positions(text, passes):
    return [text.index(p) for p in passes]


@pytest.mark.parametrize("blas", [False, True])
def test_blas_stages(blas):
    text = tiled_pipeline(blas=blas, openmp=False)
    assert ("flex-fold-matmul-operands" in text) == blas
    assert ("flex-matmul-to-blas" in text) == blas
    if blas:  # operands folded before the flash lowering, the calls after deallocation
        pos = _positions(text, ["flex-fold-matmul-operands", "flex-to-flash", "flex-free-after-last-use",
                                "flex-matmul-to-blas"])
        assert pos == sorted(pos)


@pytest.mark.parametrize("openmp", [False, True])
def test_openmp_stages(openmp):
    text = tiled_pipeline(openmp=openmp, parallel_rows=True, spread_workers=False,
                          small_ops_when_awake=False)
    assert ("convert-scf-to-openmp{num-threads=0}" in text) == openmp
    assert ("scf-forall-to-for" in text) == (not openmp)
    assert ("convert-cf-to-llvm,convert-openmp-to-llvm,reconcile" in text) == openmp
    assert ("flex-parallel-rows" in text) == openmp
    assert ("serial-below-us=250" in text) == openmp


def test_tiled_runs_linalg_to_loops_per_function_only():
    text = tiled_pipeline()
    assert "func.func(convert-linalg-to-loops)" in text
    assert ",convert-linalg-to-loops," not in text
    assert "flex-expand-math{approximate-exp=1}" in text


def test_stage_order_is_the_list_order():
    o = LoweringOptions(tiled=True, openmp=True, blas=True, parallel_rows=True, fuse_elementwise=True)
    names = [s.name for s in TILED_STAGES if s.when(o)]
    assert names.index("fuse-elementwise") < names.index("unshare-inits") < names.index("bufferize")
    assert "foralls-to-loops" not in names and "amx-contractions" not in names
    text = assemble(TILED_STAGES, o)
    texts = [s.text(o) for s in TILED_STAGES if s.when(o)]
    assert _positions(text, texts) == sorted(_positions(text, texts))


@pytest.mark.parametrize("variant", ["reference", "tiled-1t", "tiled", "blas-off", "fuse-off", "omp-all"])
def test_every_pipeline_parses(variant):
    text = {
        "blas-off": lambda: tiled_pipeline(blas=False),
        "fuse-off": lambda: tiled_pipeline(fuse_elementwise=False),
        "omp-all": lambda: tiled_pipeline(openmp=True, small_ops_when_awake=True, spread_workers=True,
                                          num_threads=2, split_keys_tasks=8),
    }.get(variant, lambda: pipelines.get_pipeline(variant))()
    with ir.Context() as ctx:
        pm = passmanager.PassManager.parse(text, ctx)
    assert "flex-insert-checks" in str(pm)
