"""Exception classes of the backend (no imports, so that every backend module
and the package root can use them without import cycles).

FlexBackendError
└── FlexCompileError          .stage: export/import/frontend/materialize/lower/call
    ├── FlexRuntimeError      a check inside the compiled code failed (stage 'call')
    │   └── FlexIndexError    ... an index check (also an IndexError)
    ├── FlexMemoryError       a tensor larger than the host's memory (also a MemoryError)
    └── FlexRangeError        a dynamic size outside the range the program was exported for
"""


class FlexBackendError(RuntimeError):
    """A module could not be compiled or called by our backend."""


class FlexCompileError(FlexBackendError):
    """A model or module could not be compiled or called; `.stage` names the
    step: ``export``, ``import``, ``frontend``, ``materialize``, ``lower`` or
    ``call``. The message starts with the stage."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage


class FlexRuntimeError(FlexCompileError):
    """A check executed by the compiled code failed (the runtime status
    contract, docs/runtime.md); the outputs of that call are discarded."""

    def __init__(self, message: str):
        super().__init__("call", message)


class FlexIndexError(FlexRuntimeError, IndexError):
    """A runtime index check failed (the message starts with "index")."""


class FlexMemoryError(FlexCompileError, MemoryError):
    """A tensor the compiled code would allocate is larger than this host's
    memory (shapes.py): raised when compiling (static shape) or before the
    call (from the call's sizes); the message names its shape and bytes."""


class FlexRangeError(FlexCompileError):
    """A call's dynamic size lies outside the range of its symbol in the
    ExportedProgram (torch.export narrows a range when tracing guards on a
    size, e.g. on whether `ceil(L / 128)` is 1): raised before the call;
    the message names the argument, the dim and the range."""
