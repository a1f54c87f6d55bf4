"""The backcast (issue 30 item 8): a forecast graded by upstream's own later release. Pure."""

from overlay.gate.backcast import CHANGED, GONE, UNCHANGED, backcast, find_site, grade, site_of

BEFORE = "import x\n\n\nclass A:\n    def f(self):\n        return x.old(1)\n\n    def g(self):\n        return 2\n"


def test_the_site_is_the_innermost_def_holding_the_line():
    assert site_of(BEFORE, 6).qualname == "A.f"
    assert site_of(BEFORE, 1).qualname == "<module>:import x"
    assert find_site(BEFORE, "A.g").text.endswith("return 2")


def test_a_site_the_maintainers_rewrote_is_changed_and_one_they_left_is_unchanged():
    after = BEFORE.replace("x.old(1)", "x.new(1, 2)")
    assert backcast(BEFORE, 6, after) == (CHANGED, "A.f")
    assert backcast(BEFORE, 9, after) == (UNCHANGED, "A.g")  # only f changed
    assert backcast(BEFORE, 6, BEFORE.replace("    def f(self):\n        return x.old(1)\n\n", "")) == (GONE, "A.f")
    assert backcast(BEFORE, 6, None) == (GONE, "A.f")


def test_grades():
    assert grade(CHANGED, False) == "confirmed" and grade(GONE, True) == "confirmed"
    assert grade(UNCHANGED, True) == "upstream-bug" and grade(UNCHANGED, False) == "not-borne-out"


def test_the_declared_release_is_read_as_data(tmp_path):
    """A tag file that is a link out of the tree, or huge, declares nothing."""
    import os

    from overlay.trees.baseline_trees import declared_release

    (tmp_path / ".github").mkdir()
    tag = tmp_path / ".github" / "vllm-release-tag.commit"
    tag.write_text("v0.30.0\n")
    assert declared_release(tmp_path) == "0.30.0"
    tag.unlink()
    outside = tmp_path.parent / "outside-tag"
    outside.write_text("v9.9.9\n")
    os.symlink(outside, tag)
    assert declared_release(tmp_path) is None
