"""(family, backend) pairs that still fail because of a fix another branch
delivers (issue 13). Each becomes xfail(strict=True, raises=...) in
test_families.py: when the fix is merged the test passes, strict xfail
reports that as a failure, and the entry is removed here.

Empty: with branches "front" and "tmtensor" merged every family passes on
both backends. Example entry:
    ("mixtral", "tiled"): ("tmtensor (issue 13 item 2): <the error left>",)
"""

BLOCKERS = {}


def blockers(family_name, backend):
    return BLOCKERS.get((family_name, backend), ())
