"""The run the browser tests watch, and a generator that executes its coached branches."""

from __future__ import annotations

import threading
from typing import Any

from gencoach.protocol import BranchOrder
from gencoach.reporting.client import Reporter

SUCCESS = {"event": "success", "state": "optimal"}
FAILURE = {"event": "failure", "state": "exceeded"}
STAGE = {"id": 0, "goal": "press sw0 then sw4", "target_tool_calls": 2, "max_tool_calls": 4}
TOOLS = [
    {
        "name": "press_button",
        "description": "Press a button once with the robot.",
        "arguments": {"id": {"description": "id of the button to press", "type": "str"}},
    }
]


def _press(button: str) -> dict[str, Any]:
    call = {"name": "press_button", "arguments": {"id": button}, "target_robot_name": "panda"}
    return {"say": "", "tool_calls": [call]}


def report_run(redis_url: str, run_id: str, agent_url: str) -> None:
    """A run whose second step fails its stage (two decisions: the LLM diagnoses)."""
    with Reporter(run_id, redis_url=redis_url) as report:
        report.emit(
            "run.started",
            agent_url=agent_url,
            scenario="buttons",
            target="sw0-sw4",
            target_kind="button_sequence",
            task_description="press sw0, then sw4",
            generator={"name": "browser-test", "version": "1.0"},
        )
        user = {"type": "user", "content": "press sw0, then sw4"}
        report.emit("situation.created", situation_id="S0", parent_candidate_id=None,
                    stage=STAGE, input={"id": 0, "instruction": user, "tools": TOOLS})  # fmt: skip
        report.emit("candidate.created", candidate_id="c0", situation_id="S0",
                    response_status="completed", output=_press("sw0"))  # fmt: skip
        report.emit("candidate.executed", candidate_id="c0", status="ongoing")
        env = {"type": "env", "content": "panda: press_button succeed"}
        report.emit("situation.created", situation_id="S1", parent_candidate_id="c0",
                    stage=STAGE, input={"id": 1, "instruction": env, "tools": TOOLS})  # fmt: skip
        report.emit("candidate.created", candidate_id="c1", situation_id="S1",
                    response_status="completed", output=_press("sw9"))  # fmt: skip
        report.emit("candidate.executed", candidate_id="c1", status="error", stage_end=FAILURE)


class BranchExecutor:
    """A generator's branch loop in a thread: once released, every order ends in success."""

    def __init__(self, redis_url: str, run_id: str) -> None:
        self.redis_url = redis_url
        self.run_id = run_id
        self.release = threading.Event()
        self.executed: list[BranchOrder] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BranchExecutor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        waiting: list[BranchOrder] = []
        with Reporter(self.run_id, redis_url=self.redis_url, start_seq=1000) as generator:
            while not self._stop.is_set():
                waiting.extend(generator.branch_orders(block_s=0.2))
                if not self.release.is_set():
                    continue
                for order in waiting:
                    generator.emit(
                        "candidate.executed",
                        candidate_id=order.candidate_id,
                        status="optimal",
                        stage_end=SUCCESS,
                    )
                    self.executed.append(order)
                waiting.clear()
                generator.flush()
