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


def _declares_nothing_through_a_link_out(tree, link, text: str) -> bool:
    """`link` (a file the tree declares its core in) made a link to a file outside the
    tree that would declare one: nothing is declared."""
    import os

    from overlay.trees.baseline_trees import declared_release

    outside = tree.parent / f"outside-{link.name}"
    outside.write_text(text)
    os.symlink(outside, link)
    return declared_release(tree) is None


def test_the_declared_release_is_read_as_data(tmp_path):
    """A tag file that is a link out of the tree, or huge, declares nothing."""
    from overlay.trees.baseline_trees import declared_release

    (tmp_path / ".github").mkdir()
    tag = tmp_path / ".github" / "vllm-release-tag.commit"
    tag.write_text("v0.30.0\n")
    assert declared_release(tmp_path) == "0.30.0"
    tag.unlink()
    assert _declares_nothing_through_a_link_out(tmp_path, tag, "v9.9.9\n")


def test_a_release_older_than_the_tag_file_declares_its_core_in_the_dockerfile(tmp_path):
    """vllm-ascend 0.20.2rc1 and older have no `.github/vllm-release-tag.commit`; their
    Dockerfile clones core at `ARG VLLM_TAG=v0.20.2`. The tag file wins where both exist."""
    from overlay.trees.baseline_trees import declared_release

    docker = tmp_path / "Dockerfile"
    docker.write_text("FROM base\nARG VLLM_REPO=https://example.invalid/vllm.git\n"
                      "ARG VLLM_TAG=v0.20.2\nRUN git clone -b $VLLM_TAG $VLLM_REPO\n")
    assert declared_release(tmp_path) == "0.20.2"
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "vllm-release-tag.commit").write_text("v0.22.1\n")
    assert declared_release(tmp_path) == "0.22.1"


def test_an_image_folder_dockerfile_that_clones_core_at_a_release_declares_it(tmp_path):
    """vllm-gaudi's release tags declare their core only in `.cd/Dockerfile.*`
    (`ARG VLLM_PROJECT_COMMIT=v0.24.0`; vllm-gaudi v0.24.0). Every image there must agree on
    one release: an image left on a branch or an empty value declares nothing, two releases
    declare nothing, and a Dockerfile under tests/ is not the plugin's image."""
    from overlay.trees.baseline_trees import declared_release

    cd = tmp_path / ".cd"
    cd.mkdir()
    (cd / "Dockerfile.ubuntu.pytorch.vllm").write_text(
        "ARG VLLM_GAUDI_COMMIT=v0.24.0\nARG VLLM_PROJECT_COMMIT=v0.24.0\n"
        "ARG VLLM_PROJECT_COMMIT\nRUN git checkout $VLLM_PROJECT_COMMIT\n")
    (cd / "Dockerfile.rhel.ubi.vllm.no-torchaudio").write_text("ARG VLLM_PROJECT_COMMIT=\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "Dockerfile.hpu").write_text("ARG VLLM_PROJECT_COMMIT=v0.9.0\n")
    assert declared_release(tmp_path) == "0.24.0"
    (cd / "Dockerfile.rhel.ubi.vllm").write_text("ARG VLLM_PROJECT_COMMIT=v0.23.0\n")
    assert declared_release(tmp_path) is None  # two releases: nothing is declared
    (cd / "Dockerfile.rhel.ubi.vllm").write_text("ARG VLLM_PROJECT_COMMIT=main\n")
    assert declared_release(tmp_path) == "0.24.0"
    (tmp_path / "Dockerfile").write_text("ARG VLLM_TAG=v0.20.2\n")
    assert declared_release(tmp_path) == "0.20.2"  # the root image wins, as before


def test_a_dockerfile_declares_only_a_release_and_only_from_inside_the_tree(tmp_path):
    from overlay.trees.baseline_trees import declared_release

    docker = tmp_path / "Dockerfile"
    for text in ("ARG VLLM_TAG=main\n", "ARG VLLM_TAG=$TAG\n", "ARG VLLM_TAG=v0.20.2; rm -rf /\n",
                 "# ARG VLLM_TAG=v0.20.2\n", "ARG VLLM_TAG=../../0.20.2\n", ""):
        docker.write_text(text)
        assert declared_release(tmp_path) is None, text
    docker.write_text("ARG VLLM_TAG=v0.20.2\n" + "#" * (300 * 1024))  # over the cap: not read
    assert declared_release(tmp_path) is None
    docker.unlink()
    assert _declares_nothing_through_a_link_out(tmp_path, docker, "ARG VLLM_TAG=v9.9.9\n")


def test_an_install_script_that_installs_core_at_a_release_declares_it(tmp_path):
    """vllm-metal has no image and no release tag file: its install.sh installs core at
    `VLLM_VERSION="0.27.1"` (before that `local vllm_v="0.25.1"` in a function). One release
    assigned to core's version variable declares it; two releases, a value built from other
    variables, a branch, a comment, another variable or a script elsewhere declare nothing,
    and the images and tag file win where they exist."""
    from overlay.trees.baseline_trees import declared_release

    script = tmp_path / "install.sh"
    script.write_text('#!/bin/bash\nset -e\nVLLM_VERSION="0.27.1"\n'
                      'URL="https://example.invalid/v${VLLM_VERSION}/vllm-${VLLM_VERSION}.whl"\n')
    assert declared_release(tmp_path) == "0.27.1"
    script.write_text("install_vllm() {\n  local vllm_v='0.25.1'  # bump with care\n}\n")
    assert declared_release(tmp_path) == "0.25.1"
    for text in ('VLLM_VERSION="0.27.1"\nVLLM_VERSION="0.28.0"\n', 'VLLM_VERSION="${BASE}.1"\n',
                 "VLLM_VERSION=main\n", '# VLLM_VERSION="0.27.1"\n', 'MLX_VERSION="0.27.1"\n',
                 'VLLM_VERSION="0.27.1"; rm -rf /\n', 'VLLM_VERSION="0.27.1\'\n', ""):
        script.write_text(text)
        assert declared_release(tmp_path) is None, text
    script.write_text('VLLM_VERSION="0.27.1"\n' + "#" * (300 * 1024))  # over the cap: not read
    assert declared_release(tmp_path) is None
    script.unlink()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "install.sh").write_text('VLLM_VERSION="0.27.1"\n')
    assert declared_release(tmp_path) is None  # only the tree's own install script
    assert _declares_nothing_through_a_link_out(tmp_path, script, 'VLLM_VERSION="9.9.9"\n')
    script.unlink()
    script.write_text('VLLM_VERSION="0.27.1"\n')
    (tmp_path / "Dockerfile").write_text("ARG VLLM_TAG=v0.20.2\n")
    assert declared_release(tmp_path) == "0.20.2"


def test_whatever_a_dockerfile_holds_the_declared_core_is_a_release_version_or_nothing(tmp_path_factory):
    from hypothesis import given, settings, strategies as st

    from overlay.gate.evaluation import is_release_version
    from overlay.trees.baseline_trees import declared_release

    @settings(max_examples=150, deadline=None)
    @given(st.text(max_size=200), st.text(alphabet="0123456789.vrcpost/$;_- ", max_size=20))
    def check(noise, tag):
        tree = tmp_path_factory.mktemp("docker")
        (tree / "Dockerfile").write_text(f"{noise}\nARG VLLM_TAG={tag}\n{noise}", errors="surrogatepass")
        got = declared_release(tree)
        assert got is None or is_release_version(got)
        (tree / "Dockerfile").unlink()  # the image folder's form (vllm-gaudi's .cd/)
        (tree / ".cd").mkdir()
        (tree / ".cd" / "Dockerfile.x").write_text(f"{noise}\nARG VLLM_PROJECT_COMMIT={tag}\n{noise}",
                                                    errors="surrogatepass")
        got = declared_release(tree)
        assert got is None or is_release_version(got)
        (tree / ".cd" / "Dockerfile.x").unlink()  # the install script's form (vllm-metal)
        (tree / "install.sh").write_text(f"{noise}\nVLLM_VERSION={tag}\n{noise}", errors="surrogatepass")
        got = declared_release(tree)
        assert got is None or is_release_version(got)

    check()


def test_an_image_folder_or_image_that_links_out_of_the_tree_declares_nothing(tmp_path):
    """The image folder is upstream data: a `.cd` that is a link to a folder outside the tree,
    or a Dockerfile in it that links out, is not read."""
    import os

    from overlay.trees.baseline_trees import declared_release

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Dockerfile.x").write_text("ARG VLLM_PROJECT_COMMIT=v9.9.9\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    os.symlink(outside, tree / ".cd")
    assert declared_release(tree) is None
    (tree / ".cd").unlink()
    (tree / ".cd").mkdir()
    os.symlink(outside / "Dockerfile.x", tree / ".cd" / "Dockerfile.ubuntu")
    assert declared_release(tree) is None
