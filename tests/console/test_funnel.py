"""The funnel read model: requests counted at every step their history reached."""

from __future__ import annotations

from typing import Any

from gencoach.console.funnel import job_stats, route_funnels
from gencoach.service.requests import CoachingRequest, Transition

_ids = iter(range(10_000))
TO_EXECUTED = ("opportunity", "admitted", "diagnosing", "repairing", "corrected", "reinjected",
               "executed")  # fmt: skip


def _request(route: str, *states: str | tuple[str, float], **fields: Any) -> CoachingRequest:
    history = []
    for index, state in enumerate(states):
        name, at = state if isinstance(state, tuple) else (state, float(index))
        reason = fields.pop("reason", None) if index == len(states) - 1 else None
        history.append(Transition(state=name, at=at, reason=reason))  # type: ignore[arg-type]
    return CoachingRequest(
        request_id=f"r:{next(_ids)}:{route}",
        run_id="r",
        route=route,  # type: ignore[arg-type]
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
    assert {
        k: failure[k]
        for k in ("seen", "skipped", "refused", "admitted", "corrected", "executed", "proven")
    } == {
        "seen": 5,
        "skipped": 1,
        "refused": 1,
        "admitted": 3,
        "corrected": 2,
        "executed": 2,
        "proven": 1,
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


def test_every_route_is_listed_and_people_have_their_own_row() -> None:
    """Unseen routes show zeros (rates unknown), and a human intervention is not counted
    in its route's automatic funnel."""
    rows = route_funnels(
        [_request("failure", "opportunity", "corrected", "reinjected", human=True)]
    )
    assert [row["route"] for row in rows] == [
        "format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite", "human",
    ]  # fmt: skip
    assert _row(rows, "failure")["seen"] == 0
    assert _row(rows, "failure")["rates"]["admitted"] is None
    human = _row(rows, "human")
    assert (human["seen"], human["admitted"], human["corrected"]) == (1, 1, 1)


def test_job_stats_time_each_job_state_and_count_its_failures() -> None:
    """LLM jobs (diagnosing, rewriting) and agent repairs are timed from their state to
    the next; one ending in error counts as an error of that kind."""
    stats = job_stats(
        [
            _request(
                "failure",
                ("admitted", 0.0),
                ("diagnosing", 1.0),
                ("repairing", 3.0),
                ("corrected", 3.5),
            ),
            _request("failure", ("admitted", 0.0), ("diagnosing", 1.0), ("error", 5.0)),
            _request("text_rewrite", ("admitted", 0.0), ("rewriting", 0.0), ("corrected", 1.0)),
        ]
    )
    llm = stats["llm"].to_json()
    assert (llm["calls"], llm["errors"]) == (3, 1)
    assert sorted(stats["llm"].durations_s) == [1.0, 2.0, 4.0]
    assert llm["latency_p50_s"] == 2.0
    agent = stats["agent"].to_json()
    assert (agent["calls"], agent["errors"], agent["latency_p50_s"]) == (1, 0, 0.5)
    assert job_stats([])["llm"].to_json()["latency_p90_s"] is None
