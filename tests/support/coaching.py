"""Helpers for coaching tests: the controller's settings, reporting, reading requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from gencoach.graph import SavedGraph, read_save
from gencoach.protocol import BranchOrder
from gencoach.reporting.client import Reporter
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events, own_coaching
from tests.support.llm_server import ScriptedLLMServer
from tests.support.saves import save_complete

PRESS_SW0 = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
    ],
}
"""A decision pressing sw0, as a generator reports it."""

PRESS_SW4 = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw4"}, "target_robot_name": "panda"}
    ],
}
"""The scripted agent's right decision at its second step, as a diagnosis names it."""

SETTLED = frozenset(
    {"reinjected", "executed", "proven", "unproven", "skipped", "declined", "abandoned", "error"}
)


def coaching_settings(llm: ScriptedLLMServer, **routes: bool) -> dict[str, Any]:
    """Settings that enable coaching with the scripted LLM as the one backend."""
    return {
        "coaching": {"enabled": True, "lease_s": 5, "routes": routes},
        "backends": {
            "llm": {
                "type": "openai",
                "endpoint": llm.endpoint,
                "default_model": "scripted",
                "timeout_s": 10,
                "max_retries": 0,
                "headers": {"Authorization": "Bearer llm-secret"},
            }
        },
        "workers": {"processes": 2, "job_timeout_s": 60},
    }


# The known run reports a coached branch of attempt 1 (its S4): the request whose
# reinjection takes attempt 1 is proven by it at once, so "reinjected" may read "proven".
REINJECTED_IN_KNOWN_RUN = frozenset({"reinjected", "proven"})


def reinjection_states(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each route's state, "reinjected" for a request of the known run that got that far."""
    return {
        route: "reinjected" if r["state"] in REINJECTED_IN_KNOWN_RUN else r["state"]
        for route, r in found.items()
    }


def report_known(
    redis_url: str, run_id: str, agent_url: str, *, with_own_coaching: bool = True
) -> None:
    """Report the known run (not finished) with the given agent; without its own coached
    alternative (S_e, c8) for a run whose save is audited."""
    with Reporter(run_id, redis_url=redis_url) as reporter:
        for kind, fields in known_run_events()[:-1]:
            if not with_own_coaching and own_coaching(fields):
                continue
            if kind == "run.started":
                fields = {**fields, "agent_url": agent_url}
            reporter.emit(kind, **fields)


def requests_of(controller: ControllerProcess, run_id: str) -> dict[str, dict[str, Any]]:
    """The run's requests by route, as `GET /v1/runs/{id}/requests` shows them."""
    response = httpx.get(f"{controller.url}/v1/runs/{run_id}/requests")
    if response.status_code != 200:
        return {}
    return {item["route"]: item for item in response.json()["requests"]}


def request_in_state(
    controller: ControllerProcess, run_id: str, route: str, state: str
) -> Callable[[], Any]:
    """A condition: the run's request of `route` is in `state`; its value is the request."""

    def check() -> Any:
        request = requests_of(controller, run_id).get(route)
        return request if request is not None and request["state"] == state else None

    return check


def request_reached(
    controller: ControllerProcess, run_id: str, route: str, state: str
) -> Callable[[], Any]:
    """A condition: the run's request of `route` has been in `state`, whether it is still
    there or has moved on (a `reinjected` request may be proven within milliseconds, before
    a poll sees it); its value is the request."""

    def check() -> Any:
        request = requests_of(controller, run_id).get(route)
        if request is None:
            return None
        passed = [step["state"] for step in request["history"]]
        return request if state in (request["state"], *passed) else None

    return check


def branch_orders(reporter: Reporter, count: int, timeout_s: float = 15.0) -> list[BranchOrder]:
    """The run's first `count` branch orders, as its generator reads them."""
    orders: list[BranchOrder] = []

    def enough() -> bool:
        orders.extend(reporter.branch_orders(block_s=0.2))
        return len(orders) >= count

    wait_for(enough, timeout_s=timeout_s, what=f"{count} branch order(s)")
    return orders


def two_step_run(
    reporter: Reporter, prefix: str, stage: dict[str, Any], end: dict[str, str]
) -> None:
    """Report a root decision that goes on, then one that ends the stage with `end`."""
    emit = reporter.emit
    user = {"type": "user", "content": f"{prefix}: press sw0"}
    emit("situation.created", situation_id=f"{prefix}-s0", parent_candidate_id=None, stage=stage,
         input={"id": len(prefix) * 100, "instruction": user})  # fmt: skip
    emit("candidate.created", candidate_id=f"{prefix}-c0", situation_id=f"{prefix}-s0",
         response_status="completed", output=PRESS_SW0)  # fmt: skip
    emit("candidate.executed", candidate_id=f"{prefix}-c0", status="ongoing")
    feedback = {"id": len(prefix) * 100 + 1, "instruction": {"type": "env", "content": "{}"}}
    emit("situation.created", situation_id=f"{prefix}-s1", parent_candidate_id=f"{prefix}-c0",
         stage=stage, input=feedback)  # fmt: skip
    second = (
        {"say": "I am done", "tool_calls": []}
        if stage.get("text_only") or end["event"] == "no_action"
        else PRESS_SW0
    )
    emit("candidate.created", candidate_id=f"{prefix}-c1", situation_id=f"{prefix}-s1",
         response_status="completed", output=second)  # fmt: skip
    emit("candidate.executed", candidate_id=f"{prefix}-c1", status="error", stage_end=end)


def settled(controller: ControllerProcess, run_id: str, count: int) -> Callable[[], Any]:
    """A condition: the run has `count` requests, all ended; its value is the requests."""

    def check() -> Any:
        found = requests_of(controller, run_id)
        done = len(found) == count and all(r["state"] in SETTLED for r in found.values())
        return found if done else None

    return check


def succeed_after(generator: Reporter, order: BranchOrder) -> None:
    """Report a branch order's candidate executed and a next decision, `c9` in `S_f`,
    that ends the stage in an optimal success: the branch's attempt is proven."""
    attempt = order.attempt_id
    generator.emit("candidate.executed", candidate_id=order.candidate_id, status="ongoing")
    generator.emit(
        "situation.created",
        situation_id="S_f",
        parent_candidate_id=order.candidate_id,
        stage={"id": 0, "goal": "press sw0 then sw4"},
        input={"id": 9, "instruction": {"type": "env", "content": "{}"}},
        coaching_attempt_ids=[attempt],
    )
    generator.emit(
        "candidate.created",
        candidate_id="c9",
        situation_id="S_f",
        response_status="completed",
        output={"say": "done"},
        coaching_attempt_ids=[attempt],
    )
    generator.emit(
        "candidate.executed",
        candidate_id="c9",
        status="optimal",
        stage_end={"event": "success", "state": "optimal"},
    )
    generator.flush()


def complete_save(
    controller: ControllerProcess, run_id: str, timeout_s: float = 60.0
) -> SavedGraph:
    """The run's save, once the controller wrote it whole (`export_complete`)."""
    folder = controller.output_dir / run_id
    wait_for(lambda: save_complete(folder), timeout_s=timeout_s, what=f"the save of {run_id}")
    return read_save(folder)
