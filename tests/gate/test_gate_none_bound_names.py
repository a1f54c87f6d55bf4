"""A core module whose `__getattr__` ends without raising binds None, not an ImportError.

vLLM 0.14.0-0.15.1's `vllm/transformers_utils/tokenizer.py` is only a PEP 562 `__getattr__`
that serves `get_tokenizer` (deprecated) and otherwise falls off its end: `from
vllm.transformers_utils.tokenizer import AnyTokenizer` succeeds and binds None. vllm-kunlun
and vllm-omni use that name only in parameter annotations, where None is harmless; the gate
called the imports errors (4 false error keys). vllm-gaudi 0.13.0 imports
`init_tokenizer_from_configs` the same way and calls it at start-up: that TypeError is real
(a true key), and the message now says what happens. Synthetic trees written anew."""

from __future__ import annotations

import ast

import gatekit
import pytest

from overlay.gate import index, run_gate

ENTRY = """
    from setuptools import setup
    setup(name="vllm-x", entry_points={"vllm.general_plugins": ["x = vllm_x:register"]})
"""

TOKENIZER = """
    import warnings


    def __getattr__(name: str):
        if name == "get_tokenizer":
            from vllm.tokenizers import get_tokenizer

            warnings.warn("moved to vllm.tokenizers", DeprecationWarning, stacklevel=2)
            return get_tokenizer
"""

CHAT = """
from vllm.transformers_utils.tokenizer import AnyTokenizer


def render(messages, tokenizer: AnyTokenizer):
    return messages
"""

SYMBOL = "import:vllm.transformers_utils.tokenizer:AnyTokenizer"


def _errors(tmp_path, chat=CHAT, tokenizer=TOKENIZER, extra=None):
    core = gatekit.tree(tmp_path / "core", {
        "vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.14.0'\n",
        "vllm/tokenizers.py": "def get_tokenizer(name):\n    return name\n",
        "vllm/transformers_utils/__init__.py": "", "vllm/transformers_utils/tokenizer.py": tokenizer})
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": "def register():\n    import vllm_x.chat  # noqa\n",
        "vllm_x/chat.py": chat, **(extra or {})})
    return {f.symbol: f for f in run_gate(core, plugin).findings if f.severity == "error"}


@pytest.mark.parametrize("chat", [
    CHAT,
    CHAT.replace("import AnyTokenizer", "import AnyTokenizer as Tok").replace("tokenizer: AnyTokenizer", "tokenizer: Tok"),
    CHAT.replace("tokenizer: AnyTokenizer)", "tokenizer: Optional[AnyTokenizer] = None) -> 'AnyTokenizer'")
        .replace("from vllm", "from typing import Optional\nfrom vllm"),
    "from __future__ import annotations\n" + CHAT.replace("tokenizer: AnyTokenizer", "tokenizer: AnyTokenizer | None"),
    CHAT.replace("    return messages", "    t: AnyTokenizer | None = None\n    return messages"),
    CHAT.replace("tokenizer: AnyTokenizer)", "tokenizer: dict[str, AnyTokenizer])"),
])
def test_a_name_bound_to_none_used_only_where_none_is_harmless_is_no_error(tmp_path, chat):
    assert SYMBOL not in _errors(tmp_path, chat=chat)


@pytest.mark.parametrize("chat", [
    CHAT.replace("    return messages", "    return AnyTokenizer(messages)"),
    CHAT.replace("    return messages", "    return isinstance(tokenizer, AnyTokenizer)"),
    CHAT.replace("tokenizer: AnyTokenizer", "tokenizer: AnyTokenizer | None"),
    CHAT + "\n\nclass Chat:\n    tokenizer: AnyTokenizer | None = None\n",
    CHAT + "\n\nclass Chat(AnyTokenizer):\n    pass\n",
    CHAT.replace("    return messages", "    return AnyTokenizer.from_pretrained(messages)"),
])
def test_a_use_that_needs_an_object_keeps_the_error_and_says_why(tmp_path, chat):
    errors = _errors(tmp_path, chat=chat)
    assert SYMBOL in errors
    assert "ends without raising" in errors[SYMBOL].message and "uses it as an object" in errors[SYMBOL].message
    assert errors[SYMBOL].message.startswith("`from vllm.transformers_utils.tokenizer import AnyTokenizer` binds None")


def test_a_getattr_that_raises_for_other_names_keeps_the_plain_error(tmp_path):
    raising = TOKENIZER + "        raise AttributeError(name)\n"
    errors = _errors(tmp_path, tokenizer=raising)
    assert SYMBOL in errors and "ends without raising" not in errors[SYMBOL].message


def test_a_re_exported_name_keeps_the_error(tmp_path):
    extra = {"vllm_x/serve.py": "from vllm_x.chat import AnyTokenizer\n\n\ndef make():\n    return AnyTokenizer()\n"}
    assert SYMBOL in _errors(tmp_path, extra=extra)


@pytest.mark.parametrize("body, expected", [
    ("if name == 'a':\n    return 1", True),  # falls off the end
    ("if name == 'a':\n    return 1\nreturn None", True),
    ("if name == 'a':\n    return 1\nraise AttributeError(name)", False),
    ("return TABLE[name]", False),
    ("try:\n    return TABLE[name]\nexcept KeyError:\n    pass", True),
    ("try:\n    return TABLE[name]\nexcept KeyError:\n    raise AttributeError(name)", False),
    ("if name in TABLE:\n    return TABLE[name]\nelse:\n    raise AttributeError(name)", False),
    ("for k in TABLE:\n    if k == name:\n        return TABLE[k]\nraise AttributeError(name)", False),
    ("for k in TABLE:\n    if k == name:\n        return\nraise AttributeError(name)", True),
])
def test_serves_none_reads_whether_the_getattr_can_end_without_raising(body, expected):
    fn = ast.parse("def __getattr__(name):\n" + "\n".join("    " + line for line in body.splitlines())).body[0]
    assert index.serves_none(fn) is expected


def test_serves_none_walks_an_elif_chain_far_longer_than_python_recursion():
    """An `elif` chain parses far deeper than Python recurses (tests/gate/test_gate_hostile_files.py);
    one in a core `__getattr__` must neither raise nor turn the module into one the index cannot read."""
    chain: list[ast.stmt] = [ast.Return(ast.Constant(0))]
    for i in range(5000):
        chain = [ast.If(ast.Compare(ast.Name("name"), [ast.Eq()], [ast.Constant(f"a{i}")]),
                        [ast.Return(ast.Constant(i))], chain)]
    fn = ast.FunctionDef("__getattr__", ast.arguments([], [ast.arg("name")], None, [], [], None, []), chain, [])
    assert index.serves_none(fn) is False  # every branch returns a value
    last = chain[0]
    while last.orelse and isinstance(last.orelse[0], ast.If):
        last = last.orelse[0]
    last.orelse = []  # the last test falls through: every other name is None
    assert index.serves_none(fn) is True
