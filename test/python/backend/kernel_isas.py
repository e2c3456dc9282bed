"""The ISAs of the runtime's kernel files (lib/Runtime/Gemv/, Quant/) that
this host runs, read from its CPU flags (/proc/cpuinfo), not asked of the
runtime: the variants that test_gemv_kernels.py and test_quant_kernels.py
run and check the runtime's choice against."""

import os

from torch_mlir_flex.backend import cpu_features

FLAGS = cpu_features.host_cpu_flags()
X86 = os.uname().machine in ("x86_64", "AMD64")


def host_isas():
    """The ISAs whose kernels this host runs, lowest first."""
    isas = ["generic"]
    if X86 and {"avx2", "fma"} <= FLAGS:
        isas.append("avx2")
    if X86 and "avx512f" in FLAGS:
        isas.append("avx512")
    return isas


HOST_ISAS = host_isas()
