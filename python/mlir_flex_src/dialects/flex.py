"""Python bindings of the flex dialect (generated op classes)."""

from ._flex_ops_gen import *  # noqa: F401,F403
