"""Families that still fail because of a fix another branch delivers
(issue 13). Each entry becomes xfail(strict=True): when the fix is merged the
test passes, strict xfail turns that into a failure, and the entry is removed.
"""

TMTENSOR_ERF = "tmtensor (issue 13 item 2): exact GELU -> math.erf has no LLVM translation"
TMTENSOR_CUMSUM = "tmtensor (issue 13 item 2): aten.cumsum -> tm_tensor.scan has no lowering"
TMTENSOR_MOE = "tmtensor (issue 13 item 2): MoE routing aten.histc / topk / sort / scatter lowerings"

BLOCKERS = {
    "gpt_neox": (TMTENSOR_ERF,),
    "bert": (TMTENSOR_ERF,),
    "opt": (TMTENSOR_CUMSUM,),
    "mixtral": (TMTENSOR_MOE,),
    "gpt_oss": (TMTENSOR_MOE,),
}


def blockers(family_name):
    return BLOCKERS.get(family_name, ())
