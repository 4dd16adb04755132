"""Building: complete or absent, unreadable sources skipped, duplicates collapsed, read-only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gencoach.library import CanonicalDatasetAdapter, LibraryError
from gencoach.library.build import build_library
from gencoach.library.manifest import file_sha256
from tests.library.sources import coached_save


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): file_sha256(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_an_unreadable_save_is_reported_and_skipped(saves: Path, tmp_path: Path) -> None:
    """An incomplete save is named with its reason; the others make a complete library."""
    broken = saves / "broken"
    coached_save(broken, "broken")
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "export_complete": False}))
    messages: list[str] = []
    result = build_library([saves], tmp_path / "lib", "r1", say=messages.append)
    assert [skip.name for skip in result.skipped] == ["saves/broken"]
    assert messages == [
        "skipped saves/broken: incomplete save (export_complete is false): still being "
        "written, or interrupted"
    ]
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        assert {row.source_id for row in lib.select()} == {
            "save:run-1", "save:run-2", "save:run-3", "save:magma-1", "save:human-1"
        }  # fmt: skip


def test_nothing_readable_writes_nothing(tmp_path: Path) -> None:
    """With no readable source the build fails and leaves no folder at all."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(LibraryError, match="no trajectory could be read"):
        build_library([tmp_path / "empty"], tmp_path / "lib", "r1")
    assert sorted(os.listdir(tmp_path)) == ["empty"]


def test_an_existing_folder_is_never_overwritten(saves: Path, tmp_path: Path) -> None:
    """Building onto an existing path is refused before anything is read."""
    (tmp_path / "lib").mkdir()
    with pytest.raises(LibraryError, match="already exists; a library is never overwritten"):
        build_library([saves], tmp_path / "lib", "r1")


def test_duplicates_collapse_into_one_record_keeping_every_contributor(tmp_path: Path) -> None:
    """The same content from two runs is stored once, with both sources as contributors."""
    coached_save(tmp_path / "src" / "a", "run-a")
    coached_save(tmp_path / "src" / "b", "run-b")
    result = build_library([tmp_path / "src"], tmp_path / "lib", "r1")
    assert (result.accepted, result.duplicates) == (5, 5)
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        assert len(lib.select()) == 5
        record = lib.get_trajectory(lib.select()[0].trajectory_id).trajectory
        assert [c.source_id for c in record.contributors] == ["save:run-a", "save:run-b"]
        assert lib.manifest.counts["duplicates"] == 5


def test_the_adapter_never_writes(library: CanonicalDatasetAdapter) -> None:
    """Reading everything changes no byte of the library, and its index refuses writes."""
    before = _tree(library.path)
    list(library.iter_examples(view="turn"))
    library.evaluation_bundle(library.select()[0].task_key)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        library._index._db.execute("DELETE FROM splits")
    assert _tree(library.path) == before


def test_a_changed_shard_is_refused(saves: Path, tmp_path: Path) -> None:
    """A shard whose bytes no longer match the manifest's SHA-256 stops the adapter."""
    build_library([saves], tmp_path / "lib", "r1")
    shard = tmp_path / "lib" / "shards" / "000000.jsonl"
    data = bytearray(shard.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")
    shard.write_bytes(bytes(data))
    with pytest.raises(LibraryError, match=r"does not match the SHA-256 in manifest\.json"):
        CanonicalDatasetAdapter(tmp_path / "lib")


def test_an_unknown_format_version_is_refused(saves: Path, tmp_path: Path) -> None:
    """A manifest of a future format version is refused with both versions named."""
    build_library([saves], tmp_path / "lib", "r1")
    path = tmp_path / "lib" / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "format_version": 9}))
    with pytest.raises(LibraryError, match="format_version 9 cannot be read; this reader reads 2"):
        CanonicalDatasetAdapter(tmp_path / "lib")


_SLOW_BUILD = """
import sys, time
from pathlib import Path
from gencoach.library import writer
from gencoach.library.build import build_library

real_add = writer.LibraryWriter.add
def slow_add(self, source, **options):
    tally = real_add(self, source, **options)
    Path(sys.argv[3]).touch()
    time.sleep(60)
    return tally
writer.LibraryWriter.add = slow_add
build_library([Path(sys.argv[1])], Path(sys.argv[2]), "r1")
"""


@pytest.mark.slow
def test_a_killed_build_leaves_nothing_that_looks_like_a_library(
    saves: Path, tmp_path: Path
) -> None:
    """A build process killed half-way leaves no library at the output path."""
    output, started = tmp_path / "lib", tmp_path / "one-source-written"
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_BUILD, str(saves), str(output), str(started)]
    )
    try:
        deadline = time.monotonic() + 45
        while not started.exists():
            assert process.poll() is None, "the build process ended before writing a source"
            assert time.monotonic() < deadline, "the build wrote no source within 45 s"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    assert not output.exists()
    partial = [path for path in tmp_path.iterdir() if path.name.startswith(".lib.partial-")]
    assert len(partial) == 1
    assert not (partial[0] / "manifest.json").exists()
    with pytest.raises(LibraryError, match="is not a complete library"):
        CanonicalDatasetAdapter(partial[0])
    shutil.rmtree(partial[0])


def test_the_same_sources_build_the_same_library(saves: Path, tmp_path: Path) -> None:
    """Two builds of the same sources write byte-identical shards and the same index rows."""
    build_library([saves], tmp_path / "one", "r1")
    build_library([saves], tmp_path / "two", "r1")
    one = json.loads((tmp_path / "one" / "manifest.json").read_text())
    two = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert one["shards"] == two["shards"]
    assert one["counts"] == two["counts"]
    with (
        CanonicalDatasetAdapter(tmp_path / "one") as first,
        CanonicalDatasetAdapter(tmp_path / "two") as second,
    ):
        assert first.select() == second.select()


def test_shared_prefixes_are_stored_once_and_read_back_whole(saves: Path, tmp_path: Path) -> None:
    """Most records of a save are stored as tails of an anchor, and every record reads
    back exactly as the whole canonical record the sources give."""
    from gencoach.library.build import write_canonical
    from gencoach.library.prefixes import PREFIX

    build_library([saves], tmp_path / "lib", "r1")
    write_canonical([saves], tmp_path / "whole.jsonl")
    whole = {
        record["id"]: record
        for record in map(json.loads, (tmp_path / "whole.jsonl").read_text().splitlines())
    }
    lines = [
        json.loads(line)
        for shard in sorted((tmp_path / "lib" / "shards").iterdir())
        for line in shard.read_text().splitlines()
    ]
    tails = [line for line in lines if PREFIX in line]
    assert len(tails) > len(lines) / 2
    assert all("system" not in tail and "tools" not in tail for tail in tails)
    shard_bytes = sum(p.stat().st_size for p in (tmp_path / "lib" / "shards").iterdir())
    assert shard_bytes < (tmp_path / "whole.jsonl").stat().st_size * 0.7
    with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
        for record in lib.iter_records():
            expected = whole[record.metadata.trajectory_id]
            trajectory = record.trajectory
            assert trajectory.events == expected["events"]
            assert trajectory.system == expected["system"]
            assert trajectory.tools == expected["tools"]
            assert trajectory.task == expected["task"]
