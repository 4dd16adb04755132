"""Finding the saves below a source folder, reading their configs, fingerprinting their files."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from gencoach.errors import SaveError
from gencoach.export.splits import Task
from gencoach.graph import CONFIG_FILE, read_config
from gencoach.protocol import RunConfig

_SITUATION_FILE = re.compile(r"^(0|[1-9][0-9]*)\.json$")


@dataclass(frozen=True)
class Save:
    """A complete save the format accepts: its folder, its name under the source, its task.

    The config itself is not kept, so what an export holds per save stays small.
    """

    folder: Path
    name: str
    task: Task


@dataclass(frozen=True)
class Skipped:
    """A save that cannot be read, and why, in one line."""

    name: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """As the manifest lists it."""
        return {"source": self.name, "reason": self.reason}


@dataclass
class Discovery:
    """Every save found: usable, skipped or refused, and a digest of each folder's files."""

    saves: list[Save] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    refused: list[Skipped] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)


def one_line(text: str) -> str:
    """A message on a single line, whatever the reason it quotes."""
    return " ".join(text.split())


def find_folders(source: Path, exclude: Iterable[Path] = ()) -> list[Path]:
    """Every folder at or below `source` holding a `config.json`, never entering symlinks
    nor the `exclude` folders (where exports are written)."""
    excluded = {os.path.realpath(folder) for folder in exclude}
    excluded_names = {os.path.basename(folder) for folder in excluded}

    def wanted(root: str, name: str) -> bool:
        if name.startswith("."):
            return False
        # Resolving every folder is slow on large sources; only a name match can be it.
        return (
            name not in excluded_names or os.path.realpath(os.path.join(root, name)) not in excluded
        )

    found: list[Path] = []
    for root, dirs, files in os.walk(source, followlinks=False):
        dirs[:] = sorted(name for name in dirs if wanted(root, name))
        if CONFIG_FILE in files:
            found.append(Path(root))
    return sorted(found)


def folder_digest(folder: Path) -> str:
    """SHA-256 over `config.json` and every `<id>.json` of a folder, names and bytes."""
    names = [CONFIG_FILE]
    try:
        situations = [entry.name for entry in os.scandir(folder)]
    except OSError:
        situations = []
    numbered = sorted(
        (int(match[1]), name) for name in situations if (match := _SITUATION_FILE.match(name))
    )
    names.extend(name for _, name in numbered)
    digest = sha256()
    for name in names:
        path = folder / name
        digest.update(name.encode() + b"\0")
        try:
            if path.is_symlink():
                digest.update(b"symlink\0" + os.readlink(path).encode())
                continue
            data = path.read_bytes()
        except OSError as error:
            digest.update(f"unreadable\0{error.strerror}".encode())
            continue
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def _any_producer(config: RunConfig) -> str | None:
    return None


def discover(
    source: Path,
    exclude: Iterable[Path] = (),
    accepts: Callable[[RunConfig], str | None] = _any_producer,
) -> Discovery:
    """Read the config of every save below `source`: skip the incomplete or broken ones,
    refuse those whose producer `accepts` gives a reason against."""
    found = Discovery()
    for folder in find_folders(source, exclude):
        name = folder.relative_to(source).as_posix()
        found.digests[name] = folder_digest(folder)
        try:
            config = read_config(folder)
        except SaveError as error:
            found.skipped.append(Skipped(name, one_line(str(error))))
            continue
        refusal = accepts(config)
        if refusal is None:
            found.saves.append(Save(folder, name, Task.of(config)))
        else:
            found.refused.append(Skipped(name, one_line(refusal)))
    return found
