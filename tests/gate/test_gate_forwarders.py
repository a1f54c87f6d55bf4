"""`forwarders.forwards`: a plugin method counts as handing its call on unchanged only
when it takes exactly `(self, *a, **k)` and calls `super().<same name>(*a, **k)`; any
other parameter list or call is its own (generated shapes)."""

from __future__ import annotations

import ast

from hypothesis import given
from hypothesis import strategies as st

from overlay.gate.forwarders import forwards

PARAMS = st.lists(st.sampled_from(["x", "y=1", "*args", "**kwargs", "*", "z"]), max_size=4)
CALL_ARGS = st.lists(st.sampled_from(["*args", "**kwargs", "x", "k=1", "*other", "**other"]), max_size=3)


def _source(params: list[str], args: list[str], name: str, callee: str) -> str | None:
    text = f"class A(B):\n    def {name}(self{''.join(', ' + p for p in params)}):\n" \
           f"        return super().{callee}({', '.join(args)})\n"
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text


@given(PARAMS, CALL_ARGS, st.sampled_from(["__init__", "forward"]), st.booleans())
def test_only_an_exact_forwarder_forwards(params, args, name, same_name):
    text = _source(params, args, name, name if same_name else "other_method")
    if text is None:
        return
    node = ast.parse(text).body[0]
    exact = params == ["*args", "**kwargs"] and args == ["*args", "**kwargs"] and same_name
    assert forwards(node, name) is exact  # type: ignore[arg-type]


def test_a_decorated_or_absent_method_does_not_forward():
    node = ast.parse("class A(B):\n    @staticmethod\n    def f(self, *a, **k):\n        super().f(*a, **k)\n").body[0]
    assert not forwards(node, "f")  # type: ignore[arg-type]
    assert not forwards(node, "g")  # type: ignore[arg-type]
    assert not forwards(None, "f")
