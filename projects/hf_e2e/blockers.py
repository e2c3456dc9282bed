"""Families that still fail because of a fix another branch delivers
(issue 13). Each entry becomes xfail(strict=True): when the fix is merged the
test passes, strict xfail turns that into a failure, and the entry is removed.
"""

# Every HF model: rotary inv_freq / BERT position_ids are non-persistent
# buffers in ExportedProgram.constants ("import: AssertionError: Could not
# find state mapping for buffer") -> branch "front", issue 13 item 1.
FRONT_CONSTANTS = "front (issue 13 item 1): non-persistent buffers / ExportedProgram.constants import"
FRONT_GELU = "front (issue 13 item 3): tanh-GELU constant 0.7977240352174656 (logits off by ~1.7e-4)"
TMTENSOR_ERF = "tmtensor (issue 13 item 2): exact GELU -> math.erf has no LLVM translation"
TMTENSOR_CUMSUM = "tmtensor (issue 13 item 2): aten.cumsum -> tm_tensor.scan has no lowering"
TMTENSOR_MOE = "tmtensor (issue 13 item 2): MoE routing aten.histc / topk / sort / scatter lowerings"

ALL_FAMILIES = (FRONT_CONSTANTS,)

BLOCKERS = {
    "gemma2": (FRONT_GELU,),
    "gemma3": (FRONT_GELU,),
    "gpt_neox": (TMTENSOR_ERF,),
    "bert": (TMTENSOR_ERF,),
    "opt": (TMTENSOR_CUMSUM,),
    "mixtral": (TMTENSOR_MOE,),
    "gpt_oss": (TMTENSOR_MOE,),
}


def blockers(family_name):
    return ALL_FAMILIES + BLOCKERS.get(family_name, ())
