"""Inputs and buffers a compiled program writes.

`torch.export` functionalizes in-place updates (`index_copy_` into a KV
cache, `copy_`, a buffer's `add_`): the exported program returns the new
value of each mutated user input (`USER_INPUT_MUTATION`) or buffer
(`BUFFER_MUTATION`) before its own outputs. `Mutations` reads that from the
graph signature when a program is compiled and refuses what a call cannot
write back (a frozen buffer, an output kind of training graphs). The
compiled function writes each new value into the caller's tensor itself
(`in_place`: destination passing, calling.py; one-shot bufferization
updates the cache where it stands, with no copy of it); `apply` copies
back only what a call had to pass as a copy (a non-contiguous tensor), so
that the compiled callable mutates what eager PyTorch mutates.
"""

from .errors import FlexCompileError


class Mutations:
    def __init__(self, ep, state_targets):
        from torch.export.graph_signature import InputKind, OutputKind

        sig = ep.graph_signature
        user_inputs = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
        state = list(state_targets) if state_targets is not None else None
        self.writes = []  # (result index, "input" | "state", index)
        self.user_results = []
        for i, spec in enumerate(sig.output_specs):
            if spec.kind == OutputKind.USER_OUTPUT:
                self.user_results.append(i)
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                self.writes.append((i, "input", user_inputs.index(spec.target)))
            elif spec.kind == OutputKind.BUFFER_MUTATION:
                if state is None or spec.target not in state:
                    raise FlexCompileError(
                        "export", f"the program mutates the buffer {spec.target!r}, which is frozen into "
                                  "the module as a constant (compile with weights_as_arguments=True)")
                self.writes.append((i, "state", state.index(spec.target)))
            else:
                raise FlexCompileError(
                    "export", f"output {i} of the exported program is a {spec.kind.name} "
                              f"({spec.target or spec.arg}); only user outputs and mutations of user "
                              "inputs and buffers are supported")

    def __bool__(self):
        return bool(self.writes)

    def in_place(self, num_state):
        """{result: argument of the compiled function} of every write (the
        state tensors are its `num_state` leading arguments)."""
        return {i: (num_state + k if kind == "input" else k) for i, kind, k in self.writes}

    def apply(self, results, args, state):
        """Writes the new values into `args` / `state` where the call did not
        (a result that is not the caller's tensor itself); returns the user
        outputs."""
        for i, kind, k in self.writes:
            dest = args[k] if kind == "input" else state[k]
            if results[i] is not dest:
                dest.copy_(results[i])
        return [results[i] for i in self.user_results]
