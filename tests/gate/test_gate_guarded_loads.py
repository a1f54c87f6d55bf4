"""A plugin module loaded only where its loader swallows the failure cannot break start-up.

vllm-kunlun installs an import hook from its platform entry point: a function replaces
`builtins.__import__`, and for a few core module names (`vllm.v1.worker.utils`,
`vllm.model_executor.layers.sampler`) imports the plugin's own module in their place, inside
`try: ... except Exception: pass`. When the plugin's module no longer imports against a new
core (vllm-kunlun's `v1/worker/utils.py` imports `AttentionMetadataBuilder`, gone from vLLM
0.15.1), the hook swallows the ImportError and core's own module is used: nothing crashes,
the plugin's replacement silently does not apply. The gate reported those imports as errors
(14 false error keys over vllm-kunlun 0.10.1.1 -> 0.11.0 and 0.11.0.dev20260212 -> 0.15.1).

Such a module (and whatever only it imports) is reached, but only through a load that
catches the failure: a broken import at its load time is a warning that says where the
failure is caught and what silently does not load. Any other way in (a plain import, a
dotted string outside the guard, a handler that re-raises, a handler for some other error)
keeps it an error, and so does a broken import inside a function, which runs later, outside
the loader's `try`. Synthetic trees; the hook's shape is written anew, no upstream code."""

from __future__ import annotations

import gatekit
import pytest

from overlay.gate import run_gate

ENTRY = """
    from setuptools import setup
    setup(name="vllm-x", entry_points={"vllm.platform_plugins": ["x = vllm_x:register"]})
"""

HOOK = """
    import builtins
    import importlib
    import sys

    _real_import = builtins.__import__


    def _redirect(name, globals=None, locals=None, fromlist=(), level=0):
        try:
            targets = {"vllm.v1.worker.utils": "vllm_x.worker_utils"}
            if name in targets and name not in sys.modules:
                sys.modules[name] = importlib.import_module(targets[name])
        except Exception:
            pass
        return _real_import(name, globals, locals, fromlist, level)


    def register():
        builtins.__import__ = _redirect
        return "vllm_x.platform.XPlatform"
"""

# the replacement module: its load-time import of a name core dropped fails
WORKER_UTILS = """
    from vllm.sequence import Logprob
    import vllm_x.sampler


    def bind_kv_cache(caches):
        return caches
"""

SAMPLER = """
    from vllm.sequence import SampleLogprobs


    class Sampler:
        pass
"""

PLATFORM = """
    class XPlatform:
        device_name = "x"
"""

LOGPROB = "import:vllm.sequence:Logprob"
SAMPLE_LOGPROBS = "import:vllm.sequence:SampleLogprobs"


def _findings(tmp_path, hook=HOOK, platform=PLATFORM, worker_utils=WORKER_UTILS, extra=None):
    core = gatekit.tree(tmp_path / "core", {
        "vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.15.1'\n",
        "vllm/sequence.py": "class SequenceGroup:\n    pass\n",
        "vllm/v1/__init__.py": "", "vllm/v1/worker/__init__.py": "",
        "vllm/v1/worker/utils.py": "def bind_kv_cache(caches):\n    return caches\n"})
    plugin = gatekit.tree(tmp_path / "plugin", {
        "setup.py": ENTRY, "vllm_x/__init__.py": hook, "vllm_x/platform.py": platform,
        "vllm_x/worker_utils.py": worker_utils, "vllm_x/sampler.py": SAMPLER, **(extra or {})})
    return {f.symbol: f for f in run_gate(core, plugin).findings if f.symbol.startswith("import:")}


def _severities(tmp_path, **trees) -> tuple[str, str]:
    """The severity of the hooked module's broken import, and of the module only it imports."""
    found = _findings(tmp_path, **trees)
    return found[LOGPROB].severity, found[SAMPLE_LOGPROBS].severity


def test_a_module_only_a_swallowing_hook_loads_breaks_nothing_at_start_up(tmp_path):
    found = _findings(tmp_path)
    for symbol in (LOGPROB, SAMPLE_LOGPROBS):  # the hooked module, and the module only it imports
        assert found[symbol].severity == "warning", found[symbol]
        assert "vllm_x/__init__.py:9" in found[symbol].reason, found[symbol].reason
        assert "silently" in found[symbol].message


@pytest.mark.parametrize("hook", [
    HOOK.replace("        except Exception:\n            pass", "        except Exception:\n            raise"),
    HOOK.replace("        except Exception:\n            pass",
                 "        except Exception as e:\n            raise RuntimeError(name) from e"),
    HOOK.replace("        except Exception:", "        except KeyError:"),
    # no try at all
    HOOK.replace("        try:\n", "        if True:\n").replace("        except Exception:\n            pass\n", ""),
    # a raise anywhere in the handler lets the failures it does not expect through (vllm-omni
    # 0.18.0's `except ModuleNotFoundError as exc: if exc.name != "vllm": raise`)
    HOOK.replace("        except Exception:\n            pass",
                 "        except Exception as exc:\n            if getattr(exc, 'name', None) != 'vllm':\n"
                 "                raise\n            pass"),
    # a handler of ModuleNotFoundError alone lets a missing name (a plain ImportError) through
    HOOK.replace("        except Exception:", "        except ModuleNotFoundError:"),
])
def test_a_loader_that_lets_the_failure_through_keeps_the_error(tmp_path, hook):
    assert _severities(tmp_path, hook=hook) == ("error", "error")


def test_a_raise_only_inside_a_function_the_handler_defines_still_swallows(tmp_path):
    hook = HOOK.replace("        except Exception:\n            pass",
                        "        except Exception:\n            def _later():\n                raise RuntimeError(name)\n"
                        "            pass")
    assert _severities(tmp_path, hook=hook) == ("warning", "warning")


def test_another_plain_way_in_keeps_the_error(tmp_path):
    platform = "import vllm_x.worker_utils  # noqa\n\n\n" + PLATFORM.replace("\n    ", "\n")
    hook = HOOK.replace('return "vllm_x.platform.XPlatform"',
                        'import vllm_x.platform  # noqa\n        return "vllm_x.platform.XPlatform"')
    assert _severities(tmp_path, hook=hook, platform=platform) == ("error", "error")
    # the module only the guarded one imports is still guarded when the plain way in is elsewhere
    plain_sampler = HOOK.replace('return "vllm_x.platform.XPlatform"',
                                 'import vllm_x.sampler  # noqa\n        return "vllm_x.platform.XPlatform"')
    assert _severities(tmp_path / "sampler", hook=plain_sampler) == ("warning", "error")


def test_an_import_inside_a_function_runs_later_outside_the_loader_s_try(tmp_path):
    worker_utils = ("import vllm_x.sampler  # noqa\n\n\n"
                    "def bind_kv_cache(caches):\n    from vllm.sequence import Logprob\n    return Logprob\n")
    assert _severities(tmp_path, worker_utils=worker_utils) == ("error", "warning")


def test_a_plain_optional_import_of_a_plugin_module_is_guarded_too(tmp_path):
    hook = ('import contextlib\n\n\ndef register():\n'
            '    try:\n        import vllm_x.worker_utils  # noqa\n    except ImportError:\n        pass\n'
            '    with contextlib.suppress(ImportError):\n        import vllm_x.sampler  # noqa\n'
            '    return "vllm_x.platform.XPlatform"\n')
    found = _findings(tmp_path, hook=hook)
    assert found[LOGPROB].severity == "warning"
    assert "vllm_x/__init__.py:5" in found[LOGPROB].reason
    assert found[SAMPLE_LOGPROBS].severity == "warning"
    # the fallback a handler loads is not guarded by that handler
    fallback = hook.replace("    except ImportError:\n        pass\n",
                            "    except ImportError:\n        import vllm_x.sampler  # noqa\n")
    fallback = fallback.replace("    with contextlib.suppress(ImportError):\n        import vllm_x.sampler  # noqa\n", "")
    assert _severities(tmp_path / "fallback", hook=fallback) == ("warning", "error")


def test_a_function_defined_inside_a_try_runs_outside_it(tmp_path):
    hook = ('try:\n    def _load():\n        import vllm_x.worker_utils  # noqa\nexcept ImportError:\n    _load = None\n\n\n'
            'def register():\n    _load()\n    return "vllm_x.platform.XPlatform"\n')
    assert _severities(tmp_path, hook=hook)[0] == "error"


def test_the_same_module_loading_it_plainly_elsewhere_keeps_the_error(tmp_path):
    hook = HOOK.replace('return "vllm_x.platform.XPlatform"',
                        'import vllm_x.worker_utils  # noqa\n        return "vllm_x.platform.XPlatform"')
    assert _severities(tmp_path, hook=hook)[0] == "error"
