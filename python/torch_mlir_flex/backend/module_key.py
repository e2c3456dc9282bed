"""A key for compile()'s result computed before torch.export.

stage_cache.py keys the imported stage on the exported program, so a
cached compile still ran torch.export: 4-5 s of the 5-6 s that a new
process took to its first token of a 24-layer Qwen2-0.5B-shaped model.
`module_key` describes what the export of an nn.Module reads instead:

- the code: every method of every class in the module tree (their code
  objects: bytecode, constants, names), the functions the modules' own
  Python modules hold as globals (a monkeypatched helper changes the key),
  the source files of those classes, and the global module hooks; torch's
  own classes and modules by the torch version alone;
- the state: every module's attributes (numbers, strings, configs and
  other plain objects field by field, functions by their code and closure,
  hooks), its parameters' and buffers' names, shapes, strides, dtypes and
  aliasing, the values of its buffers and of tensors it holds outside
  them, and a tensor subclass parameter (a torchao quantized weight) by
  the type and `__tensor_flatten__` context of the subclass and its inner
  tensors, values included (subclass_state.py);
- the call: each example argument's shape, strides and dtype (an int's
  value), `dynamic_shapes`, the default dtype, the grad mode, and the
  `TORCH_MLIR_FLEX_*` environment (which switches parts of the importer);
- `stage_cache.build_id()`: this package, torch, torch-mlir, transformers.

An FX GraphModule in the tree (the graphs Dynamo and AOTAutograd hand the
torch.compile backend, wrapped by dynamo/graph_inputs.py) is described by
its printed code instead (`_Describer.graph_module`: nodes with shapes,
strides, dtypes, nested score_mod / mask_mod graphs), its get_attr
constants by value, and the Python functions its nodes call by code: a
new process's training step then compiles its forward and backward graphs
without torch.export (docs/training.md, "Warm restarts").

An attribute of a kind it cannot describe (an object with neither fields
nor a known type) makes the key None: compile() then exports as before.
Weights are arguments of the compiled function, so the values of plain
ones are not part of the key; those a flex_attention modifier captures become literals
of the module and are checked by value when the entry is loaded
(`PreExport.load`, pre_export_cache.py), as are the source files named in the exported
graph's stack traces (where the traced code lives, beyond the classes).
`TORCH_MLIR_FLEX_STAGE_CACHE=0` turns this off with the other stage
entries.
"""

import enum
import functools
import hashlib
import inspect
import os
import re
import sys
import types

# Attributes and environment variables that do not change what is compiled.
_ENV_IGNORED = ("TORCH_MLIR_FLEX_CACHE_DIR", "TORCH_MLIR_FLEX_CACHE_SIZE_MB", "TORCH_MLIR_FLEX_LOG",
                "TORCH_MLIR_FLEX_DUMP_DIR", "TORCH_MLIR_FLEX_AOT_CACHE")
# Process-dependent values that transformers keeps beside the model (a
# generation config's hash of itself).
_ATTRS_IGNORED = ("_original_object_hash",)
_MAX_PARTS = 400_000  # a description longer than this is not worth keeping
_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)


class _Undescribable(Exception):
    pass


def _is_torch(modname: str) -> bool:
    """torch's own classes and modules: the torch version in build_id()
    stands for their code (which torch itself patches at run time: Dynamo
    replaces nn.Module.__init__ at its first use)."""
    return modname == "torch" or modname.startswith("torch.")


def _code_digest(code: types.CodeType, h) -> None:
    h.update(code.co_qualname.encode() + b"\0" + code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_argcount,
                   code.co_kwonlyargcount, code.co_flags)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_digest(c, h)
        else:
            h.update(_stable_repr(c).encode())


def _stable_repr(c) -> str:
    """repr of a constant, sets in sorted order (their order follows the
    per-process string hash)."""
    if isinstance(c, (set, frozenset)):
        return f"{type(c).__name__}({sorted(map(_stable_repr, c))})"
    if isinstance(c, tuple):
        return "(" + ",".join(map(_stable_repr, c)) + ")"
    return repr(c)


@functools.lru_cache(maxsize=4096)
def _code_hash(code: types.CodeType) -> str:
    h = hashlib.sha256()
    _code_digest(code, h)
    return h.hexdigest()[:24]


def file_hash(path: str):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:24]
    except OSError:
        return None


def tensor_hash(t) -> str:
    """A hash of a tensor's dtype, shape and values (also the stage cache's
    literals: stage_cache.program_fingerprint); of a tensor subclass (a
    quantized weight), of its type, flatten context and inner tensors."""
    import torch

    from .subclass_state import inner_tensors, is_subclass

    if is_subclass(t):
        h = _context_digest(t)
        for path, inner in inner_tensors(t):
            h.update(f"\0{path} {inner.stride()} {tensor_hash(inner)}".encode())
        return h.hexdigest()[:24]
    t = t.detach().contiguous().cpu()
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)  # no copy of the bytes
    return h.hexdigest()[:24]


# (tensor identity, version counter) -> hash of a subclass parameter's inner
# tensor, for the compiles of one process (hf.generator's prefill and
# decode read the same weights: a 1.5B-parameter int8 model is 1.5 GB to
# hash, about 1 s). In-place updates bump the version counter; a write it
# does not see (through `.data`) can only make a hit where a miss was due,
# which is harmless here: these tensors are runtime arguments of the
# compiled code, their values not part of it (with weights_as_arguments
# False they are literals, checked by value when loading, pre_export_cache.py).
_INNER_HASHES = {}


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _context_digest(t):
    """A sha256 object fed with the subclass types and flatten contexts of `t`."""
    from .subclass_state import flatten_context

    ctx = repr([(p, f"{c.__module__}.{c.__qualname__}", _stable_repr(x)) for p, c, x in flatten_context(t)])
    return hashlib.sha256(re.sub(r" at 0x[0-9a-f]+", "", ctx).encode())  # no object addresses


def _quantized_hash(t) -> str:
    """tensor_hash of a subclass parameter, its inner tensors' hashes kept per process."""
    from .subclass_state import inner_tensors

    h = _context_digest(t)
    for path, inner in inner_tensors(t):
        ident = (inner.data_ptr(), inner.storage_offset(), tuple(inner.shape), inner.stride(), inner.dtype,
                 inner._version)
        if ident not in _INNER_HASHES:
            if len(_INNER_HASHES) > 4096:
                _INNER_HASHES.clear()
            _INNER_HASHES[ident] = tensor_hash(inner)
        h.update(f"\0{path} {_INNER_HASHES[ident]}".encode())
    return h.hexdigest()[:24]


class _Describer:
    def __init__(self, modules):
        self.parts = []
        self.files = set()
        self.classes = {}
        self.objects = {}  # id -> index of an object described once
        self.paths = {id(m): name for name, m in modules}  # module tree: by path

    def add(self, s: str):
        self.parts.append(s)
        if len(self.parts) > _MAX_PARTS:
            raise _Undescribable("the model's description is too long")

    def cls(self, c: type):
        """A class: its methods' code, once per class and compile."""
        if c in self.classes:
            return self.classes[c]
        h = hashlib.sha256(f"{c.__module__}.{c.__qualname__}".encode())
        self.classes[c] = None  # recursion guard
        for base in c.__mro__:
            if base is object or _is_torch(base.__module__):
                continue
            try:
                src = inspect.getsourcefile(base)
            except (TypeError, OSError):  # a builtin or generated class
                src = None
            if src:
                self.files.add(src)
            for name, v in sorted(vars(base).items()):
                h.update(f"\0{base.__qualname__}.{name}=".encode())
                h.update(self.callable_id(v, strict=False).encode())
                if isinstance(v, types.FunctionType):
                    self.files.add(v.__code__.co_filename)
        self.classes[c] = h.hexdigest()[:24]
        return self.classes[c]

    def callable_id(self, v, strict=True) -> str:
        """Code identity of a function-like value (strict: else raise)."""
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if isinstance(v, property):
            return "property(" + ",".join(self.callable_id(f, strict) for f in (v.fget, v.fset)) + ")"
        if isinstance(v, functools.partial):
            return f"partial({self.callable_id(v.func, strict)})"
        if isinstance(v, types.MethodType):
            return f"method({self.callable_id(v.__func__, strict)})"
        if isinstance(v, types.FunctionType):
            return f"fn {v.__module__}.{v.__qualname__} {_code_hash(v.__code__)}"
        if isinstance(v, _PRIMITIVES):
            return repr(v)
        if isinstance(v, (types.BuiltinFunctionType, types.WrapperDescriptorType,
                          types.MethodDescriptorType, types.MethodWrapperType, type)):
            return f"{type(v).__name__} {getattr(v, '__module__', '')}.{getattr(v, '__qualname__', '')}"
        if strict:
            raise _Undescribable(f"a {type(v).__name__}")
        return type(v).__qualname__

    def module_globals(self, modname: str):
        """The functions a Python module holds (a replaced helper changes
        the key), and its source file."""
        mod = sys.modules.get(modname)
        if mod is None or _is_torch(modname):
            return
        src = getattr(mod, "__file__", None)
        if src:
            self.files.add(src)
        for name, v in sorted(vars(mod).items(), key=lambda kv: kv[0]):
            if isinstance(v, (types.FunctionType, functools.partial)):
                self.add(f"g {modname}.{name}={self.callable_id(v, strict=False)}")

    def value(self, v, depth=0):
        import torch

        if depth > 12:
            raise _Undescribable("attributes nested too deeply")
        if isinstance(v, _PRIMITIVES):
            self.add(f"{type(v).__name__}:{v!r}")
        elif isinstance(v, enum.Enum):
            self.add(f"enum {type(v).__qualname__}.{v.name}")
        elif isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)):
            self.add(repr(v))
        elif isinstance(v, torch.nn.Module):
            if id(v) not in self.paths:
                raise _Undescribable(f"a {type(v).__name__} outside the module tree")
            self.add(f"module@{self.paths[id(v)]}")
        elif isinstance(v, torch.Tensor):
            self.add(f"tensor {tuple(v.shape)} {v.stride()} {v.dtype} {tensor_hash(v)}")
        elif isinstance(v, (list, tuple, set, frozenset)):
            items = sorted(v, key=_stable_repr) if isinstance(v, (set, frozenset)) else v
            self.add(f"{type(v).__name__}[{len(items)}")
            for x in items:
                self.value(x, depth + 1)
            self.add("]")
        elif isinstance(v, dict):
            self.add(f"{type(v).__name__}{{{len(v)}")
            for k, x in v.items():
                self.value(k, depth + 1)
                self.value(x, depth + 1)
            self.add("}")
        elif isinstance(v, types.FunctionType):
            self.add(self.callable_id(v))
            self.files.add(v.__code__.co_filename)
            for part in (v.__defaults__, v.__kwdefaults__):
                self.value(part, depth + 1)
            for cell in v.__closure__ or ():
                try:
                    self.value(cell.cell_contents, depth + 1)
                except ValueError:  # an empty cell
                    self.add("cell")
        elif isinstance(v, types.MethodType):
            self.add("bound")
            self.value(v.__func__, depth + 1)
            self.value(v.__self__, depth + 1)
        elif isinstance(v, (functools.partial, types.BuiltinFunctionType, type)):
            self.add(self.callable_id(v))
            if isinstance(v, functools.partial):
                self.value((v.func, v.args, v.keywords), depth + 1)
        elif hasattr(v, "__dict__"):
            if id(v) in self.objects:  # described before (a shared config), or a cycle
                self.add(f"ref {self.objects[id(v)]}")
                return
            self.objects[id(v)] = len(self.objects)
            self.add(f"obj {self.cls(type(v))}")
            self.value({k: x for k, x in sorted(vars(v).items()) if k not in _ATTRS_IGNORED}, depth + 1)
        elif type(v).__module__.split(".")[0] == "sympy":  # a symbol of Dynamo's sizes (graph_inputs.py)
            import sympy

            self.add(f"sympy {sympy.srepr(v)}")
        else:
            raise _Undescribable(f"a {type(v).__qualname__}")

    def graph_module(self, gm):
        """An FX GraphModule (a graph Dynamo or AOTAutograd captured) by
        its code, with every node's shape, strides, dtype and device and
        its nested graphs (a flex_attention's score_mod), the constants
        its get_attr nodes read, and the Python functions its nodes call
        or take (by code and closure; torch's by name)."""
        import torch
        from torch.fx.node import map_aggregate

        try:
            text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
        except Exception as e:  # a graph torch cannot print: exported as before
            raise _Undescribable(f"a graph torch cannot print ({type(e).__name__})") from None
        # Without comments (source lines, `<eval_with_key>.N` counters) and
        # object addresses, which differ between processes.
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        self.add(re.sub(r" at 0x[0-9a-f]+", "", code))

        def leaf(x):
            if isinstance(x, (types.FunctionType, functools.partial)) and \
                    not _is_torch(getattr(x, "__module__", None) or ""):
                self.value(x)
            return x

        for sub in gm.modules():
            if not isinstance(sub, torch.fx.GraphModule):
                continue
            for node in sub.graph.nodes:
                if node.op == "call_function":
                    leaf(node.target)
                    map_aggregate((node.args, node.kwargs), leaf)
                elif node.op == "get_attr":
                    owner = sub
                    for part in node.target.split("."):
                        owner = getattr(owner, part, None)
                    self.add(f"get_attr {node.target}")
                    self.value(owner)


def _inside_graph_modules(modules) -> set:
    """Paths of the modules a GraphModule's printed code describes: the
    GraphModules nested in another one (score_mod, mask_mod graphs)."""
    import torch

    graphs = {name for name, m in modules if isinstance(m, torch.fx.GraphModule)}
    return {name for name in graphs
            if any(name.startswith(g + ".") or (g == "" and name) for g in graphs if g != name)}


def module_key(model, example_args, dynamic_shapes, *extra):
    """(key, None) of compiling `model` on `example_args`, or (None, reason)
    when part of it cannot be described."""
    import torch

    from .subclass_state import SubclassError, inner_tensors, is_subclass

    modules = list(model.named_modules(remove_duplicate=False))
    d = _Describer(modules)
    nested = _inside_graph_modules(modules)
    try:
        for name, m in modules:
            if isinstance(m, torch.fx.GraphModule):
                if name not in nested:
                    d.add(f"G {name}")
                    d.graph_module(m)
                continue
            d.add(f"M {name} {d.cls(type(m))}")
            for attr, v in sorted(vars(m).items()):
                if attr in ("_parameters", "_buffers", "_modules"):
                    continue
                d.add(f".{attr}")
                d.value(v)
        for modname in sorted({type(m).__module__ for _, m in modules
                               if not isinstance(m, torch.fx.GraphModule)}):
            d.module_globals(modname)
        first = {}
        for kind, named in (("p", model.named_parameters(remove_duplicate=False)),
                            ("b", model.named_buffers(remove_duplicate=False))):
            for name, t in named:
                d.add(f"{kind} {name} {tuple(t.shape)} {t.stride()} {t.dtype} {t.requires_grad} {t.device}")
                # A subclass (a quantized weight) by its inner tensors,
                # values included: those are what the program reads.
                for path, inner in inner_tensors(t):
                    where = (inner.untyped_storage().data_ptr(), inner.storage_offset(), tuple(inner.shape),
                             inner.stride())
                    alias = first.setdefault(where, f"{name}.{path}" if path else name)
                    d.add(f" {path} {tuple(inner.shape)} {inner.stride()} {inner.dtype} ={alias}")
                if kind == "b":
                    if _is_fake(t):  # no values to describe it by
                        raise _Undescribable(f"buffer {name}, a fake tensor")
                    d.add(tensor_hash(t))
                elif is_subclass(t):
                    d.add(_quantized_hash(t))
        for i, a in enumerate(example_args):
            if isinstance(a, torch.Tensor):
                d.add(f"arg{i} {tuple(a.shape)} {a.stride()} {a.dtype} {a.device} {a.requires_grad}")
            elif isinstance(a, (int, float, bool)):
                d.add(f"arg{i} {type(a).__name__} {a!r}")
            else:
                raise _Undescribable(f"example argument {i}, a {type(a).__name__}")
        d.add(f"dynamic {_dims(dynamic_shapes)}")
        from torch.nn.modules import module as nn_module

        for hooks in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks"):
            d.value(dict(getattr(nn_module, hooks, {})))
    except _Undescribable as e:
        return None, f"the model holds {e}"
    except SubclassError as e:
        return None, f"the model holds a tensor subclass with a non-tensor part: {e}"
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("TORCH_MLIR_FLEX_") and k not in _ENV_IGNORED)
    h = hashlib.sha256("\n".join(d.parts).encode())
    h.update(repr((env, torch.get_default_dtype(), torch.is_grad_enabled(), extra)).encode())
    for path in sorted(d.files):
        h.update(f"\0{path}:{file_hash(path)}".encode())
    return h.hexdigest(), None


def _dims(spec) -> str:
    """dynamic_shapes with each Dim by name and range."""
    if spec is None or isinstance(spec, (int, str)):
        return repr(spec)
    if isinstance(spec, dict):
        return "{" + ",".join(f"{k!r}:{_dims(v)}" for k, v in spec.items()) + "}"
    if isinstance(spec, (list, tuple)):
        return "(" + ",".join(_dims(v) for v in spec) + ")"
    return f"{type(spec).__name__}({spec!r},{getattr(spec, '__name__', '')},{getattr(spec, 'min', '')}," \
           f"{getattr(spec, 'max', '')})"


_FILE_RE = re.compile(r'File "([^"]+)"')


def traced_files(ep) -> dict:
    """{source file: hash} of the files named in the exported graph's stack
    traces: the code that produced its operations."""
    files = set()
    for node in ep.graph.nodes:
        trace = node.meta.get("stack_trace")
        if trace:
            files.update(_FILE_RE.findall(trace))
    return {f: file_hash(f) for f in sorted(files) if os.path.isfile(f)}
