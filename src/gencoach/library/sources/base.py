"""What a source adapter is, and finding the sources below the paths a build is given.

A path is read by what it is (see `discover`): a source file by its suffix, a saved
dataset folder, or a save folder or a folder searched for saves (every folder holding a
`config.json`).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gencoach.export.sources import Skipped
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.graph import find_folders
from gencoach.library.manifest import feed


@dataclass(frozen=True)
class SourceContent:
    """A source once opened: its id and its canonical payloads, produced one at a time."""

    source_id: str
    payloads: Iterator[dict[str, Any]]


class SourceAdapter(ABC):
    """Reads one source into canonical payloads; raises `SourceError` when it cannot."""

    kind: ClassVar[str]

    def __init__(self, path: Path, location: str) -> None:
        self.path = path
        self.location = location
        self._revision: str | None = None

    @property
    def revision(self) -> str:
        """The immutable revision of the source: a SHA-256 of its bytes."""
        if self._revision is None:
            self._revision = self.digest()
        return self._revision

    @abstractmethod
    def digest(self) -> str:
        """Hash the source's files."""

    @abstractmethod
    def open(self) -> SourceContent:
        """Read the source; payloads may still raise `SourceError` while iterated."""


def files_digest(root: Path, files: Sequence[Path], location: str) -> str:
    """SHA-256 over files (names relative to `root`, and bytes), read in chunks."""
    from gencoach.library.errors import SourceError

    digest = hashlib.sha256()
    try:
        for path in files:
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            feed(digest, path)
    except OSError as error:
        raise SourceError(location, f"cannot be read: {error.strerror}") from None
    return digest.hexdigest()


class FileSource(SourceAdapter):
    """A source that is one file: its revision is the SHA-256 of its bytes."""

    def digest(self) -> str:
        """SHA-256 of the file's bytes."""
        return files_digest(self.path.parent, [self.path], self.location)

    def json_lines(self) -> Iterator[tuple[int, Any]]:
        """Each non-blank line of a JSONL file, decoded, with its number; a line that is
        not JSON, or a file that cannot be read, raises `SourceError` naming it."""
        from gencoach.library.errors import SourceError

        try:
            handle = self.path.open("rb")
        except OSError as error:
            raise SourceError(self.location, f"cannot be read: {error.strerror}") from None
        with handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw)
                except (ValueError, UnicodeDecodeError) as error:
                    raise SourceError(self.location, f"line {number}: {error}") from None
                yield number, value


@dataclass
class Found:
    """The sources found below the given paths, in a stable order, and the unusable paths."""

    sources: list[SourceAdapter] = field(default_factory=list)
    unusable: list[Skipped] = field(default_factory=list)


_FILE_KINDS = {
    ".jsonl": ("gencoach.library.sources.chat", "ChatFileSource"),
    ".traj": ("gencoach.library.sources.swe_agent", "SweAgentSource"),
    ".json": ("gencoach.library.sources.tau_bench", "TauBenchSource"),
    ".parquet": ("gencoach.library.sources.hf", "ParquetSource"),
}
_CANONICAL_FILE = ("gencoach.library.sources.canonical_file", "CanonicalFileSource")
_DATASET_MARKERS = ("state.json", "dataset_dict.json")


def _file_kind(path: Path) -> tuple[str, str]:
    """The adapter of a source file: by its suffix, and for `.jsonl` by its first line
    (canonical records, as `gencoach library canonical` writes them, or conversations)."""
    if path.suffix == ".jsonl":
        from gencoach.library.sources.canonical_file import is_canonical

        try:
            with path.open("rb") as handle:
                first = next((line for line in handle if line.strip()), b"")
            if is_canonical(json.loads(first)):
                return _CANONICAL_FILE
        except (OSError, ValueError):
            pass  # the conversation source reports what it cannot read
    return _FILE_KINDS[path.suffix]


def _adapter(module: str, name: str) -> type[SourceAdapter]:
    import importlib

    adapter: type[SourceAdapter] = getattr(importlib.import_module(module), name)
    return adapter


def discover(paths: Sequence[Path], failures: ToolFailures = NO_PREDICATES) -> Found:
    """Every source below `paths`, in the order given, saves of a folder sorted by path.

    A file is read by its suffix (`.jsonl` conversations or canonical records, `.traj`
    SWE-agent, `.json` τ-bench results, `.parquet` a dataset table); a folder holding
    `state.json` or `dataset_dict.json` is a dataset saved by Hugging Face `datasets`;
    any other folder is a save folder or a folder searched for saves, read with the
    tools' failure predicates `failures`."""
    from gencoach.library.sources.saves import SaveSource

    found = Found()
    for given in paths:
        if given.is_file() and given.suffix in _FILE_KINDS:
            found.sources.append(_adapter(*_file_kind(given))(given, given.name))
            continue
        if given.is_dir() and any((given / marker).is_file() for marker in _DATASET_MARKERS):
            found.sources.append(_adapter("gencoach.library.sources.hf", "SavedDatasetSource")(
                given, given.name))  # fmt: skip
            continue
        if not given.is_dir():
            kinds = ", ".join(sorted(_FILE_KINDS))
            reason = (
                f"is not a folder of saves or a source file ({kinds})"
                if given.exists()
                else "does not exist"
            )
            found.unusable.append(Skipped(str(given), reason))
            continue
        folders = find_folders(given)
        if not folders:
            found.unusable.append(Skipped(str(given), "holds no save (no config.json below it)"))
        for folder in folders:
            relative = folder.relative_to(given).as_posix()
            location = given.name if relative == "." else f"{given.name}/{relative}"
            found.sources.append(SaveSource(folder, location, failures))
    return found
