"""Content overlays: canonical records, kept outside a library, for its metadata-only sources.

An overlay is a `.jsonl` file of canonical payloads (as `gencoach library canonical`
writes them) or a folder of such files. It is read, never copied or written: its lines
are scanned once for their ids, and only the ids the library indexes for the overlay's
source without a payload are used (canonical ids join the two).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from gencoach.library.errors import LibraryError

_ID_PREFIX = b'{"id":"'


@dataclass(frozen=True)
class OverlayEntry:
    """Where one canonical payload is in an overlay file."""

    file: Path
    offset: int
    length: int


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(found for found in path.rglob("*.jsonl") if found.is_file())
    raise LibraryError(path, "overlay does not exist (a .jsonl file or a folder of them)")


def _id_of(line: bytes, where: str) -> str:
    if line.startswith(_ID_PREFIX):
        end = line.find(b'"', len(_ID_PREFIX))
        if end > 0:
            return line[len(_ID_PREFIX) : end].decode()
    try:
        value = json.loads(line).get("id")
    except (ValueError, AttributeError):
        value = None
    if not isinstance(value, str):
        raise LibraryError(where, "is not a canonical record (no id)")
    return value


def scan_overlay(path: Path, wanted: set[str]) -> dict[str, OverlayEntry]:
    """The entries of `path` whose ids are in `wanted`."""
    found: dict[str, OverlayEntry] = {}
    for file in _files(path):
        offset = 0
        with file.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.rstrip(b"\n")
                if line.strip():
                    trajectory_id = _id_of(line, f"{file}:{number}")
                    if trajectory_id in wanted:
                        found[trajectory_id] = OverlayEntry(file, offset, len(line))
                offset += len(raw)
    return found


def read_entry(entry: OverlayEntry) -> bytes:
    """The payload bytes of one entry."""
    descriptor = os.open(entry.file, os.O_RDONLY)
    try:
        data = os.pread(descriptor, entry.length, entry.offset)
    finally:
        os.close(descriptor)
    if len(data) != entry.length:
        raise LibraryError(entry.file, "changed since it was opened as an overlay")
    return data
