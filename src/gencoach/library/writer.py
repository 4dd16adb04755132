"""Writing a library: a hidden staging folder, shards, index rows, then the manifest last.

A library is built in `.<name>.partial-*` beside its destination and renamed into place
only once `manifest.json` is written, so an interrupted build leaves no folder that
looks like a library. One source is one transaction: if it fails half-way, its index
rows are rolled back and its shard bytes truncated away.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gencoach.export.manifest import producer
from gencoach.export.writer import encode_document, encode_row
from gencoach.library.errors import LibraryError, SourceError
from gencoach.library.layout import (
    API_VERSION,
    FORMAT_NAME,
    FORMAT_VERSION,
    INDEX_FILE,
    MANIFEST_FILE,
    SCHEMA,
    SHARDS_DIR,
    shard_name,
)
from gencoach.library.manifest import file_sha256
from gencoach.library.prefixes import PrefixEncoder
from gencoach.library.records import TIER_ORDER, EventKind, Outcome
from gencoach.library.sources.base import SourceAdapter
from gencoach.library.sources.canonical import contributor_id

DEFAULT_SHARD_RECORDS = 20_000
WINDOW = 64
"""Payloads of a source stored together, longest first (see `gencoach.library.prefixes`)."""


@contextmanager
def staging(output: Path) -> Iterator[Path]:
    """A hidden folder beside `output`, renamed to it only when the block succeeds.

    The folder and every file in it are created with the default modes the umask leaves
    (a library is published to be read by other accounts, such as a training job's),
    never the private ones temporary files get."""
    if output.exists():
        raise LibraryError(output, "already exists; a library is never overwritten")
    output.parent.mkdir(parents=True, exist_ok=True)
    while True:
        folder = output.parent / f".{output.name}.partial-{secrets.token_hex(6)}"
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    try:
        (folder / SHARDS_DIR).mkdir()
        yield folder
        os.rename(folder, output)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def write_document(path: Path, value: object) -> None:
    """Write a JSON document (UTF-8, indented for people) into a staging folder, as a new
    file with the umask's default mode."""
    with path.open("xb") as handle:
        handle.write(encode_document(value))


def open_index(path: Path, *, create: bool) -> sqlite3.Connection:
    """The index being written: autocommit off by hand, no journal (staging is disposable)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    if create:
        db.executescript(SCHEMA)
    return db


@dataclass
class SourceTally:
    """What one source added."""

    trajectories: int = 0
    accepted: int = 0
    duplicates: int = 0
    tasks: set[str] = field(default_factory=set)


def _stages_passed(events: list[dict[str, Any]]) -> int:
    return sum(
        1
        for event in events
        if event["kind"] == EventKind.STAGE_END and event["result"] == "success"
    )


def _row(
    payload: dict[str, Any], locator: str, contributor: str, where: tuple[str, int, int]
) -> tuple[Any, ...]:
    decisions = [event for event in payload["events"] if event["kind"] == EventKind.DECISION]
    agent = payload["agent"]
    verification = payload["verification"]
    return (
        payload["id"], payload["task_key"], payload["environment_key"], payload["benchmark"],
        payload["task"]["scenario"], payload["task"]["target"],
        payload["source_id"], payload["source_revision"], payload["source_split"], locator,
        contributor, agent.get("model", "unknown"), f"{agent['id']}@{agent['version']}",
        payload["provenance"], payload["outcome"], payload["quality_tier"],
        TIER_ORDER[payload["quality_tier"]], payload["reward"], _stages_passed(payload["events"]),
        len(decisions), sum(1 for event in decisions if event["trainable"]), len(payload["events"]),
        int(payload["eligibility"]["structural"]), int(payload["eligibility"]["training"]),
        verification["method"], verification["strength"],
        int(verification["independently_replayed"]), "\x1f".join(payload["curated_selections"]),
        *where,
    )  # fmt: skip


class LibraryWriter:
    """Appends sources to the shards and index of a staging folder."""

    def __init__(
        self,
        folder: Path,
        db: sqlite3.Connection,
        release: str,
        first_shard: int = 0,
        shard_records: int = DEFAULT_SHARD_RECORDS,
    ) -> None:
        self.folder = folder
        self.db = db
        self.release = release
        self.shard_records = shard_records
        self.written: list[tuple[str, int]] = []
        self.affected: set[str] = set()
        self._number = first_shard
        self._handle: IO[bytes] | None = None
        self._records = 0

    def known(self, revision: str) -> bool:
        """Whether a source with this revision is already in the library."""
        found = self.db.execute("SELECT 1 FROM sources WHERE source_revision = ?", (revision,))
        return found.fetchone() is not None

    def _shard(self) -> IO[bytes]:
        if self._handle is None:
            self._handle = (self.folder / shard_name(self._number)).open("ab")
            self._records = 0
        return self._handle

    def _rotate(self) -> None:
        if self._handle is not None and self._records >= self.shard_records:
            self.close()

    def close(self) -> None:
        """Close the current shard, recording it."""
        if self._handle is not None:
            self._handle.close()
            if self._records:
                self.written.append((shard_name(self._number), self._records))
            else:
                (self.folder / shard_name(self._number)).unlink()
            self._number += 1
            self._handle = None

    def add(self, source: SourceAdapter, *, hosted: bool = True) -> SourceTally:
        """Add every trajectory of a source, or none of them (then raise `SourceError`).

        A source added with `hosted=False` is indexed metadata-only: its rows are written,
        its payloads are not (an overlay supplies them to a reader)."""
        handle = self._shard()
        start, records = handle.tell(), self._records
        self.db.execute("BEGIN")
        try:
            tally = self._add(source, handle if hosted else None)
        except BaseException as error:
            self.db.execute("ROLLBACK")
            handle.truncate(start)
            handle.seek(start)
            self._records = records
            if isinstance(error, OSError):
                raise SourceError(source.location, f"cannot be read: {error}") from None
            raise
        self.db.execute("COMMIT")
        self.affected |= tally.tasks
        self._rotate()
        return tally

    def _add(self, source: SourceAdapter, handle: IO[bytes] | None) -> SourceTally:
        content = source.open()
        tally = SourceTally()
        prefixes = PrefixEncoder()
        window: list[dict[str, Any]] = []
        for payload in content.payloads:
            tally.trajectories += 1
            window.append(payload)
            if len(window) == WINDOW:
                self._put(window, handle, prefixes, tally)
                window = []
        self._put(window, handle, prefixes, tally)
        self.db.execute(
            "INSERT OR REPLACE INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (content.source_id, source.revision, source.kind, source.location, self.release,
             "hosted" if handle is not None else "metadata_only", tally.trajectories,
             tally.accepted, tally.duplicates),
        )  # fmt: skip
        return tally

    def _put(
        self,
        window: list[dict[str, Any]],
        handle: IO[bytes] | None,
        prefixes: PrefixEncoder,
        tally: SourceTally,
    ) -> None:
        """Store a window of a source's payloads, longest first, so that the longest
        paths become the anchors the shorter ones share their prefixes with."""
        shard = shard_name(self._number)
        for payload in sorted(window, key=lambda item: -len(item["events"])):
            locator = json.dumps(payload["locator"], sort_keys=True, ensure_ascii=False)
            contributor = contributor_id(payload["source_id"], locator)
            self.db.execute(
                "INSERT OR IGNORE INTO contributors VALUES (?, ?, ?, ?, ?)",
                (payload["id"], contributor, payload["source_id"], payload["source_revision"],
                 locator),
            )  # fmt: skip
            held = self.db.execute(
                "SELECT shard FROM trajectories WHERE id = ?", (payload["id"],)
            ).fetchone()
            where = ("", 0, 0)
            if handle is not None and (held is None or not held[0]):
                stored, events = prefixes.encode(payload)
                line = encode_row(stored)  # its id first, as `finish` ordered it
                where = (shard, handle.tell(), len(line) - 1)
                handle.write(line)
                self._records += 1
                if stored is payload:
                    prefixes.anchored(payload, events, where[1:])
            if held is not None:
                if where[0]:  # a hosted copy of a record indexed metadata-only
                    self.db.execute(
                        "UPDATE trajectories SET shard = ?, offset = ?, length = ? WHERE id = ?",
                        (*where, payload["id"]),
                    )
                tally.duplicates += 1
                continue
            self.db.execute(
                f"INSERT INTO trajectories VALUES ({', '.join('?' * 31)})",  # noqa: S608
                _row(payload, locator, contributor, where),
            )
            self.db.executemany(
                "INSERT OR IGNORE INTO routes VALUES (?, ?)",
                ((payload["id"], route) for route in payload["coaching"]["routes"]),
            )
            self.db.executemany(
                "INSERT OR IGNORE INTO selections VALUES (?, ?)",
                ((payload["id"], name) for name in payload["curated_selections"]),
            )
            tally.accepted += 1
            tally.tasks.add(payload["task_key"])


def count_shared(db: sqlite3.Connection) -> None:
    """Record which trajectories several sources produced, and how many."""
    db.execute("DELETE FROM shared")
    db.execute(
        "INSERT INTO shared SELECT trajectory_id, count(*) FROM contributors "
        "GROUP BY trajectory_id HAVING count(*) > 1"
    )


def counts(db: sqlite3.Connection) -> dict[str, int]:
    """What the library holds, as the manifest records it."""

    def one(sql: str) -> int:
        return int(db.execute(sql).fetchone()[0])

    trajectories = one("SELECT count(*) FROM trajectories")
    contributions = one("SELECT count(*) FROM contributors")
    return {
        "trajectories": trajectories,
        "tasks": one("SELECT count(DISTINCT task_key) FROM trajectories"),
        "sources": one("SELECT count(*) FROM sources"),
        "successful": one(
            f"SELECT count(*) FROM trajectories WHERE outcome = '{Outcome.SUCCESS.value}'"  # noqa: S608
        ),
        "contributions": contributions,
        "duplicates": contributions - trajectories,
    }


def write_manifest(
    folder: Path,
    *,
    release: str,
    releases: list[str],
    split: dict[str, Any],
    shards: list[dict[str, Any]],
    library_counts: dict[str, int],
    base: dict[str, str] | None,
) -> dict[str, Any]:
    """Hash the index and write `manifest.json`: the step that makes the library complete."""
    index = folder / INDEX_FILE
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "api_version": API_VERSION,
        "producer": producer(),
        "release": release,
        "releases": releases,
        "base": base,
        "split": split,
        "counts": library_counts,
        "index": {"file": INDEX_FILE, "sha256": file_sha256(index), "bytes": index.stat().st_size},
        "shards": shards,
    }
    write_document(folder / MANIFEST_FILE, manifest)
    return manifest


def shard_entry(folder: Path, name: str, records: int) -> dict[str, Any]:
    """A new shard as the manifest lists it."""
    path = folder / name
    return {"file": name, "sha256": file_sha256(path), "bytes": path.stat().st_size,
            "records": records}  # fmt: skip
