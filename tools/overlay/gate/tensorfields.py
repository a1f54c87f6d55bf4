"""A field core now sets to a plain tensor, used by the plugin as the object it was.

vLLM 0.19.0 made `GPUModelRunner.positions` and `.seq_lens` plain tensors
(`self.positions = torch.zeros(...)`); before, `self._make_buffer(...)` made them CPU/GPU
buffers. A plugin runner that inherits core's `__init__` and still reads
`self.positions.gpu`, writes `self.seq_lens.np[:n]` or calls `self.seq_lens.copy_to_gpu()`
fails on every call: a tensor has no such attribute. `self.seq_lens.cpu[:n]` fails too:
on a tensor `.cpu` is a method, which cannot be indexed.

Torch is not in the trees, so what a tensor has comes from `tensormembers` (torch's own
names). The field counts as a tensor only where every `self.attr = ...` of the classes
the object can be is core's, each a torch factory call (`torch.zeros(...)`, optionally
followed by `.to(...)`-like tensor methods); no class defines the name otherwise, no class
the gate cannot read is among the bases of the plugin class or of any plugin subclass of it,
core's class does not store the member on the field, and the plugin stores it on nothing the
field may be. Anything else says nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overlay.gate import tensormembers
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted, qualify
from overlay.gate.receivers import Receivers
from overlay.gate.startup import loaded_strings

# torch functions that return a new plain tensor (not a subclass such as nn.Parameter)
FACTORIES = frozenset({"zeros", "empty", "ones", "full", "arange", "tensor", "as_tensor", "zeros_like",
                       "empty_like", "ones_like", "full_like", "from_numpy", "rand", "randn", "randint",
                       "linspace", "cat", "stack", "empty_strided"})
# tensor methods that return a plain tensor again
TENSOR_RETURNING = frozenset({"to", "pin_memory", "cuda", "cpu", "contiguous", "clone", "view", "reshape",
                              "long", "int", "float", "half", "bfloat16", "fill_", "zero_", "share_memory_"})


@dataclass(frozen=True)
class TensorField:
    """`self.<attr>` is a plain tensor, set by core's `owner` at `line`."""

    attr: str
    owner: tuple[ModuleInfo, ClassInfo]
    line: int
    source: str  # the assignment's value, for the message


def tensor_value(mod: ModuleInfo, value: ast.expr | None) -> bool:
    """`torch.zeros(...)`, `torch.empty(...).pin_memory()`: a plain tensor, read in `mod`."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in TENSOR_RETURNING and isinstance(value.func.value, ast.Call):
        value = value.func.value
    if not isinstance(value, ast.Call):
        return False
    name = dotted(value.func)
    target = qualify(mod, name, None) if name else None
    return target is not None and target.startswith("torch.") and target.count(".") == 1 \
        and target.split(".")[1] in FACTORIES


def _shape(value: ast.expr) -> str:
    """`torch.zeros(...).pin_memory()` for the message: the calls, not their arguments."""
    names = []
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
        names.append(value.func.attr)
        value = value.func.value
    head = dotted(value.func) if isinstance(value, ast.Call) else None
    return f"{head}(...)" + "".join(f".{n}(...)" for n in reversed(names))


@dataclass(frozen=True)
class SelfStores:
    """How a class's methods store on `self`, from one walk of its body (`self_stores`)."""

    targets: dict  # attr -> ids of every `self.attr` store target (plain, tuple, loop, augmented)
    by_name: frozenset  # names set by `setattr(self, "name", ...)`
    computed: bool  # `setattr(self, name, ...)` with a computed name
    uses_dict: bool  # `self.__dict__`
    nested: dict  # attr -> members stored on it (`self.attr.member = ...`)


def self_stores(node: ast.ClassDef) -> SelfStores:
    """One walk of the class: every way its methods store on `self`. Pure."""
    targets: dict[str, set[int]] = {}
    nested: dict[str, set[str]] = {}
    by_name: set[str] = set()
    computed = uses_dict = False
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            owner = dotted(n.value)
            if n.attr == "__dict__" and owner == "self":
                uses_dict = True
            elif not isinstance(n.ctx, ast.Load) and owner == "self":
                targets.setdefault(n.attr, set()).add(id(n))
            elif isinstance(n.ctx, ast.Store) and owner and owner.count(".") == 1 and owner.startswith("self."):
                nested.setdefault(owner[5:], set()).add(n.attr)
        elif isinstance(n, ast.Call) and dotted(n.func) == "setattr" and len(n.args) > 1 and dotted(n.args[0]) == "self":
            if isinstance(n.args[1], ast.Constant):
                by_name.add(n.args[1].value)
            else:
                computed = True
    return SelfStores(targets, frozenset(by_name), computed, uses_dict, nested)


class TensorFields:
    """Which `self.attr` of a plugin class is certainly one of core's plain tensors."""

    def __init__(self, world: TreeIndex, is_core, linearize, plugin_classes) -> None:
        self.world = world
        self.is_core = is_core
        self.linearize = linearize
        self.plugin_classes = plugin_classes  # scan's PluginClass list
        self._receivers = Receivers(world, is_core, linearize)  # its walk of each class's `self.x = `
        self._memo: dict[tuple[int, str], TensorField | None] = {}
        self._below: dict[int, list] | None = None
        # id(node) -> (the node, kept alive while its id is a key; what is derived from it)
        self._stores: dict[int, tuple[ast.AST, SelfStores]] = {}
        self._quotes: dict[int, tuple[ast.AST, frozenset]] = {}

    def stores(self, node: ast.ClassDef) -> SelfStores:
        """`self_stores(node)`, walked once per class (core's runner is thousands of lines,
        and each field a plugin reads asks)."""
        if id(node) not in self._stores:
            self._stores[id(node)] = (node, self_stores(node))
        return self._stores[id(node)][1]

    def quotes(self, mod: ModuleInfo) -> frozenset | None:
        """A module's short string constants (`startup.loaded_strings`), once per module; None
        when it has no tree."""
        if mod.tree is None:
            return None
        if id(mod.tree) not in self._quotes:
            self._quotes[id(mod.tree)] = (mod.tree, frozenset(loaded_strings([mod])))
        return self._quotes[id(mod.tree)][1]

    def _subclasses(self, cls_node: ast.ClassDef) -> list:
        """The plugin classes whose bases include `cls_node`'s class (with their chains)."""
        if self._below is None:
            self._below = {}
            for pc in self.plugin_classes:
                info = self.world.class_of(pc.module, pc.node)
                chain = self.linearize(self.world, pc.module, info, pc.scope.local_imports)
                for b in chain:
                    if b is not None and b[1].node is not None:
                        self._below.setdefault(id(b[1].node), []).append((pc.module, info, chain))
        return self._below.get(id(cls_node), [])

    def field(self, mod: ModuleInfo, cls_node: ast.ClassDef, attr: str) -> TensorField | None:
        key = (id(cls_node), attr)
        if key not in self._memo:
            self._memo[key] = self._field(mod, cls_node, attr)
        return self._memo[key]

    def _field(self, mod: ModuleInfo, cls_node: ast.ClassDef, attr: str) -> TensorField | None:
        info = self.world.class_of(mod, cls_node)
        chains = [(mod, info, self.linearize(self.world, mod, info))] + self._subclasses(cls_node)
        found: TensorField | None = None
        seen: set[int] = set()
        for cmod, cinfo, chain in chains:
            for entry in [(cmod, cinfo)] + list(chain):
                if entry is None or entry[1].node is None:
                    return None  # a class the gate cannot read may set it
                emod, ecls = entry
                if id(ecls.node) in seen:
                    continue
                seen.add(id(ecls.node))
                if ecls.declares(attr):
                    return None  # a property, a method or a class attribute
                stores = self._receivers.assignments(ecls.node).get(attr, ())
                if other_stores(self.stores(ecls.node), attr, stores, lambda: self.quotes(emod)):
                    return None  # `self.a, self.b = ...`, `setattr(self, ...)`: not one value
                if not stores:
                    continue
                if not self.is_core(emod.name):
                    return None  # the plugin sets it itself
                for _fn, stmt in stores:
                    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                    if not tensor_value(emod, value):
                        return None
                    if found is None:
                        found = TensorField(attr, (emod, ecls), stmt.lineno, _shape(value))
        return found


def other_stores(st: SelfStores, attr: str, stores, quotes) -> bool:
    """The class (`st`, its `self_stores`) sets `self.<attr>` some other way than the plain
    assignments `stores` (from Receivers.assignments): as part of a tuple or a loop target,
    augmented, through `self.__dict__`, `setattr(self, "<attr>", ...)`, or `setattr(self,
    name, ...)` where its module quotes the name (`quotes()`: its string constants, None when
    unknown): a computed name comes from somewhere, and vLLM's `GPUModelRunner.update_config`
    sets only the `allowed_config_names` it quotes. Pure but for `quotes`, asked only when
    needed."""
    plain = {id(t) for _fn, stmt in stores
             for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])}
    if st.targets.get(attr, set()) - plain or st.uses_dict or attr in st.by_name:
        return True
    if st.computed:
        known = quotes()
        return known is None or attr in known
    return False


def tensor_misuse(parts: list[str], subscripted: bool) -> str | None:
    """Why `self.<field>.<m>[...]` fails on a tensor (parts: the names after the field),
    or None when it may not."""
    member = parts[0]
    if not tensormembers.has(member):
        return f"a torch.Tensor has no attribute '{member}'"
    if not tensormembers.is_method(member):
        return None
    if len(parts) > 1 and not (parts[1].startswith("__") and parts[1].endswith("__")):
        return f"on a torch.Tensor `{member}` is a method, which has no attribute '{parts[1]}'"
    if len(parts) == 1 and subscripted:
        return f"on a torch.Tensor `{member}` is a method, which cannot be indexed"
    return None


def stored_on_field(receivers, attr: str) -> bool:
    """Whether the plugin's stores of a name (on `receivers`, scan.store_receiver's: a
    `self.<field>` they are reached from, else the dotted receiver or "") may put it on the
    tensor in `self.<attr>`: a store on that field, or on anything but another field of a
    `self` (a local name may be the tensor itself). vllm-qaic's `self.input_ids.cpu = ...` and
    `self.input_batch.block_table[0].block_table.np = ...` are on other objects, so its reads
    of `self.seq_lens.cpu[...]` and `self.positions.np` stay judged."""
    return any(not r.startswith("self.") or r.split(".")[1] == attr for r in receivers)


def core_stores_on(fields: TensorFields, field: TensorField, member: str) -> bool:
    """Core's owner class stores `self.<attr>.<member> = ...` itself."""
    node = field.owner[1].node
    return node is not None and member in fields.stores(node).nested.get(field.attr, ())
