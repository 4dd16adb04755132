"""The funnel read model: requests counted at every step their history reached."""

from __future__ import annotations

from typing import Any

from gencoach.console.funnel import job_stats, route_funnels
from gencoach.service.coaching.requests import CoachingRequest, JobRecord, Transition

_ids = iter(range(10_000))
TO_EXECUTED = ("opportunity", "admitted", "diagnosing", "repairing", "corrected", "reinjected",
               "executed")  # fmt: skip


def _request(route: str, *states: str | tuple[str, float], **fields: Any) -> CoachingRequest:
    history = []
    for index, state in enumerate(states):
        name, at = state if isinstance(state, tuple) else (state, float(index))
        reason = fields.pop("reason", None) if index == len(states) - 1 else None
        history.append(Transition(state=name, at=at, reason=reason))
    return CoachingRequest(
        request_id=f"r:{next(_ids)}:{route}",
        run_id="r",
        route=route,
        kind=None,
        type_coaching="failure:diagnosis",
        candidate_id=1,
        candidate_gen_id="c1",
        stage_id=0,
        state=history[-1].state,
        reason=history[-1].reason,
        history=history,
        **fields,
    )


def _row(rows: list[dict[str, Any]], route: str) -> dict[str, Any]:
    return next(row for row in rows if row["route"] == route)


def test_each_step_counts_requests_that_reached_it() -> None:
    """A proven request counts as admitted, corrected and executed too; rates divide by
    the step before."""
    rows = route_funnels(
        [
            _request("failure", *TO_EXECUTED, "proven"),
            _request("failure", *TO_EXECUTED, "unproven"),
            _request("failure", "opportunity", "admitted", "diagnosing", "declined"),
            _request(
                "failure",
                "opportunity",
                "skipped",
                reason="refused by the stage limits: pending 5 of 5",
            ),
            _request(
                "failure",
                "opportunity",
                "skipped",
                reason="the agent does not offer failure coaching",
            ),
        ]
    )
    failure = _row(rows, "failure")
    counts = ("seen", "skipped", "refused", "admitted", "corrected", "reinjected", "executed",
              "proven", "unproven", "failed", "open")  # fmt: skip
    assert {k: failure[k] for k in counts} == {
        "seen": 5,
        "skipped": 1,
        "refused": 1,
        "admitted": 3,
        "corrected": 2,
        "reinjected": 2,
        "executed": 2,
        "proven": 1,
        "unproven": 1,
        "failed": 1,
        "open": 0,
    }
    assert failure["skipped_by_reason"] == [
        {"reason": "the agent does not offer failure coaching", "count": 1}
    ]
    assert failure["rates"] == {
        "admitted": 0.6,
        "corrected": 0.6667,
        "executed": 1.0,
        "proven": 0.5,
    }


def test_a_request_still_working_or_awaiting_its_outcome_is_open() -> None:
    """Admitted = open + failed + proven + unproven, whatever step the open ones are at."""
    rows = route_funnels(
        [
            _request("failure", "opportunity", "admitted", "queued"),
            _request("failure", *TO_EXECUTED),
            _request("failure", *TO_EXECUTED, "proven"),
        ]
    )
    failure = _row(rows, "failure")
    assert (failure["admitted"], failure["open"], failure["executed"]) == (3, 2, 2)


def test_every_route_is_listed_and_people_have_their_own_row() -> None:
    """Unseen routes show zeros (rates unknown), and a human intervention is not counted
    in its route's automatic funnel."""
    rows = route_funnels(
        [_request("failure", "opportunity", "admitted", "corrected", "reinjected", human=True)]
    )
    assert [row["route"] for row in rows] == [
        "format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite", "human",
    ]  # fmt: skip
    assert _row(rows, "failure")["seen"] == 0
    assert _row(rows, "failure")["rates"]["admitted"] is None
    human = _row(rows, "human")
    assert (human["seen"], human["admitted"], human["corrected"], human["open"]) == (1, 1, 1, 1)


def test_job_stats_come_from_the_job_records_not_the_states() -> None:
    """A quick job that never showed its running state (queued -> corrected) still counts,
    with the time its worker measured; an error or abandoned job counts as an error."""

    def jobs(*records: tuple[str, str, float | None]) -> list[JobRecord]:
        return [
            JobRecord(job=job, attempt=1, status=status, duration_s=seconds)
            for job, status, seconds in records
        ]

    stats = job_stats(
        [
            _request(
                "failure", "admitted", "queued", "queued", "corrected",
                jobs=jobs(("diagnosis", "done", 1.0), ("repair", "done", 0.5)),
            ),
            _request(
                "failure", "admitted", "queued", "error",
                jobs=jobs(("diagnosis", "error", 4.0)),
            ),
            _request(
                "text_rewrite", "admitted", "queued", "corrected",
                jobs=jobs(("rewrite", "done", 2.0)),
            ),
            _request(
                "format", "admitted", "queued", "abandoned",
                jobs=jobs(("repair", "abandoned", None)),
            ),
        ]
    )  # fmt: skip
    llm, agent = stats["llm"].to_json(), stats["agent"].to_json()
    assert (llm["calls"], llm["errors"]) == (3, 1)
    assert sorted(stats["llm"].durations_s) == [1.0, 2.0, 4.0]
    assert (agent["calls"], agent["errors"], agent["latency_p50_s"]) == (2, 1, 0.5)
