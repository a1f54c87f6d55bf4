"""The gate's index keyed by file content (issue 27 item 5, issue 30 item 9).

What the gate extracts from a core file (its module index in one process; the names it
calls, on disk under `<cache>/gate/blobs/`) is keyed by the file's blob id, so two
releases that hold a file unchanged share it and a changed file is extracted again.
The tests count extractions; they never time them. A cache entry that does not match
the file it names, or a folder without the gate's marker, is never an answer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gatekit
from hypothesis import given, strategies as st

from overlay.gate import run_gate, store
from overlay.gate.engine import Cache
from overlay.gate.source import DirSource


def blob_id(data: bytes) -> str:
    """Git's blob id, as `git hash-object` computes it (the test's own oracle)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

CHANGED = "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py"
UNCHANGED = "vllm/v1/worker/gpu/model_runner.py"


def two_releases(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Core A, core B (A with one file changed), and the plugin."""
    a = gatekit.core(tmp_path / "a", new=True, version="0.25.0")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (b / CHANGED).write_text((a / CHANGED).read_text() + "\n\ndef added_in_b():\n    return 1\n")
    return a, b, gatekit.plugin(tmp_path / "plugin", fixed=False)


def _key(tree: Path, rel: str) -> str:
    return f"blob:{blob_id((tree / rel).read_bytes())}:{rel}"


def test_a_directory_file_is_keyed_by_its_content():
    import tempfile

    with tempfile.TemporaryDirectory() as t:
        one, two = Path(t, "one"), Path(t, "two")
        for d in (one, two):
            (d / "pkg").mkdir(parents=True)
            (d / "pkg" / "m.py").write_text("x = 1\n")
        assert DirSource(one).key("pkg/m.py") == DirSource(two).key("pkg/m.py") == \
            "blob:" + blob_id(b"x = 1\n")
        (two / "pkg" / "m.py").write_text("x = 2\n")
        assert DirSource(one).key("pkg/m.py") != DirSource(two).key("pkg/m.py")


def test_an_unchanged_core_file_is_indexed_once_across_releases_and_a_changed_one_again(tmp_path):
    a, b, plugin = two_releases(tmp_path)
    cache = Cache()
    first = run_gate(a, plugin, cache=cache)
    before = dict(cache.core)
    assert _key(a, UNCHANGED) in before and _key(a, CHANGED) in before
    second = run_gate(b, plugin, cache=cache)
    assert second.stats["core_files_read"] == first.stats["core_files_read"]
    added = set(cache.core) - set(before)
    assert added == {_key(b, CHANGED)}, added  # the changed file alone was indexed again
    for key, mod in before.items():  # and every other module is the very object A made
        assert cache.core[key] is mod, key


def test_the_names_each_file_calls_are_extracted_once_per_content_across_processes(tmp_path):
    a, b, plugin = two_releases(tmp_path)
    root = tmp_path / "cache"
    first = Cache()
    run_gate(a, plugin, store_root=root, cache=first)
    assert isinstance(first.text.names, store.BlobNames)
    assert len(first.text.names.computed) >= 8  # every file of both trees, on a cold cache
    assert (root / store.BLOBS / store.MARKER).read_text() == store.MARKER_TEXT
    second = Cache()  # a new process: nothing in memory
    report = run_gate(b, plugin, store_root=root, cache=second)
    assert second.text.names.computed == {"blob:" + blob_id((b / CHANGED).read_bytes())}
    assert not [n for n in report.notes if "file cache" in n]


def _entry(root: Path, tree: Path, rel: str) -> Path:
    blob = blob_id((tree / rel).read_bytes())
    return root / store.BLOBS / blob[:2] / f"{blob[2:]}.json"


def test_a_corrupt_or_foreign_entry_is_recomputed_with_one_note_never_trusted(tmp_path):
    a, b, plugin = two_releases(tmp_path)
    root = tmp_path / "cache"
    run_gate(a, plugin, store_root=root, cache=Cache())
    entry = _entry(root, a, UNCHANGED)
    doc = json.loads(entry.read_text())
    good = set(doc["names"])
    assert good
    # a forged entry: names that are not the file's, the old digest kept
    doc["names"] = ["nothing_here"]
    entry.write_text(json.dumps(doc))
    # another file's entry moved under this blob's name (a foreign blob id inside)
    other = _entry(root, a, "vllm/v1/worker/gpu/cudagraph_utils.py")
    other.write_bytes(b"\x80not json at all")
    cache = Cache()
    report = run_gate(b, plugin, store_root=root, cache=cache)
    key = "blob:" + blob_id((a / UNCHANGED).read_bytes())
    assert key in cache.text.names.computed  # recomputed from the file, not read from the entry
    assert set(n.decode() for n in cache.text.names[key]) == good
    notes = [n for n in report.notes if "file cache" in n]
    assert len(notes) == 1 and notes[0].startswith("2 entries") and "ignored, recomputed" in notes[0], notes
    # rewritten sound on the way out
    assert store.parse_entry(key[5:], entry.read_bytes()) == frozenset(n.encode() for n in good)


def test_a_folder_without_the_gates_marker_is_not_used_and_says_so_in_one_line(tmp_path):
    a, b, plugin = two_releases(tmp_path)
    root = tmp_path / "cache"
    run_gate(a, plugin, store_root=root, cache=Cache())
    (root / store.BLOBS / store.MARKER).unlink()
    cache = Cache()
    report = run_gate(b, plugin, store_root=root, cache=cache)
    assert len(cache.text.names.computed) >= 8  # nothing was read from the folder
    notes = [n for n in report.notes if "file cache" in n]
    assert len(notes) == 1 and "lacks the gate's marker" in notes[0] and "remove the folder" in notes[0]
    assert not (root / store.BLOBS / store.MARKER).exists()  # and nothing written into it


@given(st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode),
                 st.dictionaries(st.sampled_from(["format", "blob", "names", "digest"]),
                                 st.one_of(st.integers(), st.text(max_size=45), st.lists(st.text(max_size=5))),
                                 ).map(lambda d: json.dumps(d).encode())))
def test_any_bytes_are_an_entry_only_when_sound(raw):
    blob = "a" * 40
    names = store.parse_entry(blob, raw)  # never raises
    assert names is None  # none of these carries the digest of its names


@given(st.sets(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), max_size=8),
       st.integers(min_value=0, max_value=200), st.integers(min_value=1, max_value=255))
def test_a_changed_byte_of_a_sound_entry_never_yields_other_names(names, at, xor):
    blob = "b" * 40
    raw = bytearray(store.entry_text(blob, names).encode())
    assert store.parse_entry(blob, bytes(raw)) == frozenset(n.encode() for n in names)
    raw[at % len(raw)] ^= xor
    got = store.parse_entry(blob, bytes(raw))
    assert got is None or got == frozenset(n.encode() for n in names)
    assert store.parse_entry("c" * 40, store.entry_text(blob, names).encode()) is None  # another blob's


def test_a_plugin_module_the_core_decides_nothing_in_is_indexed_once_for_every_core(tmp_path):
    a, b, _ = two_releases(tmp_path)
    branchy = "vllm_ascend/branchy.py"
    plugin = gatekit.plugin(tmp_path / "plugin2", fixed=False, extra={
        branchy: "from vllm_ascend.utils import vllm_version_is\n\n"
                 "if vllm_version_is('0.25.0'):\n    X = 1\nelse:\n    X = 2\n"})
    cache = Cache()
    run_gate(a, plugin, cache=cache)
    before = dict(cache.plugin)
    run_gate(b, plugin, cache=cache)
    added = {k.split(":", 2)[2].split("@", 1)[0] for k in set(cache.plugin) - set(before)}
    assert added == {branchy}, added  # only the module whose `if` this core decides
    reused = [k for k in before if k.endswith("@any")]
    assert len(reused) >= 5 and all(cache.plugin[k] is before[k] for k in reused)


def test_a_cache_folder_others_may_write_is_never_read(tmp_path):
    a, _, plugin = two_releases(tmp_path)
    root = tmp_path / "cache"
    run_gate(a, plugin, store_root=root, cache=Cache())
    assert run_gate(a, plugin, store_root=root, cache=Cache()).stats["cached"] is True
    root.chmod(0o777)  # anyone could have written the entries now in it
    again = run_gate(a, plugin, store_root=root, cache=Cache())
    assert again.stats["cached"] is False
    (root / store.BLOBS).chmod(0o777)
    cache = Cache()
    report = run_gate(a, plugin, store_root=root, cache=cache)
    assert len(cache.text.names.computed) >= 8
    assert [n for n in report.notes if "writable by its group or by others: not used" in n]


def test_a_bounded_cache_keeps_what_the_next_core_reuses_and_drops_what_no_run_used(tmp_path):
    """Cache.bounded (gate-eval's, over many pairings in one process): after each run
    `age()` drops the entries that run did not use. Release B reuses A's unchanged
    modules (the very objects), and A's changed file goes once B's run is over; the
    findings are those of a cache that keeps everything."""
    a, b, plugin = two_releases(tmp_path)
    cache = Cache.bounded()
    run_gate(a, plugin, cache=cache)
    cache.age()
    kept = dict(cache.core)  # a plain copy: looking an entry up would count as using it
    second = run_gate(b, plugin, cache=cache)
    assert cache.age() > 0
    held = set(cache.core.keys())
    assert dict.__getitem__(cache.core, _key(b, UNCHANGED)) is kept[_key(a, UNCHANGED)]  # same content
    assert _key(a, CHANGED) not in held and _key(b, CHANGED) in held and _key(a, UNCHANGED) in held
    assert second.findings == run_gate(b, plugin, cache=Cache()).findings


def test_an_aging_table_keeps_an_entry_any_access_touched():
    from overlay.gate.engine import Aging

    table = Aging(read=1, got=2, asked=3, put=4, defaulted=5, idle=6)
    table.age()  # a table starts with nothing used
    assert dict(table) == {}
    for key, value in dict(read=1, got=2, asked=3, idle=6).items():
        table[key] = value
    table.age()
    _ = table["read"], table.get("got"), "asked" in table, table.get("never"), "never" in table
    table["put"] = 4
    table.setdefault("defaulted", 5)
    assert table.age() == 1  # "idle" alone went
    assert sorted(table) == ["asked", "defaulted", "got", "put", "read"]
