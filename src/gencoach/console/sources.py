"""Where the console reads a run's graph: live from Redis, or from save folders on disk.

Both give the same `GraphData` (the save format's records), so one set of graph pages
serves a running controller and `gencoach console --saves DIR` alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio

from gencoach.console.runlist import live_page, page_payload, task_text
from gencoach.errors import SaveError
from gencoach.graph import CONFIG_FILE, find_folders, read_config, read_save
from gencoach.protocol import RunConfig, SituationRecord, StageEnd
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.saving.persist import build_config, build_records
from gencoach.service.store.graphstore import MARKERS, META, SEQS, SOURCES, GraphStore
from gencoach.service.store.runindex import RUN_STATES, CursorError, RunPage, RunQuery

# Graphs kept in memory between polls, per source (the most recently read ones).
CACHED_GRAPHS = 8

K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V) -> None:
    """Keep `value` as the newest entry, dropping the oldest beyond `CACHED_GRAPHS`."""
    cache[key] = value
    while len(cache) > CACHED_GRAPHS:
        del cache[next(iter(cache))]


@dataclass
class OwnedLog:
    """A coaching log and the request it came from, when that is known."""

    coaching_type: str
    content: str
    request_id: str | None = None


@dataclass
class GraphData:
    """A run's graph as save records, with what only a live run knows."""

    config: RunConfig
    state: str
    situations: dict[int, SituationRecord]
    live: bool
    candidate_gen_ids: dict[int, str] = field(default_factory=dict)
    situation_gen_ids: dict[int, str] = field(default_factory=dict)
    stage_ends: dict[int, StageEnd] = field(default_factory=dict)


class GraphSource(Protocol):
    """What the graph pages read: a run's graph, its requests and its coaching logs."""

    live: bool

    async def run_page(self, query: RunQuery) -> Any:
        """One page of the runs the source knows, as the runs page lists them."""

    async def graph(self, run_id: str) -> GraphData | None:
        """The run's graph, or None for an unknown run."""

    async def requests(self, run_id: str) -> list[CoachingRequest]:
        """The run's coaching requests (none for a saved run: saves do not keep them)."""

    async def logs(self, run_id: str) -> list[OwnedLog]:
        """The run's coaching logs, in the order they arrived."""


class LiveSource:
    """Graphs of the runs in Redis, as the controller keeps them."""

    live = True

    def __init__(self, store: GraphStore, requests: RequestStore) -> None:
        self.store = store
        self.request_store = requests
        self._cache: dict[str, tuple[tuple[object, ...], GraphData]] = {}

    async def _fingerprint(self, run_id: str) -> tuple[object, ...]:
        # Every event applied adds a seq; every coached branch adds a source and markers.
        keys = self.store.keys
        pipe = self.store.client.pipeline(transaction=False)
        pipe.hget(keys.run(run_id, META), "state")
        pipe.scard(keys.run(run_id, SEQS))
        pipe.hlen(keys.run(run_id, SOURCES))
        pipe.hlen(keys.run(run_id, MARKERS))
        return tuple(await pipe.execute())

    async def run_page(self, query: RunQuery) -> Any:
        """One page of the runs in Redis, active first, filtered in Redis."""
        return await live_page(self.store.client, self.store.index, self.store.keys, query)

    async def graph(self, run_id: str) -> GraphData | None:
        """The run's graph as it would be saved now; read again only when it changed."""
        fingerprint = await self._fingerprint(run_id)
        cached = self._cache.get(run_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        data = await self._read(run_id)
        self._cache.pop(run_id, None)
        if data is not None:
            remember(self._cache, run_id, (fingerprint, data))
        return data

    async def _read(self, run_id: str) -> GraphData | None:
        graph = await self.store.load(run_id)
        if graph is None:
            return None
        agent_id, agent_version = await self.store.agent_identity(run_id)
        config = build_config(graph, agent_id, agent_version)
        return GraphData(
            config=config,
            state=graph.state,
            situations={record.id: record for record in build_records(graph)},
            live=True,
            candidate_gen_ids={cid: c.candidate_id for cid, c in graph.candidates.items()},
            situation_gen_ids={sid: s.situation_id for sid, s in graph.situations.items()},
            stage_ends={
                cid: execution.stage_end
                for cid, execution in graph.executions.items()
                if execution.stage_end is not None
            },
        )

    async def requests(self, run_id: str) -> list[CoachingRequest]:
        """Every request of the run, oldest first."""
        return await self.request_store.all(run_id)

    async def logs(self, run_id: str) -> list[OwnedLog]:
        """The run's coaching logs with the request each came from."""
        logs = await self.store.coaching_logs(run_id)
        owners = await self.store.log_owners(run_id)
        return [
            OwnedLog(entry.coaching_type, entry.content, owners.get(index))
            for index, entry in enumerate(logs)
        ]


@dataclass
class SavedRun:
    """One save folder found under the saves directory."""

    name: str
    folder: Path
    config: RunConfig


class SavedSource:
    """Graphs of the complete saves found at or below a folder; read-only, no Redis."""

    live = False

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._cache: dict[Path, tuple[float, GraphData]] = {}
        self._folders: dict[str, Path] = {}  # run id -> folder, as last listed

    def runs(self) -> tuple[list[SavedRun], list[dict[str, str]]]:
        """The readable saves (by run id) and, for the others, why they cannot be read."""
        found: list[SavedRun] = []
        refused: list[dict[str, str]] = []
        for folder in find_folders(self.root):
            name = str(folder.relative_to(self.root)) if folder != self.root else folder.name
            try:
                config = read_config(folder)
            except SaveError as error:
                refused.append({"folder": name, "reason": str(error)})
                continue
            found.append(SavedRun(name, folder, config))
        self._folders = {run.config.run_id: run.folder for run in found}
        return found, refused

    async def run_page(self, query: RunQuery) -> Any:
        """A page of the readable saves, newest save first; unreadable ones say why.

        Saves are listed from disk at each call (there is no index of folders); the
        cursor is the position in that listing.
        """
        start = _offset(query.cursor)
        runs, refused = await anyio.to_thread.run_sync(self.runs)
        rows: list[dict[str, Any]] = [_saved_row(run) for run in runs]
        rows.sort(key=lambda row: -row["saved_at"])
        rows.extend(_refused_row(item) for item in refused)
        facets = {
            key: sorted({str(row[key]) for row in rows}) for key in ("state", "scenario", "agent")
        }
        matching = [
            row
            for row in rows
            if (query.state is None or row["state"] == query.state)
            and (query.scenario is None or row["scenario"] == query.scenario)
            and (query.agent is None or row["agent"] == query.agent)
        ]
        end = start + query.limit
        counts = {state: 0 for state in RUN_STATES}
        counts["saved"] = sum(1 for row in rows if row["state"] == "saved")
        page = RunPage([], str(end) if end < len(matching) else None, len(matching), counts)
        return page_payload(page, matching[start:end], facets)

    def _folder(self, run_id: str) -> Path | None:
        # The folder found by the last listing, while it still holds a save; else list again.
        known = self._folders.get(run_id)
        if known is not None and (known / CONFIG_FILE).is_file():
            return known
        self.runs()
        return self._folders.get(run_id)

    async def graph(self, run_id: str) -> GraphData | None:
        """The saved graph of the run, read once per change of its `config.json`."""
        folder = await anyio.to_thread.run_sync(self._folder, run_id)
        if folder is None:
            return None
        stamp = (folder / CONFIG_FILE).stat().st_mtime
        cached = self._cache.get(folder)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        save = await anyio.to_thread.run_sync(read_save, folder)
        data = GraphData(
            config=save.config, state="saved", situations=dict(save.situations), live=False
        )
        self._cache.pop(folder, None)
        remember(self._cache, folder, (stamp, data))
        return data

    async def requests(self, run_id: str) -> list[CoachingRequest]:
        """None: a save keeps where corrections came from, not the requests' life."""
        return []

    async def logs(self, run_id: str) -> list[OwnedLog]:
        """The save's `_coaching_logs/` files, in their numbered order."""
        folder = await anyio.to_thread.run_sync(self._folder, run_id)
        if folder is None:
            return []
        return await anyio.to_thread.run_sync(_read_logs, folder / "_coaching_logs")


def _read_logs(folder: Path) -> list[OwnedLog]:
    if not folder.is_dir():
        return []
    return [
        OwnedLog(path.stem.partition("_")[2] or "log", path.read_text(errors="replace"))
        for path in sorted(folder.glob("*.md"))
        if path.is_file() and not path.is_symlink()
    ]


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isascii() or not cursor.isdigit():
        raise CursorError(f"cursor {cursor!r} is not one this console gave out")
    return int(cursor)


def _saved_row(run: SavedRun) -> dict[str, Any]:
    config = run.config
    started = config.producer.started_at if config.producer is not None else None
    return {
        "run_id": config.run_id,
        "state": "saved",
        "started_at": started,
        "saved_at": (run.folder / CONFIG_FILE).stat().st_mtime,
        "scenario": config.scenario,
        "target": config.target,
        "target_kind": config.target_kind,
        "task": task_text(config.target, config.task_description),
        "agent": config.agent_id,
        "folder": run.name,
        "situations": sum(1 for path in run.folder.glob("*.json")) - 1,
        "coaching": None,
    }


def _refused_row(item: dict[str, str]) -> dict[str, Any]:
    return {
        "run_id": None,
        "state": "unreadable",
        "started_at": None,
        "saved_at": None,
        "scenario": "",
        "target": "",
        "task": "",
        "agent": "",
        "folder": item["folder"],
        "reason": item["reason"],
        "situations": None,
        "coaching": None,
    }
