"""A run's interaction graph in Redis: events applied exactly once, nodes read back.

Each run's state lives in a handful of hashes under the run's hash tag (see
`Keys.run`). Generator ids (strings) map to integer storage ids, allocated in event
order by the same Lua script that records the node, so a re-delivered event, or one
applied by another controller, changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Final, Literal

from redis.asyncio import Redis

from gencoach.config.scrubbing import scrub
from gencoach.constants import Keys
from gencoach.protocol import (
    AnyEvent,
    CandidateCreated,
    CandidateExecuted,
    CoachingLog,
    CoachingMarker,
    JsonObject,
    RunFinished,
    RunStarted,
    SituationCreated,
)
from gencoach.service.nodes import (
    RunGraph,
    StoredCandidate,
    StoredExecution,
    StoredSituation,
    as_text,
)

APPLY_SCRIPT: Final = resources.files("gencoach.service").joinpath("lua/apply_events.lua")

# The parts of a run's state; `RUN_PARTS` lists every key a run owns, for expiry.
META, SEQS, SITUATION_IDS, CANDIDATE_IDS = "meta", "seqs", "situation_ids", "candidate_ids"
SITUATIONS, CANDIDATES, EXECUTIONS, LINKS, MEMBERS = (
    "situations",
    "candidates",
    "executions",
    "links",
    "members",
)
_SCRIPT_PARTS: Final = (
    META,
    SEQS,
    SITUATION_IDS,
    CANDIDATE_IDS,
    SITUATIONS,
    CANDIDATES,
    EXECUTIONS,
    LINKS,
    MEMBERS,
)
MARKERS, LOGS, SOURCES = "markers", "logs", "coaching_sources"
# Which request each coaching log came from: log index -> request id.
LOG_OWNERS = "log_owners"
ATTEMPTS, ORDERS = "attempts", "orders"
# Parts written outside the apply script: coaching markers and sources, requests,
# attempts and published orders, coaching logs, the reference simulator's states.
RUN_PARTS: Final = (
    *_SCRIPT_PARTS,
    "branches",
    MARKERS,
    SOURCES,
    ATTEMPTS,
    ORDERS,
    "requests",
    LOGS,
    LOG_OWNERS,
    "sim_states",
)

UNKNOWN_AGENT: Final = "unknown"
_EVENT_FIELDS: Final = frozenset({"type", "run_id", "seq", "events"})
_HASH_TAG_CHARS: Final = frozenset("{}")


@dataclass(frozen=True)
class Applied:
    """What applying one event did: `ok` (with the node's storage id), `dup` or `err`."""

    outcome: Literal["ok", "dup", "err"]
    storage_id: int | None = None
    reason: str = ""


def _body(event: AnyEvent, *drop: str) -> str:
    return event.model_dump_json(exclude=set(_EVENT_FIELDS) | set(drop))


def _script_args(event: AnyEvent) -> list[str]:
    head = [event.type, str(event.seq)]
    match event:
        case RunStarted():
            return [*head, event.model_dump_json()]
        case SituationCreated():
            parent = event.parent_candidate_id or ""
            return [*head, event.situation_id, parent, event.link, _body(event)]
        case CandidateCreated():
            return [*head, event.candidate_id, event.situation_id, _body(event, "situation_id")]
        case CandidateExecuted():
            return [*head, event.candidate_id, _body(event)]
        case RunFinished():
            return head


def _applied(outcome: str, detail: str) -> Applied:
    if outcome == "ok":
        return Applied("ok", int(detail) if detail else None)
    if outcome == "dup":
        return Applied("dup")
    return Applied("err", reason=detail)


class GraphStore:
    """Applies generation events to run graphs in Redis and reads the graphs back."""

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._apply = client.register_script(APPLY_SCRIPT.read_text())

    def run_keys(self, run_id: str) -> list[str]:
        """Every key holding state of this run."""
        return [self.keys.run(run_id, part) for part in RUN_PARTS]

    async def apply(self, events: Sequence[AnyEvent]) -> list[Applied]:
        """Apply events in order, in one round trip; each is applied at most once.

        Events are grouped by run (keeping each run's order) and each group is applied
        by one script call, atomic for that run.
        """
        results: list[Applied | None] = [None] * len(events)
        groups: dict[str, list[int]] = {}
        for index, event in enumerate(events):
            if _HASH_TAG_CHARS & set(event.run_id):
                results[index] = Applied("err", reason="run_id must not contain '{' or '}'")
            else:
                groups.setdefault(event.run_id, []).append(index)
        pipe = self.client.pipeline(transaction=False)
        for run_id, indexes in groups.items():
            keys = [self.keys.run(run_id, part) for part in _SCRIPT_PARTS]
            batch = json.dumps([_script_args(events[index]) for index in indexes])
            await self._apply(keys=keys, args=[batch], client=pipe)
        for indexes, replies in zip(groups.values(), await pipe.execute(), strict=True):
            for index, (outcome, detail) in zip(indexes, replies, strict=True):
                results[index] = _applied(as_text(outcome), as_text(detail))
        done = [result for result in results if result is not None]
        await self._index_runs(events, done)
        return done

    async def _index_runs(self, events: Sequence[AnyEvent], results: list[Applied]) -> None:
        # The run index lives outside the runs' hash slots, so it is written after the
        # script; a re-delivered run.started (a "dup") writes it again, so it is never lost.
        started = {
            event.run_id: event.seq
            for event, applied in zip(events, results, strict=True)
            if isinstance(event, RunStarted) and applied.outcome != "err"
        }
        if started:
            now = await self.client.time()
            await self.client.zadd(self.keys.runs, dict.fromkeys(started, now[0]), nx=True)

    async def executed(self, run_id: str, candidate_id: int) -> bool:
        """Whether the candidate's execution was reported."""
        return bool(await self.client.hexists(self.keys.run(run_id, EXECUTIONS), candidate_id))

    async def storage_id(self, run_id: str, candidate_id: str) -> int | None:
        """The storage id of a candidate known by its generator id."""
        value = await self.client.hget(self.keys.run(run_id, CANDIDATE_IDS), candidate_id)
        return int(value) if value is not None else None

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

    async def unregistered(self, run_id: str) -> RunStarted | None:
        """The run.started of a run whose agent was never asked for its info, if so."""
        started, registered = await self.client.hmget(
            self.keys.run(run_id, META), ["started", "registered"]
        )
        if started is None or registered is not None:
            return None
        return RunStarted.model_validate_json(started)

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
        raw = await self.client.lrange(self.keys.run(run_id, LOGS), 0, -1)
        return [CoachingLog.model_validate_json(item) for item in raw]

    async def sources(self, run_id: str) -> dict[int, JsonObject]:
        """Where each coached candidate's correction came from, by storage id."""
        raw = await self.client.hgetall(self.keys.run(run_id, SOURCES))
        return {int(as_text(key)): json.loads(value) for key, value in raw.items()}

    async def run_ids(self) -> list[str]:
        """Every run this Redis has seen start, oldest first."""
        return [as_text(item) for item in await self.client.zrange(self.keys.runs, 0, -1)]

    async def state(self, run_id: str) -> str | None:
        """The run's state (`active`, `finished`), or None for an unknown run."""
        value = await self.client.hget(self.keys.run(run_id, META), "state")
        return as_text(value) if value is not None else None

    async def run_states(self) -> list[str]:
        """The state of every run in the runs index (one round trip for them all)."""
        pipe = self.client.pipeline(transaction=False)
        for run_id in await self.client.zrange(self.keys.runs, 0, -1):
            pipe.hget(self.keys.run(as_text(run_id), META), "state")
        return [as_text(state) for state in await pipe.execute() if state is not None]

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

        Two round trips per level, instead of reading the whole (possibly large) run.
        """
        state, started = await self.client.hmget(self.keys.run(run_id, META), ["state", "started"])
        if state is None or started is None:
            return None
        graph = RunGraph(
            run_id=run_id,
            state=as_text(state),
            started=RunStarted.model_validate_json(started),
            roots=[],
            situations={},
            candidates={},
            executions={},
            links={},
            members={},
        )
        current: int | None = candidate_id
        while current is not None:
            pipe = self.client.pipeline(transaction=False)
            pipe.hget(self.keys.run(run_id, CANDIDATES), current)
            pipe.hget(self.keys.run(run_id, EXECUTIONS), current)
            raw_candidate, raw_execution = await pipe.execute()
            if raw_candidate is None:
                return graph if graph.candidates else None
            candidate = StoredCandidate.model_validate_json(raw_candidate)
            graph.candidates[current] = candidate
            if raw_execution is not None:
                graph.executions[current] = StoredExecution.model_validate_json(raw_execution)
            raw_situation = await self.client.hget(
                self.keys.run(run_id, SITUATIONS), candidate.situation_id
            )
            if raw_situation is None:
                return None
            situation = StoredSituation.model_validate_json(raw_situation)
            graph.situations[situation.id] = situation
            graph.members.setdefault(situation.id, []).append(current)
            if situation.parent_id is None:
                graph.roots.append(situation.id)
            current = situation.parent_id
        return graph

    async def load(self, run_id: str) -> RunGraph | None:
        """The whole graph of a run, or None for an unknown run."""
        pipe = self.client.pipeline(transaction=False)
        parts = (META, SITUATIONS, CANDIDATES, EXECUTIONS, LINKS, MEMBERS, MARKERS, SOURCES)
        for part in parts:
            pipe.hgetall(self.keys.run(run_id, part))
        (
            meta,
            situations,
            candidates,
            executions,
            links,
            members,
            markers,
            sources,
        ) = await pipe.execute()
        if not meta:
            return None
        roots = meta[b"roots"].decode()
        return RunGraph(
            run_id=run_id,
            state=meta[b"state"].decode(),
            started=RunStarted.model_validate_json(meta[b"started"]),
            roots=[int(item) for item in roots.split(",")] if roots else [],
            situations={
                int(key): StoredSituation.model_validate_json(value)
                for key, value in situations.items()
            },
            candidates={
                int(key): StoredCandidate.model_validate_json(value)
                for key, value in candidates.items()
            },
            executions={
                int(key): StoredExecution.model_validate_json(value)
                for key, value in executions.items()
            },
            links={int(key): _parse_links(value.decode()) for key, value in links.items()},
            members={
                int(key): [int(item) for item in value.decode().split(",")]
                for key, value in members.items()
            },
            markers={
                int(key): CoachingMarker.model_validate_json(value)
                for key, value in markers.items()
            },
            sources={int(key): json.loads(value) for key, value in sources.items()},
        )

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
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(self.keys.run(run_id, META), mapping={"state": "saved", "folder": folder})
        pipe.hdel(self.keys.run(run_id, META), "save_error")
        for key in [*self.run_keys(run_id), *also]:
            pipe.expire(key, ttl_s)
        await pipe.execute()

    async def record_save_failure(self, run_id: str, reason: str, attempts: int) -> None:
        """Note why the run's last save failed (shown by the API until a save succeeds)."""
        key = self.keys.run(run_id, META)
        if await self.client.exists(key):
            await self.client.hset(key, mapping={"save_error": reason, "save_attempts": attempts})

    async def runs_in_state(self, state: str) -> list[str]:
        """The known runs whose state is `state` (e.g. finished runs not yet saved)."""
        return [run_id for run_id, found in (await self.states()).items() if found == state]

    async def states(self) -> dict[str, str | None]:
        """Every indexed run's state; None for a run whose keys expired (or were lost)."""
        run_ids = await self.run_ids()
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hget(self.keys.run(run_id, META), "state")
        states = await pipe.execute()
        return {
            run_id: as_text(value) if value is not None else None
            for run_id, value in zip(run_ids, states, strict=True)
        }

    async def forget(self, run_ids: Sequence[str]) -> None:
        """Drop runs whose keys are gone from the runs index."""
        if run_ids:
            await self.client.zrem(self.keys.runs, *run_ids)


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
