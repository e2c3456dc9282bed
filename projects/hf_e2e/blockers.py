"""(family, backend) pairs that still fail because of a fix another branch
delivers (issue 13). Each becomes xfail(strict=True, raises=...): when the
fix is merged the test passes, strict xfail reports that as a failure, and
the entry is removed here.
"""

# MoE routing sorts expert ids (int64): aten.sort on an int64 tensor gives
# wrong indices on the tiled pipeline (float sort and every reference-backend
# sort are right): logits off by ~3. Branch "tmtensor" (issue 13 item 2).
TMTENSOR_INT_SORT_TILED = ("tmtensor (issue 13 item 2): aten.sort of an int64 tensor returns wrong indices "
                           "on the tiled pipeline (MoE expert ordering); reference is right")

BLOCKERS = {
    ("mixtral", "tiled"): (TMTENSOR_INT_SORT_TILED,),
    ("gpt_oss", "tiled"): (TMTENSOR_INT_SORT_TILED,),
}


def blockers(family_name, backend):
    return BLOCKERS.get((family_name, backend), ())
