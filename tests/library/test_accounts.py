"""A published library is read by another account: its files follow the umask, as any
file its builder creates does, not the private modes of temporary files; so do the
canonical record files and query outputs written beside it."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gencoach.library import CanonicalDatasetAdapter, LibraryError
from gencoach.library.build import append_library, build_library, write_canonical
from gencoach.library.output import write_examples
from tests.library.sources import coached_save, human_save

READER = "nobody"


@pytest.fixture
def umask() -> Iterator[None]:
    """The process's umask, restored after the test."""
    before = os.umask(0o022)
    os.umask(before)
    yield
    os.umask(before)


@pytest.fixture
def published() -> Iterator[Path]:
    """A folder every account may enter (a test's own tmp_path is private to its owner)."""
    folder = Path(tempfile.mkdtemp(prefix="gencoach-published-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _modes(library: Path) -> dict[str, int]:
    paths = [library, *sorted(library.rglob("*"))]
    return {str(path.relative_to(library)): stat.S_IMODE(path.stat().st_mode) for path in paths}


def _build_and_append(root: Path) -> Path:
    coached_save(root / "first" / "run-1")
    human_save(root / "second" / "human-1")
    build_library([root / "first"], root / "base", "r1")
    append_library(root / "base", [root / "second"], root / "grown", "r2")
    return root / "grown"


def test_library_modes_follow_the_umask(umask: None, tmp_path: Path) -> None:
    """Built and appended with umask 022, every folder is 0755 and every file 0644
    (`manifest.json` and `append_report.json` included); with 077 all stay private."""
    os.umask(0o022)
    modes = _modes(_build_and_append(tmp_path / "open"))
    assert {"manifest.json", "append_report.json", "index.sqlite", "shards"} <= set(modes)
    assert {modes[name] for name in modes if (tmp_path / "open" / "grown" / name).is_dir()} == {
        0o755
    }
    assert {modes[name] for name in modes if (tmp_path / "open" / "grown" / name).is_file()} == {
        0o644
    }
    os.umask(0o077)
    private = _modes(_build_and_append(tmp_path / "closed"))
    assert set(private.values()) <= {0o700, 0o600}


def test_canonical_files_and_query_outputs_follow_the_umask(umask: None, tmp_path: Path) -> None:
    """A canonical record file and a query's chat output are 0644 under umask 022 and 0600
    under 077, each alone in its folder once written (no temporary left beside it)."""
    coached_save(tmp_path / "saves" / "run-1")
    build_library([tmp_path / "saves"], tmp_path / "lib", "r1")
    for mask, mode in ((0o022, 0o644), (0o077, 0o600)):
        os.umask(mask)
        canonical = tmp_path / f"canonical-{mask:o}" / "records.jsonl"
        write_canonical([tmp_path / "saves"], canonical)
        chat = tmp_path / f"chat-{mask:o}" / "chat.jsonl"
        chat.parent.mkdir()
        with CanonicalDatasetAdapter(tmp_path / "lib") as lib:
            assert write_examples(lib, lib.select(), chat, "chat") > 0
        for written in (canonical, chat):
            assert [path.name for path in written.parent.iterdir()] == [written.name]
            assert stat.S_IMODE(written.stat().st_mode) == mode


def test_a_canonical_file_with_no_record_is_not_written(tmp_path: Path) -> None:
    """When no source gives a record, `canonical` refuses and leaves its folder empty."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "out").mkdir()
    with pytest.raises(LibraryError, match="no trajectory"):
        write_canonical([tmp_path / "empty"], tmp_path / "out" / "records.jsonl")
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account needs root")
def test_a_library_built_by_one_account_is_read_by_another(umask: None, published: Path) -> None:
    """A library appended by root with umask 022 is opened, its hashes verified, and every
    record read by `nobody`, in a child process that has given up root."""
    os.umask(0o022)
    library = _build_and_append(published)
    with CanonicalDatasetAdapter(library) as lib:  # the reads the child will make, as root
        expected = len([record.trajectory for record in lib.iter_records()])
    reader = pwd.getpwnam(READER)
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become `nobody`, read, report, exit without pytest's cleanup
        os.close(readable)
        message = b""
        try:
            os.setgroups([])
            os.setgid(reader.pw_gid)
            os.setuid(reader.pw_uid)
            with CanonicalDatasetAdapter(library) as lib:
                message = str(len([record.trajectory for record in lib.iter_records()])).encode()
        except BaseException as error:  # reported to the parent, whatever it is
            message = f"{type(error).__name__}: {error}".encode()
        finally:
            os.write(writable, message)
            os._exit(0)
    os.close(writable)
    with os.fdopen(readable, "rb") as pipe:
        answer = pipe.read().decode()
    os.waitpid(pid, 0)
    assert answer == str(expected)
