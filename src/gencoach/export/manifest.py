"""The export manifest: what was exported from what, with settings, and every file's hash.

`--skip-pre-made` trusts an earlier export only when its manifest is complete, its
signature (a hash over every source file's digest and the settings) is the one this
export would have, and every file it lists still has the SHA-256 it recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from hashlib import sha256
from pathlib import Path
from typing import Any, Final

from gencoach.__about__ import __version__
from gencoach.library.manifest import file_sha256

MANIFEST_FILE: Final = "export_manifest.json"
FAILURES_FILE: Final = "export_failures.json"


def producer() -> dict[str, str]:
    """The package that exports."""
    return {"package": "gencoach", "version": __version__}


def signature(sources: Mapping[str, str], settings: Mapping[str, Any]) -> str:
    """SHA-256 over the sources' digests (by name) and the settings, canonical JSON."""
    document = json.dumps(
        {"sources": dict(sources), "settings": dict(settings)},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return sha256(document.encode()).hexdigest()


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name


def completed_export(folder: Path, expected_signature: str) -> dict[str, Any] | None:
    """The manifest of a complete export with this signature and intact files, else None."""
    path = folder / MANIFEST_FILE
    try:
        if folder.is_symlink() or path.is_symlink() or not path.is_file():
            return None
        manifest = json.loads(path.read_bytes())
        if not isinstance(manifest, dict) or manifest.get("complete") is not True:
            return None
        if manifest.get("signature") != expected_signature:
            return None
        if manifest.get("producer") != producer():
            return None
        files = manifest.get("files")
        if not isinstance(files, dict) or not files:
            return None
        for name, digest in files.items():
            target = folder / name
            if not _plain_name(name) or target.is_symlink() or not target.is_file():
                return None
            if file_sha256(target) != digest:
                return None
    except (OSError, ValueError):
        return None
    return manifest
