"""A name in a comment or a docstring is prose, not a value (issue 27, a false alarm on the
tuned pairings). Synthetic trees written here, never copied upstream code.

vLLM 0.31.0's `Scheduler._update_waiting_for_remote_kv` runs only from `schedule` (through
`_handle_blocked_waiting_request`), which vllm-rbln's optimum scheduler overrides; but two
comments mention it in parentheses (`# has arrived (_update_waiting_for_remote_kv).`), which
the name search read as the function passed around as a value, so everything it calls counted
as reachable: `_mark_prefix_replay`'s read of `self.prefix_replay_tokens` (set only in the
`__init__` the plugin skips) was an error.
"""

from __future__ import annotations

import gatekit
from overlay.gate.callers import value_use, without_prose

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": ""}

CORE = '''
    class Scheduler:
        def __init__(self, config):
            self.config = config
            self.replay = {}
            self.waiting = []

        def schedule(self):
            for request in self.waiting:
                self._promote(request)

        def _promote(self, request):
            """Called once a request's KV has arrived (see _promote)."""
            self._mark(request)

        def _mark(self, request):
            self.replay[request] = 1

        def update(self, out):
            # a request moves on once its KV has arrived (_promote).
            return out


    class Engine:
        def step(self, scheduler, out):
            scheduler.schedule()
            scheduler.update(out)
'''

PLUGIN = '''
    from vllm.v1.core.sched import Scheduler


    class RBLNScheduler(Scheduler):
        def __init__(self, config):
            self.config = config
            self.waiting = []

        def schedule(self):
            return self.waiting
'''

REPLAY = "attribute:vllm.v1.core.sched.Scheduler.replay"


def gate(tmp_path, core: str):
    return gatekit.gate_loaded(tmp_path, PKGS, {"vllm/v1/core/sched.py": core},
                               {"vllm_ascend/sched.py": PLUGIN}, ("vllm_ascend.sched",))


def test_a_helper_named_only_in_comments_and_docstrings_runs_only_from_its_callers(tmp_path):
    assert "(_promote)" in CORE and "(see _promote)" in CORE
    found = gatekit.by_symbol(gate(tmp_path, CORE), REPLAY)
    assert [f.severity for f in found] == ["warning"]


def test_a_helper_passed_as_a_value_in_code_stays_reachable(tmp_path):
    hooked = CORE.replace("            # a request moves on once its KV has arrived (_promote).\n",
                          "            hooks = [self._promote]\n")
    assert hooked != CORE
    assert [f.severity for f in gatekit.by_symbol(gate(tmp_path, hooked), REPLAY)] == ["error"]


def test_prose_is_blanked_and_code_and_one_line_strings_are_kept():
    code = (b'x = f(a)  # (b)\n'
            b's = "# (c)"  # (d)\n'
            b'def g():\n    """Uses (e)."""\n    return h(k)\n'
            b"t = 'don''t'  # (m)\n")
    out = without_prose(code)
    assert [w for w in (b"a", b"b", b"c", b"d", b"e", b"k", b"m") if value_use(out, w)] == [b"a", b"c", b"k"]
