"""Coaching requests: each one's visible life, kept in Redis beside its run's graph.

opportunity → skipped (why) | admitted → queued → diagnosing → declined | queued →
repairing | queued → rewriting → corrected | abandoned | error (why) → reinjected →
executed → proven | unproven

`queued` means the request's next job (`job`) waits on its RQ queue for a worker; the
controller moves it to the job's running state when a worker starts it.

A request's id is derived from the terminal candidate and the route, so the same
opportunity seen twice (a re-delivered event, a second controller) is one request.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field
from redis.asyncio import Redis

from gencoach.config.scrubbing import scrub
from gencoach.constants import Keys
from gencoach.metrics import Recorder
from gencoach.metrics.catalog import REQUESTS as ARRIVALS
from gencoach.protocol import CoachingProposal
from gencoach.protocol.jobs import Diagnosis, JobName
from gencoach.service.router import AgentKind, Route

RequestState = Literal[
    "opportunity",
    "skipped",
    "admitted",
    "queued",
    "diagnosing",
    "declined",
    "repairing",
    "rewriting",
    "corrected",
    "abandoned",
    "error",
    "reinjected",
    "executed",
    "proven",
    "unproven",
]
IN_FLIGHT: frozenset[RequestState] = frozenset(
    {"admitted", "queued", "diagnosing", "repairing", "rewriting"}
)
# The state of a request whose job of that kind a worker has started.
RUNNING: dict[JobName, RequestState] = {
    "diagnosis": "diagnosing",
    "repair": "repairing",
    "rewrite": "rewriting",
}
ENDED: frozenset[RequestState] = frozenset({"skipped", "declined", "abandoned", "error"})

REQUESTS = "requests"

# Compare-and-set of one request: KEYS[1] the run's requests; ARGV: id, expected state,
# job ("" for none), attempt, the new JSON. Replies 1 when it replaced the request.
_MOVE_IF = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local stored = cjson.decode(raw)
local job = stored.job
if type(job) ~= 'string' then job = '' end
if stored.state ~= ARGV[2] or job ~= ARGV[3] or tostring(stored.attempt) ~= ARGV[4] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
return 1
"""

# Store one request; KEYS[1] the run's requests; ARGV: id, the new JSON. Replies how many
# transitions the request it replaced had recorded (0 for a new one).
_SAVE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not raw then return 0 end
local ok, stored = pcall(cjson.decode, raw)
if ok and type(stored) == 'table' and type(stored.history) == 'table' then
  return #stored.history
end
return 0
"""


class Transition(BaseModel):
    """One step of a request's life, with when it happened and why."""

    state: RequestState
    at: float
    reason: str | None = None


class CoachingRequest(BaseModel):
    """A coaching request and everything known about it so far."""

    request_id: str
    run_id: str
    route: Route
    kind: AgentKind | None
    type_coaching: str
    candidate_id: int
    candidate_gen_id: str
    stage_id: int
    human: bool = False
    state: RequestState
    reason: str | None = None
    attempt: int = 1
    job: JobName | None = None
    """The job the request waits for or runs (while queued or running)."""
    diagnosis: Diagnosis | None = None
    proposals: list[CoachingProposal] = Field(default_factory=list)
    rewrite: str | None = None
    attempt_ids: list[int] = Field(default_factory=list)
    history: list[Transition] = Field(default_factory=list)

    def moved(
        self, state: RequestState, reason: str | None = None, **changes: object
    ) -> CoachingRequest:
        """A copy in `state`, its transition recorded with the time and the reason."""
        step = Transition(state=state, at=time.time(), reason=reason)
        return self.model_copy(
            update={"state": state, "reason": reason, "history": [*self.history, step], **changes}
        )


def job_of(request: CoachingRequest) -> JobName | None:
    """The job a request waits for or runs, None when it has none in hand."""
    if request.state == "queued":
        return request.job
    return next((job for job, state in RUNNING.items() if state == request.state), None)


def request_id_for(run_id: str, candidate_id: int, route: str) -> str:
    """The id of the request a route opens on a candidate."""
    return f"{run_id}:{candidate_id}:{route}"


class RequestStore:
    """Reads and writes requests; creation is idempotent, updates are last-writer-wins.

    Each transition a request records is counted once, when it is stored
    (`gencoach_requests_total`), including those it passed through between two writes.
    """

    def __init__(self, client: Redis, keys: Keys, metrics: Recorder | None = None) -> None:
        self.client = client
        self.keys = keys
        self.metrics = metrics or Recorder()
        self._move_if = client.register_script(_MOVE_IF)
        self._save = client.register_script(_SAVE)

    def _arrived(self, request: CoachingRequest, recorded: int) -> None:
        """Count the transitions `request` holds beyond the first `recorded`."""
        for step in request.history[recorded:]:
            self.metrics.inc(ARRIVALS, request.route, step.state)

    def _key(self, run_id: str) -> str:
        return self.keys.run(run_id, REQUESTS)

    async def create(self, request: CoachingRequest) -> bool:
        """Store a new request; False (and nothing written) if its id already exists."""
        created = await self.client.hsetnx(
            self._key(request.run_id), request.request_id, scrub(request.model_dump_json())
        )
        if created:
            self._arrived(request, 0)
        return bool(created)

    async def save(self, request: CoachingRequest) -> None:
        """Store a request's new state."""
        recorded = await self._save(
            keys=[self._key(request.run_id)],
            args=[request.request_id, scrub(request.model_dump_json())],
        )
        self._arrived(request, int(recorded))

    async def move_if(self, current: CoachingRequest, moved: CoachingRequest) -> bool:
        """Store `moved` only if the stored request is still in `current`'s state, job and
        attempt (a result handled meanwhile wins); True if it was stored."""
        stored = await self._move_if(
            keys=[self._key(current.run_id)],
            args=[
                current.request_id,
                current.state,
                current.job or "",
                current.attempt,
                moved.model_dump_json(),
            ],
        )
        if stored:
            self._arrived(moved, len(current.history))
        return bool(stored)

    async def get(self, run_id: str, request_id: str) -> CoachingRequest | None:
        """One request, or None."""
        raw = await self.client.hget(self._key(run_id), request_id)
        return CoachingRequest.model_validate_json(raw) if raw is not None else None

    async def all(self, run_id: str) -> list[CoachingRequest]:
        """Every request of a run, oldest first."""
        raw = await self.client.hgetall(self._key(run_id))
        requests = [CoachingRequest.model_validate_json(value) for value in raw.values()]
        return sorted(requests, key=lambda r: (r.history[0].at if r.history else 0, r.request_id))

    async def in_flight(self, run_ids: list[str]) -> list[CoachingRequest]:
        """Requests admitted and not yet answered, across the given runs."""
        found: list[CoachingRequest] = []
        for run_id in run_ids:
            found.extend(r for r in await self.all(run_id) if r.state in IN_FLIGHT)
        return found


def describe(request: CoachingRequest) -> dict[str, object]:
    """A request as the API shows it: its state, why, and the time of each transition."""
    started = request.history[0].at if request.history else None
    return {
        "request_id": request.request_id,
        "route": request.route,
        "type_coaching": request.type_coaching,
        "candidate_id": request.candidate_gen_id,
        "stage_id": request.stage_id,
        "human": request.human,
        "state": request.state,
        "reason": request.reason,
        "attempt": request.attempt,
        "job": request.job,
        "diagnosis": request.diagnosis.model_dump() if request.diagnosis else None,
        "attempt_ids": request.attempt_ids,
        "history": [
            {
                "state": step.state,
                "at": step.at,
                "after_s": round(step.at - started, 3) if started is not None else 0.0,
                "reason": step.reason,
            }
            for step in request.history
        ],
    }
