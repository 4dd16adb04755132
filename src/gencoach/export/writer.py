"""Dataset files: rows streamed to a spool per channel, then the full, train and validation files.

`DatasetWriter` writes an export's files. `encode_row`, `encode_document` and
`PartialFile` are how gencoach writes every data file, here and in the library (shards,
canonical record files, query outputs, manifests and reports).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from hashlib import sha256
from pathlib import Path
from typing import IO, Any

from pydantic_core import to_json

from gencoach.errors import ExportError
from gencoach.export.manifest import FAILURES_FILE, MANIFEST_FILE
from gencoach.export.splits import Partition, SplitKey

_RESERVED = (MANIFEST_FILE, FAILURES_FILE)
Rewrite = Callable[[bytes], bytes]
"""A change to every written line (one encoded row), decided once all rows are made."""
_SPLITS = ("train", "validation")


def encode_row(row: Mapping[str, Any]) -> bytes:
    """A row as one line of compact UTF-8 JSON (newlines inside strings are escaped).

    pydantic-core's encoder writes what `json.dumps(row, ensure_ascii=False,
    separators=(",", ":"))` writes (save for exponents: `1e-7`, not `1e-07`) in about a
    third of its time; encoding rows is a large part of an export."""
    return to_json(row) + b"\n"


def encode_document(value: object) -> bytes:
    """A small JSON document (a manifest, a report) as people read it: UTF-8, indented."""
    return json.dumps(value, ensure_ascii=False, indent=2).encode() + b"\n"


def split_name(file_name: str, split: str) -> str:
    """`chat.jsonl` → `chat_train.jsonl`."""
    stem, dot, suffix = file_name.rpartition(".")
    return f"{stem}_{split}{dot}{suffix}"


def refuse_symlink(path: Path) -> None:
    """Refuse to write where a symlink stands."""
    if path.is_symlink():
        raise ExportError(f"refusing to write through a symlink: {path}")


def _file_mode() -> int:
    # mkstemp creates 0600 files; datasets are shared like any file the user creates.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


class PartialFile:
    """A file written under a temporary name beside `final`, with the mode the umask gives
    a new file (not mkstemp's private one), hashed as it goes; `commit` moves it into
    place in one step, `discard` removes it."""

    def __init__(self, final: Path) -> None:
        self.final = final
        descriptor, temporary = tempfile.mkstemp(prefix=f".{final.name}.", dir=final.parent)
        os.fchmod(descriptor, _file_mode())
        self.temporary = Path(temporary)
        self.handle: IO[bytes] = os.fdopen(descriptor, "wb", buffering=1 << 20)
        self.digest = sha256()

    def write(self, data: bytes) -> None:
        """Append bytes."""
        self.handle.write(data)
        self.digest.update(data)

    def commit(self) -> None:
        """Close the file and move it into place."""
        self.handle.close()
        os.replace(self.temporary, self.final)

    def discard(self) -> None:
        """Close the file and remove it."""
        self.handle.close()
        self.temporary.unlink(missing_ok=True)


@contextmanager
def partial_file(final: Path) -> Iterator[PartialFile]:
    """A `PartialFile` that becomes `final` when the block succeeds, and is removed when
    it fails."""
    output = PartialFile(final)
    try:
        yield output
        output.commit()
    except BaseException:
        output.discard()
        raise


class DatasetWriter:
    """The rows of an export's channels, on their way to the destination folder.

    Rows go to disk as they come, one JSON document per line, so memory does not grow
    with the source. Which task a row belongs to is kept as runs of (task, count); once
    the partition is known, one pass over each spool writes the three files. Every file
    is written under a temporary name in the destination and moved into place at the
    end, never through a symlink.
    """

    def __init__(self, folder: Path, files: Mapping[str, str]) -> None:
        refuse_symlink(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.files = dict(files)
        names: set[str] = set()
        for channel, name in self.files.items():
            valid = Path(name).name == name and name.endswith((".json", ".jsonl"))
            if not valid or name in _RESERVED or name in names:
                raise ExportError(f"channel {channel!r} has an invalid file name {name!r}")
            names.add(name)
        for name in [*_RESERVED, *names, *(split_name(n, s) for n in names for s in _SPLITS)]:
            refuse_symlink(folder / name)
        self.counts = dict.fromkeys(self.files, 0)
        self._runs: dict[str, list[tuple[SplitKey, int]]] = {channel: [] for channel in self.files}
        self._spools = {
            channel: PartialFile(folder / f"{name}.spool") for channel, name in self.files.items()
        }
        self._staged: list[PartialFile] = []

    def add(self, channel: str, task: SplitKey, row: Mapping[str, Any]) -> None:
        """Append a row of `task` to a channel."""
        spool = self._spools.get(channel)
        if spool is None:
            raise ExportError(f"the format wrote to an unknown channel {channel!r}")
        spool.handle.write(encode_row(row))
        self.counts[channel] += 1
        runs = self._runs[channel]
        if runs and runs[-1][0] == task:
            runs[-1] = (task, runs[-1][1] + 1)
        else:
            runs.append((task, 1))

    def tasks(self) -> set[SplitKey]:
        """The tasks that have at least one row in some channel."""
        return {task for runs in self._runs.values() for task, _ in runs}

    def stage(self, partition: Partition, rewrite: Rewrite | None = None) -> None:
        """Write each channel's full, train and validation files under temporary names,
        each row passed through `rewrite` when given."""
        validation = set(partition.validation)
        for channel, name in self.files.items():
            spool = self._spools[channel]
            spool.handle.close()
            outputs = {
                key: PartialFile(self.folder / file_name)
                for key, file_name in (
                    ("full", name),
                    ("train", split_name(name, "train")),
                    ("validation", split_name(name, "validation")),
                )
            }
            self._staged.extend(outputs.values())
            array = name.endswith(".json")
            first = dict.fromkeys(outputs, True)
            with spool.temporary.open("rb") as lines:
                for task, count in self._runs[channel]:
                    split = "validation" if task in validation else "train"
                    for _ in range(count):
                        line = lines.readline()
                        if rewrite is not None:
                            line = rewrite(line)
                        for key in ("full", split):
                            _append(outputs[key], line, array, first[key])
                            first[key] = False
            spool.discard()
            del self._spools[channel]
            for key, output in outputs.items():
                if array:
                    output.write(b"[]\n" if first[key] else b"\n]\n")
                output.handle.close()

    def stage_document(self, name: str, value: object) -> None:
        """Stage a small JSON document (failures, manifest), indented for people."""
        output = PartialFile(self.folder / name)
        output.write(encode_document(value))
        output.handle.close()
        self._staged.append(output)

    def hashes(self) -> dict[str, str]:
        """The SHA-256 of every staged file, by final name."""
        return {output.final.name: output.digest.hexdigest() for output in self._staged}

    def commit(self) -> None:
        """Move every staged file into place; the manifest, staged last, lands last."""
        for output in self._staged:
            refuse_symlink(output.final)
        manifest = self.folder / MANIFEST_FILE
        if manifest.exists() and not manifest.is_symlink():
            manifest.unlink()  # no stale "complete" manifest while files are replaced
        for output in self._staged:
            output.commit()
        self._staged.clear()

    def abort(self) -> None:
        """Remove every temporary file; the destination keeps what it had."""
        for output in [*self._spools.values(), *self._staged]:
            output.discard()
        self._spools.clear()
        self._staged.clear()


def _append(output: PartialFile, line: bytes, array: bool, first: bool) -> None:
    if not array:
        output.write(line)
        return
    body = line.rstrip(b"\n")
    output.write((b"[\n" if first else b",\n") + body)
