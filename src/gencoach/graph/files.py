"""Atomic file writes that never follow a symlink."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from gencoach.errors import SaveError


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step: readers see the old file or the new one."""
    if path.is_symlink():
        raise SaveError(path, "refusing to write through a symlink")
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, value: object) -> None:
    """Write a JSON document atomically, UTF-8, indented for people."""
    write_atomic(path, json.dumps(value, ensure_ascii=False, indent=2).encode())
