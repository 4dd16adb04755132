"""Where a generation's events go, and how episodes become event fields.

`EventSender` sends a run's events to gencoach and/or a JSONL log; `stage_info`,
`task_description`, `active_errors` and `execution_record` make the event fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio

from gencoach.constants import DEFAULT_PREFIX
from gencoach.protocol import BranchOrder, parse_event
from gencoach.reporting.client import AsyncReporter
from gencoach.sim.episode import EpisodeState, StepResult
from gencoach.sim.injection import ActiveError
from gencoach.sim.scenarios import Scenario
from gencoach.sim.stages import Stage

# Events are sent when the recorder flushes, never by the reporter on its own, so
# every send happens under the recorder's lock and the stream keeps emission order.
_NEVER_FULL = 1 << 30
FLUSH_EVERY = 200
"""Buffered events that make `emit` flush on its own."""


def stage_info(stage: Stage) -> dict[str, Any]:
    """The `stage` field of a situation (a text-only stage has no tool-call budget)."""
    info = stage.describe()
    if info["max_tool_calls"] == 0:
        info["max_tool_calls"] = None
    return info


def task_description(scenario: Scenario, seed: int) -> dict[str, Any]:
    """The `task_description` field: MAGMA Core's object for the seed's instance (text,
    one description per stage, in the keys of `BaseStage.get_description()`, and a hint)."""
    stages = scenario.build(seed).stages
    return {
        "task_description": scenario.description,
        "stages_description": [
            {
                "goal_description": stage.goal,
                "instruction": stage.instruction,
                "stage_name": f"{scenario.name}.stage_{stage.id}",
                "target_tool_calls": stage.target_tool_calls,
                "max_tool_calls": stage.max_tool_calls,
                "request_type": "unknown",
                "empty_instruction": not stage.instruction,
                "linked_to_prev": stage.linked_to_prev,
                "text_only": stage.text_only,
                "composite": [],
            }
            for stage in stages
        ],
        "coaching_hint": stages[0].hint if stages else None,
    }


def active_errors(errors: list[ActiveError]) -> list[dict[str, Any]]:
    """The `active_errors` field: the injected failures of the stage so far."""
    return [error.model_dump(mode="json") for error in errors]


def execution_record(step: StepResult) -> dict[str, Any]:
    """The `execution` field, in the shape of MAGMA-GEN's step summary.

    `{per_robot_status: [{robot_name, mess, result, error_flag, mess_is_public}],
    stage_success, stage_state, tool_calls, forgiven_tool_calls, failure_reason,
    failure_diagnostics, reward}`: one status per executed call; `stage_success` is 1
    (finished), 0 (ongoing) or -1 (failed), `stage_state` 1 (optimal), 0 (acceptable) or
    -1 (exceeded), as MAGMA Core's enums; the counts are the stage's so far, injected
    failures counted and forgiven. A decision that ended its stage otherwise than by
    success has the reason, and `failure_diagnostics` says how (`event`) and how many of
    its calls were left unexecuted (`skipped_calls`).
    """
    end = step.outcome.stage_end
    failed = end is not None and end.event != "success"
    return {
        "per_robot_status": [
            {
                "robot_name": result.robot,
                "mess": result.message,
                "result": result.result,
                "error_flag": result.error_flag,
                "mess_is_public": False,
            }
            for result in step.results
        ],
        "stage_success": 0 if end is None else 1 if end.event == "success" else -1,
        "stage_state": _STAGE_STATES[end.state] if end is not None else 1,
        "tool_calls": step.tool_calls,
        "forgiven_tool_calls": step.forgiven_tool_calls,
        "failure_reason": (step.outcome.reason or None) if failed else None,
        "failure_diagnostics": (
            {"event": end.event, "skipped_calls": step.skipped_calls}
            if failed and end is not None
            else None
        ),
        "reward": None,
    }


# MAGMA Core's StageState values.
_STAGE_STATES = {"optimal": 1, "acceptable": 0, "exceeded": -1}


class EventSender:
    """Sends one run's events to gencoach and/or a JSONL log; saves states, reads orders.

    Events go to gencoach (Redis stream or HTTP API, through the client's reporter), to
    the log, or both. They are validated and numbered when emitted and sent in order:
    flushes are serialised, so a node never reaches gencoach before its parent. With
    Redis, the sender also saves each situation's world state (for the privileged
    teacher) and reads the run's branch orders. The log holds exactly the events, one
    JSON object per line, so it can be replayed into gencoach later (`POST /v1/events`).
    """

    def __init__(
        self,
        run_id: str,
        *,
        redis_url: str | None = None,
        api_url: str | None = None,
        api_token: str | None = None,
        key_prefix: str = DEFAULT_PREFIX,
        log_path: Path | None = None,
    ) -> None:
        if redis_url is not None and api_url is not None:
            raise ValueError("report through redis_url or api_url, not both")
        self.run_id = run_id
        self.log_path = log_path
        self._reporter: AsyncReporter | None = None
        if redis_url is not None or api_url is not None:
            self._reporter = AsyncReporter(
                run_id,
                redis_url=redis_url,
                api_url=api_url,
                token=api_token,
                key_prefix=key_prefix,
                batch_size=_NEVER_FULL,
            )
        self._by_redis = redis_url is not None
        self._seq = 0
        self._lines: list[str] = []
        self._buffered = 0
        self._lock = anyio.Lock()

    @property
    def reports(self) -> bool:
        """Whether events reach gencoach (else they only go to the log)."""
        return self._reporter is not None

    @property
    def receives_orders(self) -> bool:
        """Whether branch orders can be read (they travel on Redis only)."""
        return self._by_redis

    async def emit(self, event_type: str, **fields: Any) -> None:
        """Validate, number and buffer one event; a ContractError names a bad field."""
        if self._reporter is not None:
            seq = await self._reporter.emit(event_type, **fields)
        else:
            seq = self._seq
            parse_event({"type": event_type, "run_id": self.run_id, "seq": seq, **fields})
            self._seq += 1
        if self.log_path is not None:
            event = {"type": event_type, "run_id": self.run_id, "seq": seq, **fields}
            self._lines.append(json.dumps(event, ensure_ascii=False) + "\n")
        self._buffered += 1
        if self._buffered >= FLUSH_EVERY:
            await self.flush()

    async def flush(self) -> None:
        """Send the buffered events and append them to the log, in emission order."""
        async with self._lock:
            lines, self._lines, self._buffered = self._lines, [], 0
            # The log first: what could not be sent is still on disk.
            if lines and self.log_path is not None:
                async with await anyio.open_file(self.log_path, "a", encoding="utf-8") as log:
                    await log.write("".join(lines))
            if self._reporter is not None:
                await self._reporter.flush()

    async def save_state(self, input_id: int, state: EpisodeState, *, keep: bool = False) -> None:
        """Save a situation's world state under its input id (`keep`: only if none is saved)."""
        if self._reporter is None or not self._by_redis:
            return
        await self._reporter.save_teacher_state(input_id, state.model_dump(mode="json"), keep=keep)

    async def branch_orders(self, block_s: float) -> list[BranchOrder]:
        """Branch orders published since the last call, waiting up to `block_s` for one."""
        if self._reporter is None or not self._by_redis:
            return []
        return await self._reporter.branch_orders(block_s=block_s)

    @property
    def settled(self) -> bool:
        """Whether gencoach answered that no branch order can come through the last event."""
        return self._reporter is not None and self._reporter.settled

    async def ask_settled(self) -> None:
        """Send what is buffered (to the log too) and ask gencoach whether the run is settled;
        the answer is read with the branch orders."""
        await self.flush()
        if self._reporter is not None and self._by_redis:
            await self._reporter.ask_settled()

    async def aclose(self) -> None:
        """Send what is buffered and release connections."""
        try:
            await self.flush()
        finally:
            if self._reporter is not None:
                await self._reporter.aclose()

    async def __aenter__(self) -> Self:
        if self.log_path is not None:
            await anyio.Path(self.log_path).write_text("", encoding="utf-8")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
