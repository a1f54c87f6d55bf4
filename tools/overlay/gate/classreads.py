"""Reads of a core class object's own attributes in plugin function bodies.

`VllmConfig.name` or `vars(VllmConfig)["name"]` read where a plugin function runs fails
when core's class no longer binds `name`: an AttributeError, or a KeyError for the class's
own namespace (vllm-rbln wraps `vars(VllmConfig)["use_v2_model_runner"].fget`, a property
vLLM 0.34.0 removed). In a function body a class may have got the name at run time, so
the read is judged certain only when nothing could have set it: every class of its chain
is readable and built without a custom metaclass, no core file stores the name (or, for a
class that sets attributes by computed name, mentions it), and no plugin code stores or
`setattr`s the name before the read (a store later in the reading function cannot be first).
"""

from __future__ import annotations

import ast
from typing import Callable

from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, dotted

# metaclasses that add no class attributes of their own
PLAIN_METACLASSES = frozenset({"ABCMeta", "abc.ABCMeta", "type"})


def class_of(world: TreeIndex, dotted_name: str) -> tuple[ModuleInfo, ClassInfo] | None:
    """The core class `dotted_name` names, or None."""
    found = world.resolve_dotted(dotted_name)
    return found[1] if found is not None and found[0] == "class" else None  # type: ignore[return-value]


def _drops_field(value: ast.expr | None, dataclass: bool) -> bool:
    """Does a class-body annotation with this value leave no class attribute? An annotation
    alone never binds one; in a dataclass `field(...)` without `default=` is removed too."""
    if value is None:
        return True
    if not (dataclass and isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "field"):
        return False
    return not any(k.arg == "default" for k in value.keywords)


def namespace(cls: ClassInfo) -> set[str]:
    """The names the class body leaves in the class's own `__dict__` (`vars(cls)`)."""
    dataclass = "dataclass" in {d.split(".")[-1] for d in cls.decorators}  # as checks' dataclass tests
    dropped = {s.target.id for s in cls.fields
               if isinstance(s.target, ast.Name) and _drops_field(s.value, dataclass)}
    bound_otherwise = set()
    if dropped and cls.node is not None:
        for stmt in cls.node.body:  # the same name bound by a plain statement keeps it
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound_otherwise.add(stmt.name)
            elif isinstance(stmt, ast.Assign):
                bound_otherwise.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return cls.attrs - (dropped - bound_otherwise)


def _sets_by_computed_name(cls: ClassInfo) -> bool:
    """Does the class body set class attributes by a computed name (`setattr(cls, k, v)`)?"""
    if cls.node is None:
        return True
    for n in ast.walk(cls.node):
        if isinstance(n, ast.Call) and dotted(n.func) == "setattr" and len(n.args) > 1 \
                and dotted(n.args[0]) in ("cls", cls.name) and not isinstance(n.args[1], ast.Constant):
            return True
    return False


def certainly_unset(chain: list[tuple[ModuleInfo, ClassInfo] | None], attr: str,
                    stores: Callable[[str], list], mentions: Callable[[str], list],
                    plugin_sets: Callable[[str], bool]) -> bool:
    """Is `attr` certainly never set at run time on a class with this chain (the class first,
    then its bases)? Unknown means no."""
    computed = False
    for link in chain:
        if link is None or link[1].node is None:
            return False  # a base the gate cannot read may define or add it
        cls = link[1]
        if any(k.arg == "metaclass" and dotted(k.value) not in PLAIN_METACLASSES for k in cls.node.keywords):
            return False
        computed = computed or _sets_by_computed_name(cls)
    if plugin_sets(attr):
        return False
    return not (mentions if computed else stores)(attr)
