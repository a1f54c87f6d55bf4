"""Class attributes of a core class whose only unreadable base is torch's `nn.Module`.

Torch is not in the trees, so such a base "may define anything" and a missing class
attribute stayed undecidable. But `Cls.name` read on the class (not an instance: nn.Module's
`__getattr__` serves only an instance's parameters, buffers and submodules) finds only
what the class hierarchy and `nn.Module` itself define. `nn.Module`'s class-level names
are listed here (torch 2.x, public and private, a superset across releases), and a name
that is neither in that list nor mentioned by any core file (the caller's evidence, as for
bases core builds at run time) is certainly absent: 0.23.0's `DFlashQwen3Model(nn.Module)`
has no `_init`, which the plugin wraps at import.
"""

from __future__ import annotations

from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, qualify

TORCH_MODULES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
HARMLESS = frozenset({"object", "ABC", "Generic", "Protocol"})

# torch.nn.Module's class-level names (methods, properties and class attributes).
TORCH_MODULE_MEMBERS = frozenset({
    "dump_patches", "_version", "training", "call_super_init", "T_destination", "_jit_is_scripted",
    "_parameters", "_buffers", "_non_persistent_buffers_set", "_backward_pre_hooks", "_backward_hooks",
    "_is_full_backward_hook", "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_state_dict_hooks", "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks", "_modules", "_compiled_call_impl",
    "forward", "_forward_unimplemented", "register_buffer", "register_parameter", "add_module",
    "register_module", "get_submodule", "set_submodule", "get_parameter", "get_buffer", "get_extra_state",
    "set_extra_state", "_apply", "apply", "cuda", "ipu", "xpu", "mtia", "cpu", "type", "float", "double",
    "half", "bfloat16", "to_empty", "to", "register_full_backward_pre_hook", "register_backward_hook",
    "register_full_backward_hook", "_get_backward_hooks", "_get_backward_pre_hooks",
    "_maybe_warn_non_full_backward_hook", "register_forward_pre_hook", "register_forward_hook",
    "_slow_forward", "_wrapped_call_impl", "_call_impl", "_register_state_dict_hook",
    "register_state_dict_post_hook", "register_state_dict_pre_hook", "_save_to_state_dict", "state_dict",
    "_register_load_state_dict_pre_hook", "register_load_state_dict_pre_hook",
    "register_load_state_dict_post_hook", "_load_from_state_dict", "load_state_dict", "_named_members",
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "train", "eval", "requires_grad_", "zero_grad", "share_memory", "_get_name",
    "extra_repr", "_replicate_for_data_parallel", "compile",
})


def only_torch_module_unread(world: TreeIndex, chain: list[tuple[ModuleInfo, ClassInfo]]) -> bool:
    """Every base of the classes in `chain` is readable, harmless or torch's nn.Module,
    and nn.Module is among them."""
    torch = False
    for mod, cls in chain:
        for expr in cls.bases:
            if expr is None:
                return False
            target = qualify(mod, expr, None)
            found = world.resolve_dotted(target) if target else None
            if found is not None and found[0] == "class":
                continue
            if target in TORCH_MODULES:
                torch = True
            elif expr.split(".")[-1] not in HARMLESS:
                return False
    return torch


def torch_module_lacks(world: TreeIndex, mod: ModuleInfo, cls: ClassInfo,
                       bases: list[tuple[ModuleInfo, ClassInfo] | None], attr: str) -> bool:
    """The class (with `bases`, its readable bases) and torch's nn.Module lack `attr` as a
    class attribute; the caller has checked the readable classes and core's mentions."""
    if attr in TORCH_MODULE_MEMBERS or (attr.startswith("__") and attr.endswith("__")):
        return False
    return only_torch_module_unread(world, [(mod, cls)] + [b for b in bases if b is not None])
