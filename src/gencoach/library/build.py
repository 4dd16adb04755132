"""`build` and `append`: sources in, a complete library out (or nothing at all).

`append` copies the base index, links (or copies) the base shards byte for byte, reads
only the new sources, and recomputes ranks only for the tasks they touched; it writes
`append_report.json` with the base manifest's hash, what was accepted, what duplicated
records already there, and the affected tasks.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gencoach.export.sources import Skipped
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.export.writer import encode_row, partial_file
from gencoach.library.errors import LibraryError, SourceError
from gencoach.library.layout import APPEND_REPORT_FILE, INDEX_FILE
from gencoach.library.manifest import read_manifest, verify_files
from gencoach.library.permissions import apply_permissions, read_permissions
from gencoach.library.ranking import DEFAULT_SPLIT_RATIOS, check_ratios, rerank
from gencoach.library.sources.base import SourceAdapter, discover
from gencoach.library.writer import (
    DEFAULT_SHARD_RECORDS,
    LibraryWriter,
    count_shared,
    counts,
    open_index,
    shard_entry,
    staging,
    write_document,
    write_manifest,
)

Track = Callable[[Sequence[SourceAdapter], int], Iterable[SourceAdapter]]
"""Takes the sources and how many they are (a progress bar, as an export's over saves)."""


def _no_track(sources: Sequence[SourceAdapter], total: int) -> Iterable[SourceAdapter]:
    return sources


def _quiet(message: str) -> None:
    """Drop a message."""


@dataclass
class BuildResult:
    """What a build or append did."""

    output: Path
    release: str
    sources_read: int = 0
    accepted: int = 0
    duplicates: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    affected_tasks: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def skip(self, skipped: Skipped, say: Callable[[str], None]) -> None:
        """Record a path or source that gave nothing, and say so."""
        self.skipped.append(skipped)
        say(f"skipped {skipped.name}: {skipped.reason}")


def _feed(
    writer: LibraryWriter,
    sources: Sequence[SourceAdapter],
    result: BuildResult,
    track: Track,
    say: Callable[[str], None],
    unhosted: frozenset[int] = frozenset(),
) -> None:
    for number, source in enumerate(track(sources, len(sources))):
        try:
            if writer.known(source.revision):
                result.already_present.append(source.location)
                say(f"{source.location}: already in the library (same revision), not read again")
                continue
            tally = writer.add(source, hosted=number not in unhosted)
        except SourceError as error:
            result.skip(Skipped(source.location, error.reason), say)
            continue
        result.sources_read += 1
        result.accepted += tally.accepted
        result.duplicates += tally.duplicates
    writer.close()


def build_library(
    paths: Sequence[Path],
    output: Path,
    release: str,
    *,
    split_seed: int = 0,
    split_ratios: Mapping[str, float] = DEFAULT_SPLIT_RATIOS,
    shard_records: int = DEFAULT_SHARD_RECORDS,
    metadata_only: Sequence[Path] = (),
    permissions: Path | None = None,
    failures: ToolFailures = NO_PREDICATES,
    track: Track = _no_track,
    say: Callable[[str], None] = _quiet,
) -> BuildResult:
    """Read every source below `paths` into a new library at `output`.

    Sources below `metadata_only` are indexed without their payloads (a federated
    release: an overlay supplies them to a reader); `permissions` is an audit file;
    `failures` are the tools' own failure predicates, read by the save source (a
    decision whose every call one recognises is not trainable)."""
    ratios = check_ratios(split_ratios)
    audits = read_permissions(permissions) if permissions is not None else {}
    found, federated = discover(paths, failures), discover(metadata_only, failures)
    unhosted = frozenset(range(len(found.sources), len(found.sources) + len(federated.sources)))
    found.sources += federated.sources
    found.unusable += federated.unusable
    result = BuildResult(output, release)
    for skipped in found.unusable:
        result.skip(skipped, say)
    with staging(output) as folder:
        db = open_index(folder / INDEX_FILE, create=True)
        try:
            writer = LibraryWriter(folder, db, release, shard_records=shard_records)
            _feed(writer, found.sources, result, track, say, unhosted)
            if result.accepted == 0:
                raise LibraryError(output, "no trajectory could be read from the given sources")
            apply_permissions(db, audits)
            rerank(db, sorted(writer.affected), split_seed, ratios)
            count_shared(db)
            result.counts = counts(db)
        finally:
            db.close()
        result.affected_tasks = sorted(writer.affected)
        write_manifest(
            folder,
            release=release,
            releases=[release],
            split={"seed": split_seed, "ratios": ratios},
            shards=[shard_entry(folder, name, records) for name, records in writer.written],
            library_counts=result.counts,
            base=None,
        )
    return result


def _link(source: Path, destination: Path) -> None:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copyfile(source, destination)


def append_library(
    base: Path,
    paths: Sequence[Path],
    output: Path,
    release: str,
    *,
    shard_records: int = DEFAULT_SHARD_RECORDS,
    permissions: Path | None = None,
    failures: ToolFailures = NO_PREDICATES,
    track: Track = _no_track,
    say: Callable[[str], None] = _quiet,
) -> BuildResult:
    """A new library at `output`: the base library plus what the new sources add (an
    audit in `permissions` replaces the base's for the sources it matches; `failures`
    apply to the new sources only, as in `build_library`)."""
    audits = read_permissions(permissions) if permissions is not None else {}
    manifest = read_manifest(base)
    verify_files(base, manifest)
    releases = [str(name) for name in manifest.data.get("releases", [manifest.release])]
    if release in releases:
        raise LibraryError(output, f"release {release!r} is already in the base library")
    split = manifest.data["split"]
    found = discover(paths, failures)
    result = BuildResult(output, release)
    for skipped in found.unusable:
        result.skip(skipped, say)
    with staging(output) as folder:
        shutil.copyfile(base / INDEX_FILE, folder / INDEX_FILE)
        for shard in manifest.shards:
            _link(base / shard.file, folder / shard.file)
        db = open_index(folder / INDEX_FILE, create=False)
        try:
            writer = LibraryWriter(
                folder, db, release, first_shard=len(manifest.shards), shard_records=shard_records
            )
            _feed(writer, found.sources, result, track, say)
            apply_permissions(db, audits)
            rerank(db, sorted(writer.affected), int(split["seed"]), check_ratios(split["ratios"]))
            count_shared(db)
            result.counts = counts(db)
        finally:
            db.close()
        result.affected_tasks = sorted(writer.affected)
        shards: list[dict[str, Any]] = [dict(entry) for entry in manifest.data["shards"]]
        shards += [shard_entry(folder, name, records) for name, records in writer.written]
        write_document(
            folder / APPEND_REPORT_FILE,
            {
                "base": {
                    "release": manifest.release,
                    "manifest_sha256": manifest.sha256,
                    # Carried over as they were: no base record is read, scored or
                    # rewritten; ranks change only for the affected tasks.
                    "scores_reprocessed": False,
                    "shards_reprocessed": False,
                    "shards": len(manifest.data["shards"]),
                },
                "release": release,
                "sources_read": result.sources_read,
                "accepted": result.accepted,
                "duplicates": result.duplicates,
                "already_present": result.already_present,
                "skipped": [skipped.to_json() for skipped in result.skipped],
                "affected_tasks": result.affected_tasks,
            },
        )
        write_manifest(
            folder,
            release=release,
            releases=[*releases, release],
            split=split,
            shards=shards,
            library_counts=result.counts,
            base={"release": manifest.release, "manifest_sha256": manifest.sha256},
        )
    return result


def write_canonical(
    paths: Sequence[Path],
    output: Path,
    *,
    failures: ToolFailures = NO_PREDICATES,
    say: Callable[[str], None] = _quiet,
) -> BuildResult:
    """Write the canonical records of every source below `paths` to a `.jsonl` file (an
    overlay), or nothing when no source could be read; `failures` as in `build_library`
    (the same predicates give the same records, so the overlay joins the index)."""
    if output.exists():
        raise LibraryError(output, "already exists; it is never overwritten")
    found = discover(paths, failures)
    result = BuildResult(output, "")
    for skipped in found.unusable:
        result.skip(skipped, say)
    output.parent.mkdir(parents=True, exist_ok=True)
    with partial_file(output) as partial:
        for source in found.sources:
            try:
                lines = [encode_row(payload) for payload in source.open().payloads]
            except SourceError as error:
                result.skip(Skipped(source.location, error.reason), say)
                continue
            partial.write(b"".join(lines))
            result.sources_read += 1
            result.accepted += len(lines)
        if result.accepted == 0:
            raise LibraryError(output, "no trajectory could be read from the given sources")
    return result
