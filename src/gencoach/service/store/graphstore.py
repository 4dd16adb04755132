"""A run's interaction graph in Redis: events applied exactly once, nodes read back.

Each run's state lives in a handful of hashes under the run's hash tag (see
`Keys.run`). Generator ids (strings) map to integer storage ids, allocated in seq
order by the same Lua script that records the node (`gencoach.service.store.sequencing`), so
a re-delivered event, or one applied by another controller, changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, cast

import anyio.lowlevel
from redis.asyncio import Redis

from gencoach.config.scrubbing import scrub
from gencoach.constants import Keys
from gencoach.protocol import (
    UNKNOWN_AGENT,
    AnyEvent,
    CandidateCreated,
    CoachingLog,
    CoachingMarker,
    RunStarted,
)
from gencoach.service.store.nodecache import MAX_ENTRIES as CACHE_ENTRIES
from gencoach.service.store.nodecache import TTL_S as CACHE_TTL_S
from gencoach.service.store.nodecache import WriteOnceCache
from gencoach.service.store.nodes import (
    RunGraph,
    StoredCandidate,
    StoredExecution,
    StoredSituation,
    as_text,
)
from gencoach.service.store.runindex import RunIndex
from gencoach.service.store.sequencing import CANDIDATE_IDS as CANDIDATE_IDS
from gencoach.service.store.sequencing import CANDIDATES as CANDIDATES
from gencoach.service.store.sequencing import (
    DEFAULT_GAP_TIMEOUT_S,
    SCRIPT_PARTS,
    Applied,
    Sequencer,
)
from gencoach.service.store.sequencing import EXECUTIONS as EXECUTIONS
from gencoach.service.store.sequencing import LINKS as LINKS
from gencoach.service.store.sequencing import MEMBERS as MEMBERS
from gencoach.service.store.sequencing import META as META
from gencoach.service.store.sequencing import SEQS as SEQS
from gencoach.service.store.sequencing import SITUATIONS as SITUATIONS

# The parts of a run's state (those the apply script writes come from sequencing, and are
# re-exported); `RUN_PARTS` lists every key a run owns, for expiry.
MARKERS, LOGS, SOURCES = "markers", "logs", "coaching_sources"
# Which request each coaching log came from: log index -> request id.
LOG_OWNERS = "log_owners"
ATTEMPTS, ORDERS = "attempts", "orders"
# Coached alternatives claimed per place (`lua/alternatives.lua`).
ALTERNATIVES = "alternatives"
ACTIVITY_BATCH: Final = 500
_ACTIVITY_FIELDS: Final = ("state", "last_event_at", "started_at", "registered")


@dataclass(frozen=True)
class RunActivity:
    """What a reconciliation pass needs to know of a run come due (`GraphStore.activity`)."""

    state: str | None
    """None when the run's state is gone."""
    silent_s: float
    """Seconds since its last event (or its start), by Redis's clock."""
    registered: bool
    """Whether its agent's registration ended (answered or refused)."""


# Parts written outside the apply script: coaching markers and sources, requests,
# attempts and published orders, coaching logs, the generator's teacher states, settle
# probes and routed terminals (gencoach.settling), the generator's own resume state.
RUN_PARTS: Final = (
    *SCRIPT_PARTS,
    "branches",
    MARKERS,
    SOURCES,
    ATTEMPTS,
    ORDERS,
    ALTERNATIVES,
    "requests",
    LOGS,
    LOG_OWNERS,
    "teacher_state",
    "settle",
    "routed",
    "generator",
)

# A run's graph as stored: part name -> the fields of its hash.
GraphParts = dict[str, dict[bytes, bytes]]
# Referring parts before the parts they refer to (see `GraphStore.read_parts`).
_SCAN_ORDER: Final = (MARKERS, SOURCES, EXECUTIONS, LINKS, MEMBERS, CANDIDATES, SITUATIONS)
_GRAPH_PARTS: Final = (META, *_SCAN_ORDER)
# Fields (or log entries) per read of a large run: about 1 MB per reply for usual nodes.
READ_BATCH: Final = 500


class GraphStore:
    """Applies generation events to run graphs in Redis and reads the graphs back."""

    def __init__(
        self,
        client: Redis,
        keys: Keys,
        gap_timeout_s: float = DEFAULT_GAP_TIMEOUT_S,
        *,
        cache_entries: int = CACHE_ENTRIES,
        cache_ttl_s: float = CACHE_TTL_S,
    ) -> None:
        self.client = client
        self.keys = keys
        self.index = RunIndex(client, keys)
        self.sequencer = Sequencer(client, keys, self.index, gap_timeout_s)
        self.watches = self.sequencer.watches
        # Nodes never change once written: lineage reads remember them, within bounds
        # (`controller.node_cache_entries` each, `controller.node_cache_ttl_s`).
        bounds = (cache_entries, cache_ttl_s)
        self._started: WriteOnceCache[RunStarted] = WriteOnceCache(*bounds)
        self._candidates: WriteOnceCache[StoredCandidate] = WriteOnceCache(*bounds)
        self._executions: WriteOnceCache[StoredExecution] = WriteOnceCache(*bounds)
        self._situations: WriteOnceCache[StoredSituation] = WriteOnceCache(*bounds)
        self._storage_ids: WriteOnceCache[int] = WriteOnceCache(*bounds)
        # The start each run was last read with: a lineage guesses from it whether its
        # first candidate is remembered, and if not reads it with the run's state.
        self._generations: WriteOnceCache[tuple[str, str]] = WriteOnceCache(*bounds)

    def run_keys(self, run_id: str) -> list[str]:
        """Every key holding state of this run."""
        return [self.keys.run(run_id, part) for part in RUN_PARTS]

    async def apply(self, events: Sequence[AnyEvent], *, own: bool = False) -> list[Applied]:
        """Apply events in one round trip, each run's in seq order (see
        `gencoach.service.store.sequencing`); each is applied at most once. The storage
        ids of the candidates created are remembered (`storage_id`)."""
        results = (await self.sequencer.apply(events, own=own)).results
        for event, result in zip(events, results, strict=True):
            if isinstance(event, CandidateCreated) and result.storage_id is not None:
                self._storage_ids.put((event.run_id, event.candidate_id), result.storage_id)
        return results

    async def storage_id(self, run_id: str, candidate_id: str) -> int | None:
        """The storage id of a candidate known by its generator id (remembered once known:
        it never changes while the run's keys live)."""
        known = self._storage_ids.get((run_id, candidate_id))
        if known is not None:
            return known
        value = await self.client.hget(self.keys.run(run_id, CANDIDATE_IDS), candidate_id)
        if value is None:
            return None
        self._storage_ids.put((run_id, candidate_id), int(value))
        return int(value)

    async def markers(self, run_id: str, candidate_ids: list[int]) -> dict[int, CoachingMarker]:
        """The coaching markers of those candidates that have one."""
        if not candidate_ids:
            return {}
        values = await self.client.hmget(self.keys.run(run_id, MARKERS), candidate_ids)
        return {
            cid: CoachingMarker.model_validate_json(value)
            for cid, value in zip(candidate_ids, values, strict=True)
            if value is not None
        }

    async def started(self, run_id: str) -> RunStarted | None:
        """The run's run.started event, or None for an unknown run."""
        raw = await self.client.hget(self.keys.run(run_id, META), "started")
        return RunStarted.model_validate_json(raw) if raw is not None else None

    async def activity(self, run_ids: Sequence[str]) -> dict[str, RunActivity]:
        """Each run's state, how long it has been silent and whether its agent was
        registered: one command a run, `ACTIVITY_BATCH` runs a round trip."""
        now_s, _ = await self.client.time()
        found: dict[str, RunActivity] = {}
        for first in range(0, len(run_ids), ACTIVITY_BATCH):
            batch = run_ids[first : first + ACTIVITY_BATCH]
            pipe = self.client.pipeline(transaction=False)
            for run_id in batch:
                pipe.hmget(self.keys.run(run_id, META), list(_ACTIVITY_FIELDS))
            for run_id, (state, last, started_at, registered) in zip(
                batch, await pipe.execute(), strict=True
            ):
                heard = last if last is not None else started_at
                found[run_id] = RunActivity(
                    state=as_text(state) if state is not None else None,
                    silent_s=now_s - float(as_text(heard)) if heard is not None else 0.0,
                    registered=registered is not None,
                )
        return found

    async def unregistered(self, run_ids: Sequence[str]) -> dict[str, RunStarted]:
        """The run.started of each active run whose agent's registration never ended
        (one command a run, in one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hmget(self.keys.run(run_id, META), ["state", "started", "registered"])
        found: dict[str, RunStarted] = {}
        for run_id, (state, started, registered) in zip(run_ids, await pipe.execute(), strict=True):
            if state is not None and as_text(state) == "active" and started and not registered:
                found[run_id] = RunStarted.model_validate_json(started)
        return found

    async def add_logs(
        self, run_id: str, logs: Sequence[CoachingLog], request_id: str | None = None
    ) -> None:
        """Keep coaching exchanges' logs for the run's `_coaching_logs/` (and their request)."""
        if not logs:
            return
        key = self.keys.run(run_id, LOGS)
        length = await self.client.rpush(key, *(scrub(entry.model_dump_json()) for entry in logs))
        if request_id is not None:
            first = length - len(logs)
            owners = [item for index in range(first, length) for item in (index, request_id)]
            await self.client.hset(self.keys.run(run_id, LOG_OWNERS), items=owners)

    async def log_owners(self, run_id: str) -> dict[int, str]:
        """The request each coaching log came from, by the log's index, where known."""
        raw = await self.client.hgetall(self.keys.run(run_id, LOG_OWNERS))
        return {int(as_text(index)): as_text(owner) for index, owner in raw.items()}

    async def coaching_logs(self, run_id: str) -> list[CoachingLog]:
        """Every coaching log kept for the run, in arrival order."""
        return [CoachingLog.model_validate_json(item) for item in await self.raw_logs(run_id)]

    async def raw_logs(self, run_id: str, batch: int = READ_BATCH) -> list[bytes]:
        """The run's coaching logs as stored, read `batch` at a time, in arrival order."""
        key = self.keys.run(run_id, LOGS)
        logs: list[bytes] = []
        while chunk := await self.client.lrange(key, len(logs), len(logs) + batch - 1):
            logs.extend(cast(list[bytes], chunk))
            if len(chunk) < batch:
                break
        return logs

    async def state(self, run_id: str) -> str | None:
        """The run's state (`active`, `finished`), or None for an unknown run."""
        value = await self.client.hget(self.keys.run(run_id, META), "state")
        return as_text(value) if value is not None else None

    async def summary(self, run_id: str) -> dict[str, str | int] | None:
        """A run's state and node counts, or None for an unknown run."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.run(run_id, META))
        for part in (SITUATIONS, CANDIDATES, EXECUTIONS):
            pipe.hlen(self.keys.run(run_id, part))
        meta, situations, candidates, executions = await pipe.execute()
        if not meta:
            return None
        summary: dict[str, str | int] = {
            "run_id": run_id,
            "state": meta[b"state"].decode(),
            "situations": situations,
            "candidates": candidates,
            "executions": executions,
        }
        if b"folder" in meta:
            summary["folder"] = meta[b"folder"].decode()
        summary["save"] = _save_state(meta)
        if b"save_error" in meta:
            summary["save_error"] = meta[b"save_error"].decode()
            summary["save_attempts"] = int(meta.get(b"save_attempts", b"0"))
        if b"finish_reason" in meta:
            summary["finish_reason"] = meta[b"finish_reason"].decode()
        return summary

    async def lineage(self, run_id: str, candidate_id: int) -> RunGraph | None:
        """The part of a run's graph from a candidate up to its root, or None if unknown.

        One round trip for the run's state (with the candidate itself, unless remembered),
        then one per level for the nodes not yet remembered (`WriteOnceCache`), instead of
        reading the whole (possibly large) run.
        """
        guess = self._generations.get(run_id)
        key = (*guess, candidate_id) if guess is not None else None
        first = key is None or None in (self._candidates.get(key), self._executions.get(key))
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.run(run_id, META), ["state", "started", "generation"])
        if first:
            pipe.hget(self.keys.run(run_id, CANDIDATES), candidate_id)
            pipe.hget(self.keys.run(run_id, EXECUTIONS), candidate_id)
        (state, started, started_us), *read = await pipe.execute()
        if state is None or started is None:
            return None
        # Keys the remembered nodes to this start of the run (a run id may come back).
        generation = (run_id, as_text(started_us) if started_us is not None else "")
        self._generations.put(run_id, generation)
        run_started = self._started.get(generation)
        if run_started is None:
            run_started = RunStarted.model_validate_json(started)
            self._started.put(generation, run_started)
        graph = RunGraph(
            run_id=run_id,
            state=as_text(state),
            started=run_started,
            roots=[],
            situations={},
            candidates={},
            executions={},
            links={},
            members={},
        )
        current: int | None = candidate_id
        while current is not None:
            found = await self._level(run_id, generation, current, read)
            read = []
            if found is None:
                return graph if graph.candidates else None
            candidate, execution, situation = found
            graph.candidates[current] = candidate
            if execution is not None:
                graph.executions[current] = execution
            if situation is None:
                return None
            graph.situations[situation.id] = situation
            graph.members.setdefault(situation.id, []).append(current)
            if situation.parent_id is None:
                graph.roots.append(situation.id)
            current = situation.parent_id
        return graph

    async def add_following(self, graph: RunGraph, candidate_id: int) -> None:
        """Add to a lineage what follows one of its candidates: its links and the situations
        they lead to (a recovery restarts after a failed call's feedback, which the path
        up from a later candidate need not go through)."""
        run_id = graph.run_id
        if candidate_id in graph.links:
            return
        raw = await self.client.hget(self.keys.run(run_id, LINKS), candidate_id)
        # None leads on from it yet: remembered too, for this lineage's later readers.
        links = _parse_links(as_text(raw)) if raw else []
        graph.links[candidate_id] = links
        missing = [sid for sid, _ in links if sid not in graph.situations]
        if not missing:
            return
        values = await self.client.hmget(self.keys.run(run_id, SITUATIONS), missing)
        for sid, value in zip(missing, values, strict=True):
            if value is not None:
                graph.situations[sid] = StoredSituation.model_validate_json(value)

    async def _level(
        self,
        run_id: str,
        generation: tuple[str, str],
        candidate_id: int,
        read: list[bytes | None],
    ) -> tuple[StoredCandidate, StoredExecution | None, StoredSituation | None] | None:
        """One candidate of a lineage (None: no such candidate), its execution and its
        situation, each read only when not remembered (`read`: the candidate and its
        execution as read already, if they were)."""
        key = (*generation, candidate_id)
        candidate, execution = self._candidates.get(key), self._executions.get(key)
        if candidate is None or execution is None:  # one round trip for both
            if not read:
                pipe = self.client.pipeline(transaction=False)
                pipe.hget(self.keys.run(run_id, CANDIDATES), candidate_id)
                pipe.hget(self.keys.run(run_id, EXECUTIONS), candidate_id)
                read = await pipe.execute()
            raw_candidate, raw_execution = read
            if raw_candidate is None:
                return None
            if candidate is None:
                candidate = StoredCandidate.model_validate_json(raw_candidate)
                self._candidates.put(key, candidate)
            if raw_execution is not None:
                execution = StoredExecution.model_validate_json(raw_execution)
                self._executions.put(key, execution)
        situation_key = (*generation, candidate.situation_id)
        situation = self._situations.get(situation_key)
        if situation is None:
            raw = await self.client.hget(self.keys.run(run_id, SITUATIONS), candidate.situation_id)
            if raw is None:
                return candidate, execution, None
            situation = StoredSituation.model_validate_json(raw)
            self._situations.put(situation_key, situation)
        return candidate, execution, situation

    async def load(self, run_id: str) -> RunGraph | None:
        """The whole graph of a run, or None for an unknown run."""
        pipe = self.client.pipeline(transaction=False)
        for part in _GRAPH_PARTS:
            pipe.hgetall(self.keys.run(run_id, part))
        parts = dict(zip(_GRAPH_PARTS, await pipe.execute(), strict=True))
        return graph_from_parts(run_id, parts) if parts[META] else None

    async def read_parts(self, run_id: str, batch: int = READ_BATCH) -> GraphParts | None:
        """The stored fields of a run's whole graph, read `batch` at a time; None if unknown.

        Each hash is scanned (HSCAN), so no reply holds a large run whole and other work
        on the event loop and in Redis goes on between batches. Parts that refer to
        others are read first: in a run still going, whatever a part read earlier names
        is there when the part it names is read.
        """
        meta = await self.client.hgetall(self.keys.run(run_id, META))
        if not meta:
            return None
        parts: GraphParts = {META: cast(dict[bytes, bytes], meta)}
        for part in _SCAN_ORDER:
            parts[part] = await self.scan_part(run_id, part, batch)
        return parts

    async def scan_part(
        self, run_id: str, part: str, batch: int = READ_BATCH
    ) -> dict[bytes, bytes]:
        """Every field of one part (a hash) of a run, read `batch` at a time."""
        key = self.keys.run(run_id, part)
        fields: dict[bytes, bytes] = {}
        cursor = 0
        while True:
            cursor, chunk = await self.client.hscan(key, cursor, count=batch)
            fields.update(cast(dict[bytes, bytes], chunk))
            if cursor == 0:
                return fields
            await anyio.lowlevel.checkpoint()

    async def agent_identity(self, run_id: str) -> tuple[str, str]:
        """The agent id and version the run's agent announced ("unknown" until it did)."""
        agent_id, version = await self.client.hmget(
            self.keys.run(run_id, META), ["agent_id", "agent_version"]
        )
        return (
            as_text(agent_id) if agent_id else UNKNOWN_AGENT,
            as_text(version) if version else UNKNOWN_AGENT,
        )

    async def mark_saved(
        self, run_id: str, folder: str, ttl_s: int, also: Sequence[str] = ()
    ) -> None:
        """Record that a finished run was saved; its keys (and `also`) expire in `ttl_s` s."""
        now_s, _ = await self.client.time()
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(
            self.keys.run(run_id, META),
            mapping={"state": "saved", "folder": folder, "saved_at": str(now_s)},
        )
        pipe.hdel(self.keys.run(run_id, META), "save_error")
        for key in [*self.run_keys(run_id), *also]:
            pipe.expire(key, ttl_s)
        await pipe.execute()
        await self.index.moved(run_id, "saved", ttl_s)

    async def record_save_failure(self, run_id: str, reason: str, attempts: int) -> None:
        """Note why the run's last save failed (shown by the API until a save succeeds)."""
        key = self.keys.run(run_id, META)
        if await self.client.exists(key):
            await self.client.hset(key, mapping={"save_error": reason, "save_attempts": attempts})


def graph_from_parts(run_id: str, parts: GraphParts) -> RunGraph:
    """A run's graph from its stored fields (as `GraphStore.read_parts` returns them)."""
    meta = parts[META]
    roots = meta[b"roots"].decode()
    return RunGraph(
        run_id=run_id,
        state=meta[b"state"].decode(),
        started=RunStarted.model_validate_json(meta[b"started"]),
        roots=[int(item) for item in roots.split(",")] if roots else [],
        situations={
            int(key): StoredSituation.model_validate_json(value)
            for key, value in parts[SITUATIONS].items()
        },
        candidates={
            int(key): StoredCandidate.model_validate_json(value)
            for key, value in parts[CANDIDATES].items()
        },
        executions={
            int(key): StoredExecution.model_validate_json(value)
            for key, value in parts[EXECUTIONS].items()
        },
        links={int(key): _parse_links(value.decode()) for key, value in parts[LINKS].items()},
        members={
            int(key): [int(item) for item in value.decode().split(",")]
            for key, value in parts[MEMBERS].items()
        },
        markers={
            int(key): CoachingMarker.model_validate_json(value)
            for key, value in parts[MARKERS].items()
        },
        sources={int(key): json.loads(value) for key, value in parts[SOURCES].items()},
        started_at=float(meta[b"started_at"]) if b"started_at" in meta else None,
    )


def _save_state(meta: dict[bytes, bytes]) -> str:
    """`saved`; `retrying` after a failed save; `pending` once finished; `not_finished`."""
    state = meta[b"state"]
    if state == b"saved":
        return "saved"
    if b"save_error" in meta:
        return "retrying"
    return "pending" if state == b"finished" else "not_finished"


def _parse_links(value: str) -> list[tuple[int, Literal["next", "alternative"]]]:
    parsed: list[tuple[int, Literal["next", "alternative"]]] = []
    for item in value.split(","):
        situation, kind = item.split(":")
        parsed.append((int(situation), "alternative" if kind == "alternative" else "next"))
    return parsed
