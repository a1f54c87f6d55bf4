"""The cyclic collector around gate runs (engine.collector_paused): a pause's end does not
walk the objects the run made (frozen instead), and the next pause frees their garbage."""

from __future__ import annotations

import gc
import weakref

import pytest

from overlay.gate import engine
from overlay.gate.engine import collector_paused


@pytest.fixture(autouse=True)
def many_objects(monkeypatch):
    """Every pause here counts as a real tree's run (millions of objects)."""
    monkeypatch.setattr(engine, "FREEZE_ABOVE", -1)


class Node:
    pass


def _cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_pause_ends_without_collecting_and_the_next_pause_frees_its_garbage():
    assert gc.isenabled()
    with collector_paused():
        ref = _cycle()
    assert gc.isenabled()
    # the objects made during the pause are frozen: no collection walks them, so the
    # end of a process's last run costs nothing
    assert gc.get_freeze_count() > 0
    gc.collect()
    assert ref() is not None
    with collector_paused():
        # the next run first frees the garbage the previous one left: no leak
        assert ref() is None
        assert not gc.isenabled()
    assert gc.isenabled()


def test_nested_pauses_freeze_once_at_the_outermost_end():
    with collector_paused():
        with collector_paused():
            ref = _cycle()
        assert not gc.isenabled()
        assert ref() is not None
    assert gc.isenabled() and gc.get_freeze_count() > 0
    with collector_paused():
        assert ref() is None


def test_a_pause_that_made_few_objects_resumes_as_before(monkeypatch):
    monkeypatch.setattr(engine, "FREEZE_ABOVE", 10 ** 9)
    with collector_paused():
        pass  # a previous test's frozen objects are collected here
    frozen = gc.get_freeze_count()
    with collector_paused():
        ref = _cycle()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    gc.collect()
    assert ref() is None
