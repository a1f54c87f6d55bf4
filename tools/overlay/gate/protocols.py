"""Core protocols a plugin class implements by shape, not by inheritance (`override`
findings).

Core types some plugin objects only structurally: a model class is any class with vLLM's
model methods (`VllmModelForTextGeneration`, a `typing.Protocol` core checks at run time),
registered by name, never a subclass of a core model. Core then calls
`self.model.compute_logits(hidden_states)` through a receiver typed by nothing the gate can
follow. When core changes the protocol's method (vLLM 0.11.0 dropped `sampling_metadata`
from `compute_logits`), every plugin model still declaring the old method breaks there
(vllm-kunlun 0.10.1.1, vllm-mindspore 0.4.0).

Which classes claim a protocol: a plugin class that a string constant of the plugin names (a
registry entry: core holds a model class only through one; a drafter model the plugin builds
itself, vllm-ascend's `DeepseekV4DSparkModel`, is never core's runner's model), not deriving
from the protocol (that is check_overrides' case), that defines every method the protocol declares in its own body and
at least one method of each protocol it extends (`forward` of `VllmModel`), dunders aside.
A one-method protocol claims nothing (vLLM's `SupportsHash.compute_hash` fits any class with
that method, and core's `vllm_config.compute_hash()` calls a VllmConfig). A core call
`recv.meth(...)` counts where its code can run, the protocol's own method accepts it (the call
is meant for the protocol) and the plugin's method does not. The receiver's type is not
consulted: core's model runner keeps the model in wrappers (`CUDAGraphWrapper`) that forward
every attribute, so a receiver typed as another class may still hold the plugin's object. Its
name is: a receiver counts where its last name shares a word with the protocol's name
(`self.model`, `self.language_model` for `VllmModel`), so a MoE layer's `self.runner.forward(...)`
is not a call of a model's `forward`. An error
where the class's module is on the start-up chain, else a warning; one finding per method,
symbol `override:<plugin module>.<class>.<method>`.
"""

from __future__ import annotations

import re

from overlay.gate.callers import Site, module_name
from overlay.gate.checks import Evidence, _kind, _linearize, _reason, _severity, _why
from overlay.gate.findings import Finding
from overlay.gate.index import ClassInfo, ModuleInfo, TreeIndex, qualify
from overlay.gate.scan import PluginFacts
from overlay.gate.signature import Signature, accepts_call
from overlay.gate.startup import loaded_strings

PROTOCOL_BASES = frozenset({"typing.Protocol", "typing_extensions.Protocol"})
MARKER = "runtime_checkable"  # core's protocols that core checks objects against at run time


def _public(methods: dict[str, Signature]) -> dict[str, Signature]:
    return {m: s for m, s in methods.items() if not (m.startswith("__") and m.endswith("__"))}


def _is_protocol(mod: ModuleInfo, cls: ClassInfo) -> bool:
    for expr in cls.bases:
        target = qualify(mod, expr) if expr else None
        if target and target.split("[")[0] in PROTOCOL_BASES:
            return True
    return False


def core_protocols(world: TreeIndex, ev: Evidence) -> list[tuple[ModuleInfo, ClassInfo, list[set[str]]]]:
    """Core's run-time-checked protocols, each with the method names of the protocols it
    extends (one set per base protocol)."""
    out = []
    for path in ev.callers.mentions(MARKER):
        mod = world.module(module_name(path))
        if mod is None or mod.path != path:
            continue
        for cls in mod.classes.values():
            if not _is_protocol(mod, cls) or MARKER not in {d.split(".")[-1] for d in cls.decorators}:
                continue
            bases = []
            for expr in cls.bases:
                target = qualify(mod, expr) if expr else None
                found = world.resolve_dotted(target.split("[")[0]) if target else None
                if found is not None and found[0] == "class" and _is_protocol(*found[1]):  # type: ignore[misc]
                    bases.append(set(_public(found[1][1].methods)))  # type: ignore[index]
            out.append((mod, cls, bases))
    return out


_GENERIC_WORDS = frozenset({"vllm", "supports", "for", "protocol", "base", "interface", "mixin"})


def _words(name: str) -> set[str]:
    """The lower-cased words of a CamelCase or snake_case name."""
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)}


def _may_hold(receiver: str, protocol: str) -> bool:
    """Does the receiver's name say it holds the protocol's kind of object? `self.model`,
    `self.language_model` for `VllmModel`; not `self.runner` (a MoE layer's runner, whose
    `forward(hidden, router_logits)` any two-argument protocol method would accept)."""
    nouns = _words(protocol) - _GENERIC_WORDS
    return not nouns or bool(_words(receiver.rsplit(".", 1)[-1]) & nouns)


def _calls_meant_for(meth: str, proto: Signature, plugin: Signature, ev: Evidence,
                     protocol: str = "") -> list[Site]:
    """The first core call of `meth` on a receiver named as the protocol's kind of object, in
    code that can run, that the protocol's method accepts and the plugin's does not. A
    protocol's method is often called in many files (`self.language_model.compute_logits(...)`
    in every multimodal model): the files are read one by one until one such call is found,
    the model runners first."""
    files = sorted(ev.callers.files_calling(meth), key=lambda f: ("worker" not in f[0], f[0]))
    for path, tree in files:
        if ev.callers.trees[tree][3]:
            continue  # the plugin's own calls
        for s in ev.callers.sites_in(path, tree, meth):
            if s.receiver in ("self", "cls", "super", "", "?") or not _may_hold(s.receiver, protocol):
                continue
            if accepts_call(proto.bound(), s.shape) or not accepts_call(plugin.bound(), s.shape):
                continue
            if ev.callers.reachable(s)[0]:
                return [s]
    return []


def _named_in_strings(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> set[str]:
    """The identifiers the plugin's loaded modules name inside string constants: registry
    entries (`"vllm_kunlun.models.qwen3:Qwen3ForCausalLM"`, `("qwen2", "Qwen2ForCausalLM")`).
    A model class the plugin only builds itself (a drafter's `DeepseekV4DSparkModel(...)`)
    is never one core's runner holds."""
    modules = {pc.module.name: pc.module for pc in facts.classes}
    modules.update({name: world.module(name) for name in ev.startup.parent})
    return {word for s in loaded_strings(modules.values()) for word in re.findall(r"[A-Za-z_]\w*", s)}


def check_protocols(facts: PluginFacts, world: TreeIndex, ev: Evidence) -> list[Finding]:
    protocols = [p for p in core_protocols(world, ev) if _public(p[1].methods)]
    if not protocols:
        return []
    findings: list[Finding] = []
    # many classes share a method's shape (every model's compute_logits): one search per shape
    searched: dict[tuple, list[Site]] = {}
    named = _named_in_strings(facts, world, ev)
    for pc in facts.classes:
        if pc.node.name not in named:
            continue  # core reaches a class by shape only through a registry entry naming it
        cls = world.class_of(pc.module, pc.node)
        mro = _linearize(world, pc.module, cls, pc.scope.local_imports)
        # a base the gate cannot read (torch's nn.Module) is not core's: it is not the protocol
        inherited = {(b[0].name, b[1].name) for b in mro if b is not None}
        methods = dict(cls.methods)
        for b in mro:
            if b is not None and not ev.is_core(b[0].name):
                methods = {**b[1].methods, **methods}
        for pmod, proto, bases in protocols:
            own = _public(proto.methods)
            claimed = set(own) | {m for base in bases for m in base if m in methods}
            if (pmod.name, proto.name) in inherited or not set(own) <= set(methods) \
                    or not all(base & set(methods) for base in bases) or len(claimed) < 2:
                continue  # a one-method protocol (`SupportsHash.compute_hash`) fits any such class
            for meth, psig in own.items():
                sig = methods[meth]
                if (sig.is_static, sig.is_classmethod) != (psig.is_static, psig.is_classmethod):
                    continue
                shape = (meth, pmod.name, proto.name, sig.render(), sig.is_static)
                if shape not in searched:
                    searched[shape] = _calls_meant_for(meth, psig, sig, ev, proto.name)
                sites = searched[shape]
                if not sites:
                    continue
                problems = accepts_call(sig.bound(), sites[0].shape)
                where = sites[0].where()
                message = (f"{cls.name}.{sig.render()} implements core's protocol {proto.name}.{psig.render()} "
                           f"({pmod.name}) by shape, but core calls it as {sites[0].spelled(meth)} at {where} "
                           f"and it " + "; ".join(problems))
                findings.append(Finding(
                    _kind(pc.ctx, "override"), f"override:{pc.module.name}.{cls.name}.{meth}", pc.path,
                    sig.line, sites[0].path, sites[0].shape.line, _why(pc.ctx, message),
                    severity=_severity(pc.ctx, ev, pc.module.name),
                    reason=_reason(pc.ctx, ev, pc.module.name, f"core calls it at {where}"),
                    summary=f"{cls.name}.{meth} {problems[0]} (core's protocol {proto.name}; core calls it at {where})"))
    return findings
