"""Core calls whose receiver nothing types, matched to a hierarchy by the method's name.

Core often reaches a plugin's override through an object no annotation types: a class
taken from a registry (`method = get_quantization_config(name)`, then
`method.override_quantization_method(cfg, user, hf_config=...)`), a manager a factory
builds. A type checker, and the gate's own receiver typing, see no caller there. But a
call `x.meth(...)` can only run a `meth` that something defines: when every class and
module-level function of both trees that defines `meth` outside the overridden
hierarchy would refuse the call's arguments (or none exists), the call is meant for the
hierarchy, and so for the plugin's subclass in it. A name another class could answer
with these arguments, or binds without a readable `def`, stays unmatched: then there is
still no visible caller. Objects from outside both trees are not seen; the call's shape
must at least fit core's declared method.
"""

from __future__ import annotations

from overlay.gate.callers import COMMON, Site
from overlay.gate.signature import Signature, accepts_call

# receivers that are the class itself or its instance (`self.meth`): the hierarchy's own
# calls, read through the class (`ClassInfo.self_calls`); and vLLM's `current_platform`,
# which is one class, the one the platform entry point names (checks._platform_sites)
_OWN = ("self", "cls", "super", "", "?", "current_platform")


def named_sites(meth: str, declared: Signature, roots: set[str], names: set[str], ev) -> list[Site]:
    """Core's calls `x.meth(...)` that only the hierarchy can answer, in code that can
    run. `declared`: core's method bound (what a call must fit); `roots`: the core classes
    whose subclasses form the hierarchy; `names`: the plugin's classes in it (a receiver
    typed or narrowed to other classes is theirs). Empty when `ev.classes` is absent."""
    if ev.classes is None:
        return []
    sites = ev.callers.sites(meth, limit=COMMON)
    if not sites:
        return []
    hierarchy = ev.classes.hierarchy(roots) | names
    candidates: list[Site] = []
    for s in sites:
        if s.plugin or s.receiver in _OWN:
            continue
        if s.narrowed and not (s.narrowed & hierarchy):
            continue
        named = s.receiver.rsplit(".", 1)[-1]
        if named[:1].isupper() and not named.isupper() and named not in names | ev.replaced.get(s.module, set()):
            continue  # a class by its name (`NewRequestData.from_request(...)`): that class's own method
        if accepts_call(declared, s.shape):
            continue  # core's own method refuses it: meant for another object
        typed = {n for n in ev.callers.receiver_types(s.path, 0).get(s.receiver, set()) if n[:1].isupper()}
        if typed and not (typed & hierarchy):
            continue  # the file types the receiver as another class
        built = ev.callers.receiver_builds(s.path, 0).get(s.receiver)
        if built and not (built & ev.replaced.get(s.module, set())) \
                and not plugin_built(ev, s.module, built, names):
            continue  # built only from core's own classes here: never the plugin's object
        candidates.append(s)
    if not candidates:
        return []  # nothing left to match: the trees' definitions of the name are not read
    others: list[Signature | None] = []
    for owner, sig in ev.classes.members(meth):
        if owner is not None and owner in hierarchy:
            continue
        others.append(None if sig is None else sig.bound() if owner is not None and not sig.is_static else sig)
    return [s for s in candidates
            if not any(sig is None or not accepts_call(sig, s.shape) for sig in others)  # another could answer
            and ev.callers.reachable(s)[0]]


def plugin_built(ev, module: str, built: set[str], names: set[str]) -> set[str]:
    """The names among `built` (classes a core module's receiver is built from) that may be
    the plugin's classes `names`: a name the core module binds to core's own class of that
    name (`Callers.binds_core_class`) is not, whatever the plugin calls its classes."""
    registered = {name for op in ev.oot for name in op.core_names}
    return {n for n in built & names if not ev.callers.binds_core_class(module, n, ev.replaced, registered)}
