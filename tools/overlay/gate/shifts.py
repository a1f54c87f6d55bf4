"""Positional arguments that core's inserted parameter shifted. Pure.

A call whose arity still fits can bind every argument to the wrong parameter: 0.26.0
inserted `use_v2_model_runner` fourth into `resolve_cudagraph_mode_and_sizes`, and the
plugin's six positions (`..., self.uniform_decode_query_len,
self.parallel_config.tensor_parallel_size, self.kv_cache_config, self.max_num_reqs`) now
land one place early. The names tell: a positional argument whose terminal name (`x`,
`a.b.x`) is the name of a *different* parameter of core's signature, at a later
position. Counted only where the call reads as written against core's order before the
insertion: the arguments named like parameters keep core's order (a swap `f(b, a)` is no
shift), and every shifted one sits the same number of places early, the parameters it
skips bearing no argument's name. The hand engine gates one core, so "the old call was
name-consistent" is this reading; `--baseline declared` drops a call that was already so
against the release the plugin declares.
"""

from __future__ import annotations

from overlay.gate.signature import CallShape, Signature


def shifted_positions(sig: Signature, shape: CallShape) -> list[str]:
    """Why the positional arguments of `shape` land on the wrong parameters of `sig` (the
    callee as the call binds it); empty when nothing reads as shifted."""
    params = [p.name for p in sig.positional]
    index = {n: i for i, n in enumerate(params)}
    named = [(i, index[n]) for i, n in enumerate(shape.pos_names[:len(params)]) if n is not None and n in index]
    if not named or any(b[1] <= a[1] for a, b in zip(named, named[1:])):
        return []  # no names to go by, or not in core's order
    shifted = [(i, j) for i, j in named if j != i]
    if not shifted or any(j < i for i, j in shifted) or len({j - i for i, j in shifted}) != 1:
        return []
    offset = shifted[0][1] - shifted[0][0]
    first = shifted[0][0]
    passed = {n for n in shape.pos_names if n is not None} | set(shape.keywords)
    inserted = params[first:first + offset]
    if any(n in passed for n in inserted):
        return []  # the parameters it would skip are passed: not an insertion
    names = ", ".join(f"'{params[j]}'" for _, j in shifted)
    return [f"passes {names} {offset} position(s) early: core's {', '.join(repr(n) for n in inserted)} "
            f"came in before, so positional argument {first + 1} (named '{params[shifted[0][1]]}') lands on "
            f"'{params[first]}' and every later one {offset} position(s) off"]
