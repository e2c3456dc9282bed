"""The stage cache's `exported` entry: what compile() takes from an
ExportedProgram, stored under a key made before torch.export
(module_key.py), so that a compile from the cache skips the export.

The entry holds the key of the `imported` entry (stage_cache.py: the IR of
import, frontend and materialize), the names and dtypes of the user
arguments, the int arguments export made constants, the output pytree, the
state targets (the model's parameters and buffers passed as arguments, by
name), the shape checks, and what is checked when loading: the hashes of
the source files the exported graph's stack traces name and of the model
tensors the module holds as literals (those a modifier captures).
compile()'s `exported_check` (the Dynamo backend's) is part of the key
and not run on a hit: the entry was stored after it accepted the program.
A target that names an inner tensor of a tensor subclass (a torchao
quantized weight, unwrapped by the export) is resolved to the tensor the
model's subclass holds (subclass_state.py).
"""

from ..log import get_logger
from . import cache, stage_cache
from .module_key import file_hash, module_key, tensor_hash, traced_files
from .subclass_state import SubclassError, outer_name, resolve

log = get_logger("cache")


def _model_tensors(model) -> dict:
    tensors = dict(model.named_parameters(remove_duplicate=False))
    tensors.update(model.named_buffers(remove_duplicate=False))
    return tensors


def check_identity(check) -> str:
    """The code of compile()'s `exported_check` (a function, or an object
    with __call__). An entry is stored only after the check accepted the
    exported program, and the key determines that program: a hit needs
    no check, but another check function must not reuse the entry."""
    from .module_key import _Describer

    fn = check if callable(check) and hasattr(check, "__code__") else getattr(check, "__call__", check)
    return _Describer(()).callable_id(fn, strict=False)


class PreExport:
    """compile()'s entry for one model and call, or inactive (`key` None)."""

    def __init__(self, model, example_args, dynamic_shapes, *extra, check=None):
        self.key = None
        if not stage_cache.enabled():
            return
        if check is not None:  # compile()'s exported_check: its verdict is part of the entry
            extra += (check_identity(check),)
        key, why = module_key(model, example_args, dynamic_shapes, *extra)
        if key is None:
            log.info("stage cache: compiling through torch.export: %s", why)
            return
        self.key = stage_cache.key("exported", key)

    def load(self, model):
        """The stored fields with `state` (the model's tensors for the
        targets) and `imported` (the imported stage), or None."""
        if self.key is None:
            return None
        entry = stage_cache.load(self.key)
        if entry is None:
            return None
        changed = [f for f, h in entry["files"].items() if file_hash(f) != h]
        tensors = _model_tensors(model)
        changed += [n for n, h in entry["literals"].items()
                    if n not in tensors or tensor_hash(tensors[n]) != h]
        missing = [t for t in entry["targets"] or () if resolve(tensors, t) is None]
        imported = stage_cache.load(entry["imported_key"]) if not changed and not missing else None
        if imported is None:
            log.info("stage cache: exported entry not used (changed: %s, missing: %s)", changed, missing)
            return None
        out_spec = None
        if entry["out_spec"] is not None:
            import torch.utils._pytree as pytree

            out_spec = pytree.treespec_loads(entry["out_spec"])
        log.info("stage export..materialize: from the stage cache")
        cache.stats["export_skipped"] += 1
        return dict(entry, out_spec=out_spec, imported=imported,
                    state=[resolve(tensors, t) for t in entry["targets"] or ()])

    def store(self, ep, model, *, imported_key, out_spec, arg_specs, constants, targets, checks):
        if self.key is None or imported_key is None:
            return
        import torch.utils._pytree as pytree

        tensors = _model_tensors(model)
        if any(resolve(tensors, t) is None for t in targets or ()):
            return  # a state target that is not a model attribute by that name
        kept = set(targets or ())
        kept |= {outer_name(t) for t in kept} - {None}  # subclasses passed as their inner tensors
        named = list(ep.state_dict.items()) + list(ep.constants.items())
        try:
            literals = {n: tensor_hash(t) for n, t in named if n not in kept and n in tensors}
        except SubclassError:  # a subclass literal with an opaque part
            return
        try:
            spec = pytree.treespec_dumps(out_spec) if out_spec is not None else None
        except Exception:  # an output type pytree cannot serialize
            return
        stage_cache.store(self.key, dict(
            imported_key=imported_key, out_spec=spec, arg_specs=arg_specs, constants=constants,
            targets=targets, checks=checks, files=traced_files(ep), literals=literals))
