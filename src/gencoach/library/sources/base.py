"""What a source adapter is, and finding the sources below the paths a build is given.

A path is a chat JSONL file when it names a `.jsonl` file, and otherwise a save folder
or a folder searched for saves (every folder holding a `config.json`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gencoach.export.sources import find_folders


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


@dataclass(frozen=True)
class Unusable:
    """A path given to the build that holds no source, and why."""

    location: str
    reason: str


@dataclass
class Found:
    """The sources found below the given paths, in a stable order, and the unusable paths."""

    sources: list[SourceAdapter] = field(default_factory=list)
    unusable: list[Unusable] = field(default_factory=list)


def discover(paths: Sequence[Path]) -> Found:
    """Every source below `paths`, in the order given, saves of a folder sorted by path."""
    from gencoach.library.sources.chat import ChatFileSource
    from gencoach.library.sources.saves import SaveSource

    found = Found()
    for given in paths:
        if given.is_file() and given.suffix == ".jsonl":
            found.sources.append(ChatFileSource(given, given.name))
            continue
        if not given.is_dir():
            reason = (
                "is not a folder of saves or a .jsonl chat file"
                if given.exists()
                else ("does not exist")
            )
            found.unusable.append(Unusable(str(given), reason))
            continue
        folders = find_folders(given)
        if not folders:
            found.unusable.append(Unusable(str(given), "holds no save (no config.json below it)"))
        for folder in folders:
            relative = folder.relative_to(given).as_posix()
            location = given.name if relative == "." else f"{given.name}/{relative}"
            found.sources.append(SaveSource(folder, location))
    return found
