"""Reading a MAGMA-GEN 2.0 save, refusing what MAGMA-GEN's own reader refuses."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gencoach.errors import ContractError, SaveError
from gencoach.graph.writer import CONFIG_FILE
from gencoach.protocol import AgentInput, CandidateRecord, RunConfig, SituationRecord


@dataclass
class SavedGraph:
    """A complete save: its config and every situation reachable from its roots."""

    folder: Path
    config: RunConfig
    situations: dict[int, SituationRecord] = field(default_factory=dict)
    candidates: dict[int, CandidateRecord] = field(default_factory=dict)
    candidate_situation: dict[int, int] = field(default_factory=dict)

    def input_of(self, candidate_id: int) -> AgentInput:
        """The input the candidate answered."""
        return self.situations[self.candidate_situation[candidate_id]].input


def _read(folder: Path, name: str) -> bytes:
    """A file's bytes. `folder` is resolved and `name` a plain file name: only a
    symlink can lead out. Works on strings: pathlib costs more than the read."""
    location = os.path.join(folder, name)
    try:
        mode = os.lstat(location).st_mode
    except OSError:
        raise SaveError(folder / name, "is missing") from None
    if stat.S_ISLNK(mode):
        path = folder / name
        if path.resolve().parent != folder:
            raise SaveError(path, "resolves outside the save folder")
        raise SaveError(path, "is a symlink; saves must hold regular files only")
    if not stat.S_ISREG(mode):
        raise SaveError(folder / name, "is missing")
    try:
        with open(location, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise SaveError(folder / name, f"cannot be read: {error.strerror}") from None


def read_config(folder: Path) -> RunConfig:
    """The run config of a save folder, refusing an incomplete save."""
    folder = folder.resolve()
    path = folder / CONFIG_FILE
    try:
        config = RunConfig.parse_json(_read(folder, CONFIG_FILE))
    except ContractError as error:
        raise SaveError(path, str(error)) from None
    if not config.export_complete:
        raise SaveError(
            path,
            "incomplete save (export_complete is false): still being written, or interrupted",
        )
    if len(set(config.roots)) != len(config.roots) or any(root < 0 for root in config.roots):
        raise SaveError(path, f"roots must be distinct non-negative ids, got {config.roots}")
    return config


def read_save(folder: Path) -> SavedGraph:
    """Load a save folder, checking every link from the roots down."""
    folder = folder.resolve()
    graph = SavedGraph(folder=folder, config=read_config(folder))
    pending: list[tuple[int, int | None]] = [(root, None) for root in graph.config.roots]
    while pending:
        situation_id, parent_id = pending.pop()
        if situation_id in graph.situations:
            raise SaveError(
                folder, f"situation {situation_id} is reached twice (a cycle or a shared child)"
            )
        name = f"{situation_id}.json"
        try:
            record = SituationRecord.parse_json(_read(folder, name))
        except ContractError as error:
            raise SaveError(folder / name, str(error)) from None
        if record.id != situation_id:
            raise SaveError(folder / name, f"holds situation {record.id}, not {situation_id}")
        if record.parent_id != parent_id:
            raise SaveError(
                folder / name,
                f"parent_id is {record.parent_id} but candidate {parent_id} links to it",
            )
        graph.situations[situation_id] = record
        for candidate in record.candidates:
            if candidate.id in graph.candidates:
                raise SaveError(folder / name, f"candidate id {candidate.id} is used twice")
            graph.candidates[candidate.id] = candidate
            graph.candidate_situation[candidate.id] = situation_id
            pending.extend((link.situation_id, candidate.id) for link in candidate.links)
    return graph


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
