"""Storing a request's next version directly, as the tests of the store's compare-and-set
need: the controller never does (it reports events, `RequestStore.apply`)."""

from __future__ import annotations

from dataclasses import replace

from gencoach.config import Limits
from gencoach.limits import Admission, admission_of, lease_ms
from gencoach.service.coaching.lifecycle import TERMINAL
from gencoach.service.coaching.requests import CoachingRequest, RequestStore


async def force_move(
    requests: RequestStore, current: CoachingRequest, moved: CoachingRequest
) -> bool:
    """Store `moved` if the stored request is still `current` (an end gives its slot back)."""
    ends = moved.state in TERMINAL and current.state != "opportunity"
    reply = await requests._call(current, moved, ["release" if ends else ""])
    return reply.outcome == "moved"


async def force_admit(
    requests: RequestStore,
    current: CoachingRequest,
    moved: CoachingRequest,
    limits: Limits,
    lease_s: float,
) -> Admission | None:
    """Take the request's slot under `limits` and store `moved`; None if `current` is stale."""
    args: list[str | int] = [
        "admit",
        lease_ms(lease_s),
        limits.max_pending_per_stage,
        limits.max_unproven_per_stage,
        int(moved.human),
        moved.stage_id,
    ]
    reply = await requests._call(current, moved, args)
    if reply.outcome == "stale":
        return None
    if reply.outcome == "moved":
        reply = replace(reply, outcome=reply.detail, detail="")
    return admission_of(reply, limits)


async def force_prove(
    requests: RequestStore, current: CoachingRequest, moved: CoachingRequest, attempt: int
) -> bool:
    """Count `attempt` proven and store `moved`, the first time only."""
    reply = await requests._call(current, moved, ["prove", attempt])
    return reply.outcome == "moved"
