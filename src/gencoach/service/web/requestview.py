"""A coaching request as the API and the console show it (`request_view`), with how its
diagnosis compares with the generator's truth (`blame_of`)."""

from __future__ import annotations

from typing import Literal

from gencoach.service.coaching.lifecycle import FAILED
from gencoach.service.coaching.requests import CoachingRequest

DIAGNOSED_ROUTES: frozenset[str] = frozenset({"failure", "no_action", "exceeded", "suboptimal"})

Blame = Literal["right", "wrong", "declined", "none"]
"""How a diagnosis compares with the generator's truth: it blamed the faulty decision, an
other one, declined to blame any (suboptimal), or gave no diagnosis (abandoned, error)."""


def blame_of(request: CoachingRequest) -> Blame | None:
    """How the request's diagnosis compares with the truth; None when there is no truth to
    compare with, no diagnosis to make (format, rewrite, a person), or it was skipped."""
    if request.faulty_candidate_id is None or request.human or request.state == "skipped":
        return None
    if request.route not in DIAGNOSED_ROUTES:
        return None
    if request.state == "declined":
        return "declined"
    if request.diagnosis is None:
        return "none" if request.state in FAILED else None
    return "right" if request.diagnosis.step_id == request.faulty_candidate_id else "wrong"


def request_view(request: CoachingRequest) -> dict[str, object]:
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
        "max_attempts": request.max_attempts,
        "job": request.job,
        "diagnosis": request.diagnosis.model_dump() if request.diagnosis else None,
        "decision_source": request.proposals[0].decision_source if request.proposals else None,
        "faulty_candidate_id": request.faulty_gen_id,
        "blame": blame_of(request),
        "tokens": request.tokens,
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
