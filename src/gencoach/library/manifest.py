"""`manifest.json`: reading and validating it, and checking the files it lists.

`file_sha256` is the one file hasher of gencoach's manifests: the export's and the
library's. It lives here because the consumer side (which verifies a library's files)
may import nothing of the export.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gencoach.library.errors import LibraryError
from gencoach.library.layout import FORMAT_NAME, FORMAT_VERSION, INDEX_FILE, MANIFEST_FILE

_CHUNK = 1 << 20


class Digest(Protocol):
    """What `feed` updates: a `hashlib` hash."""

    def update(self, data: bytes, /) -> None:
        """Add bytes to the hash."""


def feed(digest: Digest, path: Path) -> None:
    """Add a file's bytes to `digest`, read in chunks."""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    feed(digest, path)
    return digest.hexdigest()


@dataclass(frozen=True)
class ShardEntry:
    """One shard as the manifest lists it."""

    file: str
    sha256: str
    bytes: int
    records: int


@dataclass(frozen=True)
class Manifest:
    """A validated manifest: versions, release, split settings, and the files' hashes."""

    data: dict[str, Any]
    sha256: str

    @property
    def release(self) -> str:
        """The release name given at build or append."""
        return str(self.data["release"])

    @property
    def shards(self) -> list[ShardEntry]:
        """The shards, in order."""
        return [ShardEntry(**entry) for entry in self.data["shards"]]

    @property
    def counts(self) -> dict[str, int]:
        """Trajectories, tasks, sources and duplicates at build time."""
        return dict(self.data["counts"])


def _require(path: Path, data: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise LibraryError(path, f"manifest field {key!r} is missing or not valid: {value!r}")
    return value


def read_manifest(folder: Path) -> Manifest:
    """Load `manifest.json` and check its format name, version and structure."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        raise LibraryError(
            folder, "is not a complete library (no manifest.json: not built, or interrupted)"
        )
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise LibraryError(path, f"is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise LibraryError(path, "must hold a JSON object")
    if data.get("format") != FORMAT_NAME:
        raise LibraryError(path, f"format is {data.get('format')!r}, not {FORMAT_NAME!r}")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise LibraryError(
            path, f"format_version {version!r} cannot be read; this reader reads {FORMAT_VERSION}"
        )
    _require(path, data, "release", str)
    _require(path, data, "counts", dict)
    index = _require(path, data, "index", dict)
    if index.get("file") != INDEX_FILE or not isinstance(index.get("sha256"), str):
        raise LibraryError(path, f"index entry is not valid: {index!r}")
    for number, entry in enumerate(_require(path, data, "shards", list)):
        if not isinstance(entry, dict) or set(entry) != {"file", "sha256", "bytes", "records"}:
            raise LibraryError(path, f"shard entry {number} is not valid: {entry!r}")
    return Manifest(data, hashlib.sha256(raw).hexdigest())


def _inside(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.resolve().is_relative_to(folder.resolve()):
        raise LibraryError(path, "resolves outside the library folder")
    return path


def verify_files(folder: Path, manifest: Manifest, *, hashes: bool = True) -> None:
    """Check the index and every shard exist with the listed size and SHA-256."""
    index = _inside(folder, INDEX_FILE)
    if not index.is_file():
        raise LibraryError(index, "is missing")
    if hashes and file_sha256(index) != manifest.data["index"]["sha256"]:
        raise LibraryError(index, "does not match the SHA-256 in manifest.json (changed or broken)")
    for shard in manifest.shards:
        path = _inside(folder, shard.file)
        if not path.is_file():
            raise LibraryError(path, "is missing")
        if path.stat().st_size != shard.bytes:
            raise LibraryError(
                path, f"holds {path.stat().st_size} bytes; manifest.json lists {shard.bytes}"
            )
        if hashes and file_sha256(path) != shard.sha256:
            raise LibraryError(path, "does not match the SHA-256 in manifest.json")
