"""What a run's end means for its coaching requests, and for runs whose generator fell silent.

`RunEnds` ends the open requests of finished runs (`settle`) and finishes silent runs as
abandoned (`ABANDON_SCRIPT`); `proving_attempt` proves a request with branches from the
run's graph. See docs/operations.md, "How runs and requests end".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.funnel import funnel_row
from gencoach.metrics.catalog import PROOFS
from gencoach.runtime.logs import bound, get_logger
from gencoach.service.branching.coached_branches import node_ids, proposal_key
from gencoach.service.coaching.decider import (
    BranchesRecorded,
    CandidateExecuted,
    Event,
    RunEnded,
    StageEnded,
)
from gencoach.service.coaching.lifecycle import TERMINAL
from gencoach.service.coaching.requests import CoachingRequest, RequestStore
from gencoach.service.store.graphstore import ATTEMPTS, META, GraphStore
from gencoach.service.store.nodes import RunGraph, as_text
from gencoach.service.store.runindex import RunIndex
from gencoach.service.store.trajectory import path_attempts

log = get_logger("runends")

SETTLE_AFTER_S: Final = 5.0

# Finish a run that is still active and has not heard from its generator for ARGV[1]
# seconds (Redis's clock); returns 1 when it did. Checked and written in one step, so
# an event applied in between keeps the run going.
ABANDON_SCRIPT: Final = """
local meta = KEYS[1]
if redis.call('HGET', meta, 'state') ~= 'active' then return 0 end
local last = tonumber(redis.call('HGET', meta, 'last_event_at')
  or redis.call('HGET', meta, 'started_at') or '0')
local now = redis.call('TIME')
if tonumber(now[1]) - last < tonumber(ARGV[1]) then return 0 end
redis.call('HSET', meta, 'state', 'finished', 'finished_at', now[1],
  'finished_seq', 'none (' .. ARGV[2] .. ')', 'finish_reason', ARGV[2])
return 1
"""


@dataclass(frozen=True)
class Settled:
    """A settling pass over a finished run: whether every request has ended, and how many
    this pass ended (its save, if written already, is then written again)."""

    done: bool
    ended: int


def proving_attempt(graph: RunGraph, request: CoachingRequest) -> int | None:
    """The request's attempt that a successful end of its stage went through, if any (as
    the terminal's own outcome would prove it: `path_attempts`)."""
    attempts = set(request.attempt_ids)
    for candidate_id, execution in graph.executions.items():
        end = execution.stage_end
        candidate = graph.candidates.get(candidate_id)
        if end is None or end.event != "success" or candidate is None:
            continue
        if graph.situations[candidate.situation_id].stage.id != request.stage_id:
            continue
        for attempt in path_attempts(graph, candidate_id):
            if attempt in attempts:
                return attempt
    return None


def branch_executed(graph: RunGraph | None, request: CoachingRequest) -> bool:
    """Whether the generator executed one of the request's coached candidates (a mark
    intake's report lost to a crash, or to a move not yet stored)."""
    if graph is None:
        return False
    coached = {node_ids(request, p.reinjection_point_id)[1] for p in request.proposals}
    return any(
        candidate.candidate_id in coached and storage_id in graph.executions
        for storage_id, candidate in graph.candidates.items()
    )


class RunEnds:
    """Ends the requests of finished runs and finishes runs that fell silent.

    When a run finishes, its generator executes no more branches: every request still
    open is ended with a reason saying what the run's end interrupted, and its pending
    slot is released.
    """

    def __init__(
        self, client: Redis, keys: Keys, requests: RequestStore, store: GraphStore
    ) -> None:
        self.client = client
        self.keys = keys
        self.requests = requests
        self.store = store
        self._abandon = client.register_script(ABANDON_SCRIPT)
        self.index = RunIndex(client, keys)

    async def settle(self, run_id: str, *, after_s: float = SETTLE_AFTER_S) -> Settled:
        """End every open request of a finished run: whether none is left open, and how
        many this call ended.

        Nothing ends before `after_s` has passed since the run's end, so outcomes reported
        just before `run.finished` (still on the terminals stream) prove their attempts
        first. A request with branches whose proof they still hold (the terminals' reader
        held up by a Redis outage, or an outcome that came while a controller's crash left
        the request not yet seen reinjected) is proven from the run's graph itself, as the
        terminal would have: a successful stage end below its attempt proves it
        (`proving_attempt`); one whose branch the graph shows executed is marked so first,
        and ends `unproven`, not `abandoned`.
        """
        finished_at = await self.client.hget(self.keys.run(run_id, META), "finished_at")
        now_s, _ = await self.client.time()
        if finished_at is None or now_s - float(as_text(finished_at)) < after_s:
            return Settled(False, 0)
        graph: RunGraph | None = None
        ended_here = 0
        for request in await self.requests.all(run_id):
            if request.state in TERMINAL:
                continue
            with bound(run_id=run_id, request_id=request.request_id):
                event: Event = RunEnded()
                if request.state == "corrected":
                    graph = graph or await self.store.load(run_id)
                    recorded = await self._recorded(graph, request) if graph is not None else None
                    if recorded is not None:
                        request = (await self.requests.apply(request, recorded)).request
                if request.state in ("reinjected", "executed"):
                    graph = graph or await self.store.load(run_id)
                    proof = proving_attempt(graph, request) if graph is not None else None
                    if proof is not None:
                        event = StageEnded(proof, True, "success")
                    elif request.state == "reinjected" and branch_executed(graph, request):
                        request = (await self.requests.apply(request, CandidateExecuted())).request
                applied = await self.requests.apply(request, event)
                ended = applied.request
                if ended.state not in TERMINAL:
                    return Settled(False, ended_here)  # still open: the next pass looks again
                if not applied.stored:
                    continue  # another writer ended it
                ended_here += 1
                if ended.state in ("proven", "unproven"):
                    row = funnel_row(ended.route, ended.human)
                    self.requests.metrics.inc(PROOFS, row, ended.state)
                if ended.state == "proven":
                    log.info("coaching.proven", attempt=ended.attempt_ids, route=ended.route,
                             source="the run's graph, at its end")  # fmt: skip
        return Settled(True, ended_here)

    async def _recorded(self, graph: RunGraph, request: CoachingRequest) -> BranchesRecorded | None:
        """The branches a `corrected` request had recorded (and maybe ordered, and seen
        executed) when a crash cut its reinjection short of its own move, as that move
        would have reported them; None when it recorded none."""
        recorded = {c.candidate_id for c in graph.candidates.values()}
        points = [p.reinjection_point_id for p in request.proposals]
        points = [p for p in points if node_ids(request, p)[1] in recorded]
        if not points:
            return None
        fields = [proposal_key(request.request_id, point) for point in points]
        ids = await self.client.hmget(self.keys.run(request.run_id, ATTEMPTS), fields)
        found = [(int(i), p) for i, p in zip(ids, points, strict=True) if i is not None]
        if not found:
            return None
        return BranchesRecorded(tuple(i for i, _ in found), tuple(p for _, p in found))

    async def abandon_if_idle(self, run_id: str, idle_s: float) -> bool:
        """Finish the run as abandoned if it heard nothing for `idle_s`; True if it did.

        Such a run's generator crashed or lost its connection for good; the caller then
        saves it like any finished run.
        """
        reason = f"abandoned: no event from the generator for {idle_s:g} s"
        done = await self._abandon(keys=[self.keys.run(run_id, META)], args=[idle_s, reason])
        if done:
            await self.index.moved(run_id, "finished")
            log.warning("run.abandoned", run_id=run_id, idle_s=idle_s)
        return bool(done)
