"""A skipped core `__init__` leaves fields unset, but core reads some of them only when the
object's own state asks for it (issue 27, false alarms on the tuned pairings). Synthetic
trees written here, never copied upstream code.

vLLM 0.24.0's `Scheduler` pairs `deferred_frees`, `sched_step_seq` and `processed_step_seq`
with the flag `defer_block_free`, in three shapes the gate read as unguarded:
`if not self.defer_block_free or request.last_sched_seq <= self.processed_step_seq: ...
return`, the append after that early exit, and `_drain_deferred_frees`, which core calls
only under `if self.defer_block_free and ...:`. vllm-rbln's optimum scheduler skips core's
`__init__` (and from 0.11.3 sets the flag False): each read was an error in four
pairings. Such a guard counts where the flag is off on the plugin's object (its classes
store only a false constant) or unset there (reading it raises first, its own finding): the
read is then a warning. A flag the plugin sets otherwise (0.13.0's `if not self.log_stats:
return None` before `self.kv_metrics_collector`, with `log_stats` passed through), a test
that is no plain flag (`if not self.vllm_config.model_config.enable_return_routed_experts:`),
or a read any unguarded path reaches stays an error.
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": "", "vllm/v1/core/__init__.py": ""}

CORE = """
    class Scheduler:
        def __init__(self, config):
            self.config = config
            self.defer_free = bool(config)
            self.processed_seq = 0
            self.deferred = []

        def free_request(self, request):
            if not self.defer_free or request.seq <= self.processed_seq:
                return request
            self.deferred.append(request)

        def update(self, out):
            if self.defer_free and out:
                self._drain()
            return out

        def _drain(self):
            while self.deferred:
                self.deferred.pop()


    class Engine:
        def step(self, scheduler, request, out):
            scheduler.free_request(request)
            scheduler.update(out)
"""

PLUGIN = """
    from vllm.v1.core.sched import Scheduler


    class RBLNScheduler(Scheduler):
        def __init__(self, config):
            self.config = config
            self.defer_free = False
"""

PROCESSED = "attribute:vllm.v1.core.sched.Scheduler.processed_seq"
DEFERRED = "attribute:vllm.v1.core.sched.Scheduler.deferred"


def gate(tmp_path, core: str, plugin: str = PLUGIN):
    return gatekit.gate_loaded(tmp_path, PKGS, {"vllm/v1/core/sched.py": core},
                               {"vllm_ascend/sched.py": plugin}, ("vllm_ascend.sched",))


def severities(report, symbol: str) -> list[str]:
    return sorted(f.severity for f in gatekit.by_symbol(report, symbol))


def exit_test(test: str) -> str:
    """CORE with `free_request`'s early-exit test replaced by `test`."""
    changed = CORE.replace("if not self.defer_free or request.seq <= self.processed_seq:", test)
    assert changed != CORE
    return changed


def test_reads_behind_the_objects_own_flag_in_three_shapes_are_warnings(tmp_path):
    report = gate(tmp_path, CORE)
    assert severities(report, PROCESSED) == ["warning"]  # a later operand of `or`
    assert severities(report, DEFERRED) == ["warning"]  # after the early exit; in the guarded helper
    found = gatekit.by_symbol(report, DEFERRED)[0]
    assert "self.defer_free" in found.reason, found.reason


def test_a_read_before_the_flag_is_tested_stays_an_error(tmp_path):
    first = exit_test("if request.seq <= self.processed_seq or not self.defer_free:")
    assert severities(gate(tmp_path, first), PROCESSED) == ["error"]


def test_a_test_of_another_object_guards_nothing(tmp_path):
    operand = exit_test("if not request.defer_free or request.seq <= self.processed_seq:")
    assert severities(gate(tmp_path / "a", operand), PROCESSED) == ["error"]
    other_exit = exit_test("if not request.defer_free or request.seq <= request.done:")
    assert severities(gate(tmp_path / "b", other_exit), DEFERRED) == ["error"]  # the append runs unguarded


def test_an_if_that_does_not_always_leave_guards_only_its_own_body(tmp_path):
    stays = CORE.replace("                return request\n", "                request = None\n")
    assert stays != CORE
    assert severities(gate(tmp_path, stays), DEFERRED) == ["error"]


def test_a_helper_any_unguarded_caller_runs_is_an_error(tmp_path):
    flush = CORE.replace("        def _drain(self):\n",
                         "        def flush(self):\n            self._drain()\n\n        def _drain(self):\n") \
        .replace("            scheduler.update(out)\n", "            scheduler.update(out)\n            scheduler.flush()\n")
    assert flush.count("self._drain()") == 2
    # `free_request`'s append is guarded; `_drain` now also runs from `flush`, unguarded
    no_append = flush.replace("            self.deferred.append(request)\n", "            return None\n")
    assert severities(gate(tmp_path, no_append), DEFERRED) == ["error"]


def test_a_guarded_call_from_a_method_the_plugin_overrides_does_not_run_at_all(tmp_path):
    """The guard helps only on calls that run on the plugin's object; a plugin override of
    `update` (no super()) leaves `_drain` with no caller there: a warning either way."""
    plugin = PLUGIN + "\n        def update(self, out):\n            return out\n"
    assert severities(gate(tmp_path, CORE, plugin), DEFERRED) == ["warning"]


def test_a_flag_the_plugin_leaves_unset_raises_first(tmp_path):
    unset = PLUGIN.replace("            self.defer_free = False\n", "")
    report = gate(tmp_path, CORE, unset)
    assert severities(report, PROCESSED) == ["warning"]
    assert severities(report, DEFERRED) == ["warning"]
    assert "itself unset" in gatekit.by_symbol(report, DEFERRED)[0].reason
    assert severities(report, "attribute:vllm.v1.core.sched.Scheduler.defer_free") == ["error"]


def test_a_flag_the_plugin_sets_from_its_input_or_turns_on_proves_nothing(tmp_path):
    passed = PLUGIN.replace("self.defer_free = False", "self.defer_free = bool(config)")
    assert passed != PLUGIN
    report = gate(tmp_path / "a", CORE, passed)
    assert severities(report, PROCESSED) == ["error"]
    assert severities(report, DEFERRED) == ["error"]
    turned_on = PLUGIN + "\n        def enable(self):\n            self.defer_free = True\n"
    assert severities(gate(tmp_path / "b", CORE, turned_on), DEFERRED) == ["error"]


def test_an_exit_taken_when_the_flag_is_on_leaves_the_rest_running_with_it_off(tmp_path):
    flipped = exit_test("if self.defer_free or request.seq <= self.processed_seq:")
    report = gate(tmp_path, flipped)
    assert severities(report, PROCESSED) == ["error"]  # `or` reaches it when the flag is off
    assert severities(report, DEFERRED) == ["error"]  # so does the append after the exit


def test_a_test_that_is_no_plain_flag_guards_nothing_new(tmp_path):
    config = exit_test("if not self.config.defer_free or request.seq <= self.processed_seq:")
    assert severities(gate(tmp_path, config), PROCESSED) == ["error"]


def test_a_caller_under_a_state_test_that_is_no_proven_flag_still_runs_the_helper(tmp_path):
    """A read nested under `if self.x:` in the method itself is a warning (the older rule); a
    helper whose caller sits under such a test is not proven dead by it."""
    other = CORE.replace("            if self.defer_free and out:\n", "            if self.config and out:\n")
    assert other != CORE
    no_append = other.replace("            self.deferred.append(request)\n", "            return None\n")
    assert severities(gate(tmp_path, no_append), DEFERRED) == ["error"]
