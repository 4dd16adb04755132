"""The runs index: which runs exist, in which state, read a page at a time.

`RunIndex` reads and writes it (`lua/runs_*.lua`) and repairs it from the runs' own
state; `RunQuery`, `RunPage` and the cursors page through it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Final

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gencoach.constants import Keys
from gencoach.service.store.nodes import as_text

_LUA: Final = resources.files("gencoach.service").joinpath("lua")
# A run is active until run.finished, then finished until its graph is saved.
RUN_STATES: Final = ("active", "finished", "saved")
MAX_PAGE: Final = 1000
DEFAULT_PAGE: Final = 100
# Runs read per round trip by a repair.
_REPAIR_BATCH: Final = 500
# Meta fields an entry is rebuilt from.
_META_FIELDS: Final = ("state", "started", "agent_id")


def _script_text(name: str) -> str:
    common = _LUA.joinpath("runs_common.lua").read_text()
    return common + "\n" + _LUA.joinpath(f"runs_{name}.lua").read_text()


class CursorError(ValueError):
    """A page cursor this index did not give out (or that was altered)."""


@dataclass(frozen=True)
class IndexedRun:
    """One run as the index knows it."""

    run_id: str
    state: str
    scenario: str
    agent: str
    started_ms: int

    def to_json(self) -> dict[str, Any]:
        """The run as `GET /v1/runs` lists it."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "scenario": self.scenario,
            "agent": self.agent,
            "started_at": self.started_ms / 1000,
        }


@dataclass(frozen=True)
class RunQuery:
    """Which runs a page holds: the filters (None: any), where it starts, how many."""

    state: str | None = None
    scenario: str | None = None
    agent: str | None = None
    cursor: str | None = None
    limit: int = DEFAULT_PAGE


@dataclass
class RunPage:
    """One page of runs, the cursor of the next one, and the totals."""

    runs: list[IndexedRun]
    next_cursor: str | None
    total: int
    counts: dict[str, int] = field(default_factory=dict)


def encode_cursor(run: IndexedRun) -> str:
    """An opaque cursor: the page that follows starts just after `run`."""
    raw = json.dumps([run.started_ms, run.run_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> list[Any]:
    """The position a cursor names; CursorError when it is not one `encode_cursor` made."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        started_ms, run_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise CursorError(f"cursor {cursor!r} is not one this API gave out") from None
    if type(started_ms) is not int or started_ms < 0 or not isinstance(run_id, str):
        raise CursorError(f"cursor {cursor!r} is not one this API gave out")
    return [started_ms, run_id]


def _change(
    run_id: str,
    state: str | None = None,
    scenario: str | None = None,
    agent: str | None = None,
    ttl_s: int = 0,
    force: bool = False,
) -> list[Any]:
    return [run_id, state, scenario, agent, ttl_s * 1000, int(force)]


class RunIndex:
    """Reads and writes the runs index under one key prefix.

    Every run has an entry (state, scenario, agent, when it started) and sits in one
    sorted set per combination of state, scenario and agent, newest first; a count per
    state is kept in the same step as the run moves. A page of runs, filtered by any of the
    three, costs the page's size times the combinations matched, never the number of runs,
    and the counts cost nothing to read.

    The index lives outside the runs' hash slots, so no script writes it with the run's
    own state: it is written just after (run.started and run.finished applied, a run
    abandoned, a save, the agent's announcement). What a crash between the two writes
    leaves behind is repaired from the runs' own state (`repair`): a re-delivered
    run.started or run.finished writes the entry again, a run abandoned meanwhile is put
    right when its silence deadline is looked at, the reconciler checks a slice of the runs
    its controller saw open each pass (all of them after Redis restarted), housekeeping a
    slice of the whole index per pass (`check_slice`) and, every ten minutes, every run key
    it finds without an entry. A saved run leaves the index when its keys expire (its
    expiry is kept beside it); one whose keys vanished otherwise (Redis restarted without
    persistence) leaves it when a pass or a page finds it gone.
    """

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._record = client.register_script(_script_text("record"))
        self._drop = client.register_script(_script_text("drop"))
        self._page = client.register_script(_script_text("page"))
        self._scan_cursor = 0

    @property
    def _keys(self) -> list[str]:
        index = self.keys.runs_index
        return [index("entries"), index("combinations"), index("counts"), index("expiries")]

    async def _call(self, script: Any, *args: Any, client: Pipeline | None = None) -> Any:
        return await script(
            keys=self._keys, args=[self.keys.runs_index("by:"), *args], client=client
        )

    async def applied(
        self, started: Sequence[tuple[str, str, str]], finished: Sequence[str]
    ) -> None:
        """Index runs that started (run id, scenario, agent URL) and runs that finished.

        A re-delivered start changes nothing: a run's state only moves forward.
        """
        changes = [
            _change(run_id, "active", scenario, agent) for run_id, scenario, agent in started
        ]
        changes.extend(_change(run_id, "finished") for run_id in finished)
        if changes:
            await self._call(self._record, json.dumps(changes))

    async def moved(self, run_id: str, state: str, ttl_s: int = 0) -> None:
        """Note the run's new state (`ttl_s`: when a saved run's keys expire)."""
        await self._call(self._record, json.dumps([_change(run_id, state, ttl_s=ttl_s)]))

    async def announced(self, run_id: str, agent_id: str, pipe: Pipeline | None = None) -> None:
        """File the run under the agent id its agent announced (queued on `pipe` if given,
        which the caller executes)."""
        await self._call(self._record, json.dumps([_change(run_id, agent=agent_id)]), client=pipe)

    async def drop(self, run_ids: Sequence[str]) -> int:
        """Drop runs (and any whose keys expired) from the index; how many left it."""
        return int(await self._call(self._drop, *run_ids))

    async def sweep(self) -> int:
        """Drop every run whose keys expired; how many left the index."""
        dropped = 0
        while (step := await self.drop([])) > 0:
            dropped += step
        return dropped

    async def page(self, query: RunQuery) -> RunPage:
        """One page of the runs matching the query; CursorError for a foreign cursor."""
        after = decode_cursor(query.cursor) if query.cursor else None
        request = {
            "state": query.state,
            "scenario": query.scenario,
            "agent": query.agent,
            "after": after,
            "limit": query.limit,
        }
        reply = json.loads(as_text(await self._call(self._page, json.dumps(request))))
        runs = [
            IndexedRun(run_id, state, scenario, agent, int(started))
            for run_id, state, scenario, agent, started in (reply["runs"] or [])
        ]
        more = bool(reply["more"]) and bool(runs)
        counts = {state: int((reply["counts"] or {}).get(state, 0)) for state in RUN_STATES}
        return RunPage(
            runs=runs,
            next_cursor=encode_cursor(runs[-1]) if more else None,
            total=int(reply["total"]),
            counts=counts,
        )

    async def counts(self) -> dict[str, int]:
        """How many runs are in each state (runs whose keys expired are dropped first)."""
        await self.drop([])
        raw = await self.client.hgetall(self.keys.runs_index("counts"))
        found = {as_text(state): int(count) for state, count in raw.items()}
        return {state: found.get(state, 0) for state in RUN_STATES}

    async def facets(self) -> dict[str, list[str]]:
        """The states, scenarios and agents present, to filter by."""
        raw = await self.client.smembers(self.keys.runs_index("combinations"))
        combos = [json.loads(as_text(item)) for item in raw]
        return {
            name: sorted({str(combo[position]) for combo in combos})
            for position, name in enumerate(("state", "scenario", "agent"))
        }

    async def in_state(self, state: str) -> list[str]:
        """Every run in `state`, newest first (for passes over the open runs)."""
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = await self.page(RunQuery(state=state, cursor=cursor, limit=MAX_PAGE))
            found.extend(run.run_id for run in page.runs)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def run_ids(self) -> list[str]:
        """Every indexed run, in no particular order."""
        return [as_text(item) for item in await self.client.hkeys(self.keys.runs_index("entries"))]

    async def saved_since(self, expires_after_ms: int) -> list[str]:
        """The saved runs whose keys expire after `expires_after_ms` (the recent saves)."""
        raw = await self.client.zrange(
            self.keys.runs_index("expiries"), expires_after_ms, "+inf", byscore=True
        )
        return [as_text(item) for item in raw]

    async def indexed(self, run_ids: Sequence[str]) -> list[bool]:
        """Whether each run has an entry."""
        if not run_ids:
            return []
        entries = self.keys.runs_index("entries")
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hexists(entries, run_id)
        return [bool(found) for found in await pipe.execute()]

    async def repair(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Re-index runs from their own state; drop those whose state is gone.

        Returns each run's state as its own keys hold it (None: gone). Runs are read
        `_REPAIR_BATCH` at a time, so the event loop is never held long.
        """
        states: dict[str, str | None] = {}
        for first in range(0, len(run_ids), _REPAIR_BATCH):
            states.update(await self._repair(run_ids[first : first + _REPAIR_BATCH]))
        return states

    async def _repair(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        pipe = self.client.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hmget(self.keys.run(run_id, "meta"), list(_META_FIELDS))
            pipe.pttl(self.keys.run(run_id, "meta"))
            pipe.hget(self.keys.runs_index("entries"), run_id)
        replies = await pipe.execute()
        states: dict[str, str | None] = {}
        changes: list[list[Any]] = []
        gone: list[str] = []
        for position, run_id in enumerate(run_ids):
            (state, started, agent_id), ttl_ms, entry = replies[3 * position : 3 * position + 3]
            if state is None or started is None:
                states[run_id] = None
                if entry is not None:
                    gone.append(run_id)
                continue
            announced = json.loads(started)
            states[run_id] = now_state = as_text(state)
            scenario = str(announced.get("scenario", ""))
            agent = as_text(agent_id) if agent_id else str(announced.get("agent_url", ""))
            if entry is not None and json.loads(entry)[:3] == [now_state, scenario, agent]:
                continue
            ttl_s = max(1, ttl_ms // 1000) if now_state == "saved" and ttl_ms > 0 else 0
            changes.append(_change(run_id, now_state, scenario, agent, ttl_s, force=True))
        if changes:
            await self._call(self._record, json.dumps(changes))
        if gone:
            await self.drop(gone)
        return states

    async def check_slice(self, count: int = 500) -> int:
        """Repair the next `count` or so entries of the index; how many had a wrong state.

        Successive calls walk the whole index, so every entry is checked in time.
        """
        self._scan_cursor, found = await self.client.hscan(
            self.keys.runs_index("entries"), self._scan_cursor, count=count
        )
        assert isinstance(found, dict)
        before = {as_text(run_id): json.loads(entry)[0] for run_id, entry in found.items()}
        after = await self.repair(list(before))
        return sum(1 for run_id, state in after.items() if state != before[run_id])
