"""A coaching request's life: its states and the transitions allowed between them, written
down once (`TRANSITIONS`).

The decider (`gencoach.service.coaching.decider`) chooses every move, and
`RequestStore.apply` refuses, before writing, any the table does not list;
docs/coaching.md shows the same table (a test keeps the two the same).
"""

from __future__ import annotations

import itertools
from typing import Final, Literal

from gencoach.protocol.jobs import JobName

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

FAILED: Final[frozenset[RequestState]] = frozenset({"declined", "abandoned", "error"})
TERMINAL: Final[frozenset[RequestState]] = frozenset({"skipped", *FAILED, "proven", "unproven"})
# Ended without a branch to prove.
ENDED: Final[frozenset[RequestState]] = frozenset({"skipped", *FAILED})
IN_FLIGHT: Final[frozenset[RequestState]] = frozenset(
    {"admitted", "queued", "diagnosing", "repairing", "rewriting"}
)
# The state of a request whose job of that kind a worker has started.
RUNNING: Final[dict[JobName, RequestState]] = {
    "diagnosis": "diagnosing",
    "repair": "repairing",
    "rewrite": "rewriting",
}
# A request in one of these states may still publish a branch order; in any other, its
# orders (if it has any) are already on the run's branch stream (`gencoach.settling`).
# These are also the states reconciliation watches: a request past them waits only for
# its branches' outcome, which the run's events report (and its end settles).
MAY_ORDER: Final[frozenset[RequestState]] = frozenset({"opportunity", *IN_FLIGHT, "corrected"})

# A job's result may arrive while its request is still `queued` (a fast job, seen ended
# before started), so `queued` moves wherever its running state would.
TRANSITIONS: Final[dict[RequestState, frozenset[RequestState]]] = {
    "opportunity": frozenset({"skipped", "admitted"}),
    "admitted": frozenset({"queued", "corrected", *FAILED}),
    "queued": frozenset({"queued", "diagnosing", "repairing", "rewriting", "corrected", *FAILED}),
    "diagnosing": frozenset({"queued", *FAILED}),
    "repairing": frozenset({"queued", "corrected", *FAILED}),
    "rewriting": frozenset({"queued", "corrected", *FAILED}),
    "corrected": frozenset({"reinjected", "abandoned", "error"}),
    "reinjected": frozenset({"executed", "abandoned", "error"}),
    "executed": frozenset({"proven", "unproven"}),
    **{state: frozenset() for state in TERMINAL},
}


class IllegalTransition(ValueError):  # noqa: N818 - named for what it refuses
    """A move the table does not allow; nothing was written."""

    def __init__(
        self, request_id: str, source: str, target: str, allowed: frozenset[RequestState]
    ) -> None:
        super().__init__(
            f"request {request_id}: {source} cannot move to {target} (allowed: "
            f"{', '.join(sorted(allowed)) or 'nothing, it is terminal'})"
        )
        self.source = source
        self.target = target


def check_opening(request_id: str, state: RequestState) -> None:
    """Raise IllegalTransition unless a new request starts as an opportunity."""
    if state != "opportunity":
        raise IllegalTransition(request_id, "(new)", state, frozenset({"opportunity"}))


def check_path(request_id: str, states: list[RequestState]) -> None:
    """Raise IllegalTransition unless each state of `states` may follow the one before."""
    for source, target in itertools.pairwise(states):
        if target not in TRANSITIONS[source]:
            raise IllegalTransition(request_id, source, target, TRANSITIONS[source])
