"""The inputs of a graph Dynamo captured, as the arguments our compiled
function takes.

With dynamic shapes (automatic dynamic after a shape change, `dynamic=True`,
`mark_dynamic`) Dynamo's graph takes, besides tensors whose sizes are
symbols (`s77`), SymInt inputs: sizes of those tensors (`s77`, `s77 + 1`),
values Dynamo specialized (`1`), and Python ints it made dynamic (a
BlockMask's kv length, a mask_mod's offset). `GraphInputs.module()` wraps
the graph in a module whose arguments are the tensors and the dynamic ints
alone: sizes are read off the tensors' shapes, specialized values are
constants. `dynamic_shapes()` marks every symbolic tensor dim and every int
argument dynamic for `torch.export`; the ints become scalar arguments of
the compiled function (backend/calling.py). One compilation then serves
every size and value in the range of Dynamo's guards (outside it, Dynamo
recompiles; what the exported program rules out raises at the call).
A size Dynamo's guards fixed to a constant while tracing (a dim marked
dynamic that a `view(..., 2, 8)` pins to 16) is static for the export.
`dynamic_shapes(static)` keeps the symbols in `static` at their example
values (specialize.py: what torch.export refused), and a dynamic size whose
example is 0 or 1 (`(s0 + 127) // 128` blocks of a short sequence) static,
as torch.export would; Dynamo guards it (specialize.fix_small_sizes).
"""

from typing import List, Tuple


class UnsupportedInputs(Exception):
    """The graph's inputs cannot be taken; the message says why."""


def _expr(size):
    """The sympy expression of a SymInt, or None for an int: in the symbols
    Dynamo's shape environment kept (its replacements applied: an int input
    that a guard made equal to a size is that size)."""
    node = getattr(size, "node", None)
    expr = getattr(node, "expr", None)
    env = getattr(node, "shape_env", None)
    if expr is not None and env is not None:
        expr = env.replace(expr)
    return expr


def _dynamic(size) -> bool:
    """Whether a size is a symbol or an expression of symbols (not an int,
    nor a SymInt Dynamo's guards fixed to a constant)."""
    e = _expr(size)
    return e is not None and not e.is_number


def _small(size) -> bool:
    """Whether a size is dynamic with an example of 0 or 1 (an expression
    such as `(s0 + 127) // 128`: Dynamo keeps no symbol of its own for a
    size 1). torch.export fixes every such dim to its example ("0/1
    specialized") and fails when asked to keep it dynamic, so it is static
    for the export, with a Dynamo guard (`GraphInputs.small_sizes`)."""
    hint = getattr(getattr(size, "node", None), "hint", None)
    return hint in (0, 1) and _dynamic(size)


def _code(expr, name) -> str:
    """Python source of `expr` (sympy: integers, symbols, +, *, floor
    division), a symbol written as `name(symbol)`."""
    import sympy

    if isinstance(expr, sympy.Integer):
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return name(expr)
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        op = " + " if isinstance(expr, sympy.Add) else " * "
        return "(" + op.join(_code(a, name) for a in expr.args) + ")"
    if type(expr).__name__ == "FloorDiv":
        return f"({_code(expr.args[0], name)} // {_code(expr.args[1], name)})"
    raise UnsupportedInputs(f"a SymInt input is {expr}, which the backend cannot compute from the inputs")


def _evaluate(expr, values):
    """`expr` with the symbols' values (ints or torch SymInts while exporting)."""
    order = {sym: i for i, sym in enumerate(values)}
    return eval(_code(expr, lambda sym: f"v[{order[sym]}]"), {"v": list(values.values())})


def _symbol_values(symbols, args):
    """The value of each symbol in a call of the compiled function: an int
    argument, or a dim of a tensor argument (`GraphInputs.symbols`)."""
    return {sym: args[k] if d is None else args[k].shape[d] for sym, (k, d) in symbols.items()}


class GraphInputs:
    """`arguments`: the positions of Dynamo's inputs the compiled function
    takes (tensors, dynamic ints); `sources[i]` for every input: ("arg", k),
    ("const", value) or ("expr", sympy expression over `symbols`)."""

    def __init__(self, gm, example_inputs):
        import sympy
        import torch

        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise UnsupportedInputs(f"the graph has {len(placeholders)} inputs but Dynamo gave "
                                    f"{len(example_inputs)} examples")
        self._select = None
        self.arguments: List[int] = []
        self.examples: List = []  # tensors, and ints for the dynamic ints
        self.fake_shapes: List = []  # per argument: its shape, or None for an int
        self.symbols = {}  # sympy symbol -> (argument k, dim d or None for an int argument)
        self.sym_ints = {}  # sympy symbol -> a SymInt of Dynamo's that it is (to guard on)
        for i, (node, x) in enumerate(zip(placeholders, example_inputs)):
            if not isinstance(x, torch.Tensor):
                continue
            fake = _node_value(node)
            shape = tuple(fake.shape) if isinstance(fake, torch.Tensor) else tuple(x.shape)
            for d, size in enumerate(shape):
                e = _expr(size)
                if isinstance(e, sympy.Symbol):
                    self.symbols.setdefault(e, (len(self.arguments), d))
                    self.sym_ints.setdefault(e, size)
            self.arguments.append(i)
            self.examples.append(x)
            self.fake_shapes.append(shape)
        self.sources: List[Tuple] = []
        for i, (node, x) in enumerate(zip(placeholders, example_inputs)):
            if isinstance(x, torch.Tensor):
                self.sources.append(("arg", self.arguments.index(i)))
                continue
            if not isinstance(x, torch.SymInt):
                raise UnsupportedInputs(f"input {i} ({node.name}) is a {type(x).__name__}; only tensors "
                                        "and ints are supported")
            e = _expr(x)
            if e.is_number:
                self.sources.append(("const", int(e)))
            elif e.free_symbols <= set(self.symbols):
                self.sources.append(("expr", e))
            elif isinstance(e, sympy.Symbol):
                # A dynamic Python int: a scalar argument of its own.
                self.symbols[e] = (len(self.arguments), None)
                self.sym_ints[e] = x
                self.sources.append(("arg", len(self.arguments)))
                self.arguments.append(i)
                self.examples.append(int(x.node.hint))
                self.fake_shapes.append(None)
            else:
                raise UnsupportedInputs(f"input {i} ({node.name}) is the SymInt {e}, an expression of "
                                        "ints that are not inputs of the graph")

    @property
    def is_dynamic(self) -> bool:
        return any(shape is None or any(_dynamic(s) for s in shape) for shape in self.fake_shapes)

    @property
    def is_identity(self) -> bool:
        """The compiled function takes Dynamo's inputs as they are."""
        return all(src == ("arg", i) for i, src in enumerate(self.sources)) and \
            len(self.arguments) == len(self.sources)

    def dynamic_shapes(self, static=frozenset()):
        """torch.export's `dynamic_shapes` for `module()`, or None when no
        size is dynamic: every symbolic dim and every int dynamic
        (`Dim.DYNAMIC`: export fails, rather than specializing, when the
        graph rules a size out), except those of the symbols in `static`."""
        from torch.export import Dim

        def dim_spec(shape):
            dims = {d: Dim.DYNAMIC for d, s in enumerate(shape)
                    if _dynamic(s) and not _small(s) and not _expr(s).free_symbols & set(static)}
            return dims or None

        ints = {k: sym for sym, (k, d) in self.symbols.items() if d is None}
        specs = tuple((None if ints[k] in static else Dim.DYNAMIC) if shape is None else dim_spec(shape)
                      for k, shape in enumerate(self.fake_shapes))
        return (specs,) if any(s is not None for s in specs) else None

    @property
    def small_sizes(self) -> list:
        """Dynamo's SymInts of the dynamic tensor sizes whose example is 0
        or 1, which `dynamic_shapes` leaves static (`_small`)."""
        return [s for shape in self.fake_shapes if shape is not None for s in shape if _small(s)]

    def symbols_at(self, positions):
        """The symbols of the sizes at `positions`: (argument k, dim d), d
        None for an int argument."""
        out = set()
        for k, d in positions:
            if not 0 <= k < len(self.fake_shapes):
                continue
            shape = self.fake_shapes[k]
            if shape is None:
                out |= {sym for sym, (kk, dd) in self.symbols.items() if kk == k and dd is None}
            elif d is not None and 0 <= d < len(shape) and _dynamic(shape[d]):
                out |= set(_expr(shape[d]).free_symbols) & set(self.symbols)
        return out

    def module(self, gm):
        """`gm` as a module of the arguments alone."""
        return _ArgumentsOnly(gm, self.sources, self.symbols)

    def select(self, args):
        """A call's arguments from Dynamo's inputs."""
        if self._select is None:
            import operator

            get = operator.itemgetter(*self.arguments) if self.arguments else (lambda a: ())
            one = len(self.arguments) == 1
            self._select = (lambda a: (get(a),)) if one else get
        return self._select(args)


def _module_base():
    import torch

    return torch.nn.Module


class _ArgumentsOnly(_module_base()):
    def __init__(self, gm, sources, symbols):
        super().__init__()
        self.gm = gm
        self.sources = sources
        self.symbols = symbols

    def forward(self, *args):
        values = _symbol_values(self.symbols, args)
        inputs = []
        for kind, v in self.sources:
            if kind == "arg":
                inputs.append(args[v])
            elif kind == "const":
                inputs.append(v)
            else:
                inputs.append(_evaluate(v, values))
        return self.gm(*inputs)


class GraphOutputs:
    """Outputs of Dynamo's graph that the compiled function does not
    compute: ints (sizes it returns, `s77 + 1`), computed from the call's
    inputs (`values` of the symbols); inputs returned as they are, `None`,
    and a tensor returned twice (AOTAutograd's forward graphs return the
    inputs they save for the backward, its backward graphs `None` for
    inputs without gradient). The compiled function returns the other
    tensors, once each."""

    def __init__(self, gm, inputs: GraphInputs):
        import torch

        out = next(n for n in gm.graph.nodes if n.op == "output")
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # per output: ("tensor", None) | ("int", expr or int) | ("input", argument k)
        #             | ("none", None) | ("same", earlier output i)
        self.items = []
        first = {}
        for i, v in enumerate(out.args[0]):
            val = _node_value(v) if isinstance(v, torch.fx.Node) else v
            if v is None:
                self.items.append(("none", None))
            elif isinstance(v, torch.fx.Node) and v.op == "placeholder" and isinstance(val, torch.Tensor):
                self.items.append(("input", inputs.arguments.index(placeholders.index(v))))
            elif isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
                e = _expr(val)
                if e is not None and not e.is_number and not e.free_symbols <= set(inputs.symbols):
                    raise UnsupportedInputs(f"output {i} is the SymInt {e}, which the backend cannot "
                                            "compute from the inputs")
                self.items.append(("int", int(val) if e is None else (int(e) if e.is_number else e)))
            elif isinstance(v, torch.fx.Node) and v in first:
                self.items.append(("same", first[v]))
            else:
                if isinstance(v, torch.fx.Node):
                    first[v] = i
                self.items.append(("tensor", None))
        self.inputs = inputs
        self._merge = None

    @property
    def all_tensors(self) -> bool:
        return all(kind == "tensor" for kind, _ in self.items)

    def tensor_graph(self, gm):
        """A copy of `gm` returning its computed tensor outputs alone."""
        import copy

        if self.all_tensors:
            return gm
        gm = copy.copy(gm)
        gm.graph = copy.deepcopy(gm.graph)
        out = next(n for n in gm.graph.nodes if n.op == "output")
        out.args = (tuple(v for v, (kind, _) in zip(out.args[0], self.items) if kind == "tensor"),)
        gm.graph.eliminate_dead_code()
        gm.recompile()
        return gm

    def merge(self, tensors, args):
        """Dynamo's outputs from the compiled function's tensors and the call's arguments."""
        if self._merge is None:
            self._merge = self._merge_function()
        return self._merge(tensors if isinstance(tensors, (tuple, list)) else (tensors,), args)

    def _merge_function(self):
        """`merge` as one generated expression: `t` the tensors, `a` the
        arguments (a size is read off its tensor where it is used)."""

        def name(sym):
            k, d = self.inputs.symbols[sym]
            return f"a[{k}]" if d is None else f"a[{k}].shape[{d}]"

        parts, n = [], 0
        for kind, v in self.items:
            if kind == "tensor":
                parts.append(f"t[{n}]")
                n += 1
            elif kind == "int":
                parts.append(str(v) if isinstance(v, int) else _code(v, name))
            elif kind == "input":
                parts.append(f"a[{v}]")
            elif kind == "same":
                parts.append(parts[v])
            else:
                parts.append("None")
        return eval("lambda t, a: (" + "".join(p + ", " for p in parts) + ")")


def _node_value(node):
    """A node's example value: Dynamo's graphs keep it as `example_value`,
    AOTAutograd's as `val`."""
    return node.meta.get("example_value", node.meta.get("val"))
