"""Finding the saves below a source folder, reading their configs, fingerprinting their files."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from gencoach.errors import SaveError
from gencoach.export.splits import Task
from gencoach.graph import CONFIG_FILE, find_folders, read_config
from gencoach.protocol import RunConfig

_SITUATION_FILE = re.compile(r"^(0|[1-9][0-9]*)\.json$")


@dataclass(frozen=True)
class Save:
    """A complete save: its folder, its name under the source, its task, its producer
    (agent id and version) and when its run started (seconds since the epoch, when the
    save records it: `producer.started_at`).

    The config itself is not kept, so what an export holds per save stays small.
    """

    folder: Path
    name: str
    task: Task
    agent_id: str = ""
    agent_version: str = ""
    started: float | None = None

    @property
    def producer(self) -> tuple[str, str]:
        """(agent id, agent version)."""
        return self.agent_id, self.agent_version


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


def folder_digest(folder: Path) -> str:
    """SHA-256 over `config.json` and every `<id>.json` of a folder, names and bytes (a
    symlink by its target, an unreadable file by the reason). Works on strings: pathlib
    costs more than the reads."""
    names = [CONFIG_FILE]
    base = os.fspath(folder)
    try:
        situations = os.listdir(base)
    except OSError:
        situations = []
    numbered = sorted(
        (int(match[1]), name) for name in situations if (match := _SITUATION_FILE.match(name))
    )
    names.extend(name for _, name in numbered)
    digest = sha256()
    for name in names:
        path = os.path.join(base, name)
        digest.update(name.encode() + b"\0")
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                digest.update(b"symlink\0" + os.readlink(path).encode())
                continue
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            digest.update(f"unreadable\0{error.strerror}".encode())
            continue
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def save_of(folder: Path, name: str, config: RunConfig) -> Save:
    """The save a config describes."""
    started = None if config.producer is None else config.producer.started_at
    return Save(folder, name, Task.of(config), config.agent_id, config.agent_version, started)


def discover(source: Path, exclude: Iterable[Path] = ()) -> Discovery:
    """Read the config of every save below `source`; skip the incomplete or broken ones."""
    found = Discovery()
    for folder in find_folders(source, exclude):
        name = folder.relative_to(source).as_posix()
        found.digests[name] = folder_digest(folder)
        try:
            config = read_config(folder)
        except SaveError as error:
            found.skipped.append(Skipped(name, one_line(str(error))))
            continue
        found.saves.append(save_of(folder, name, config))
    return found
