"""A MAGMA agent built only from magma-core: its protocol models and `mount_coaching_routes`.

It plays gencoach's reference `buttons` world ("Press sw3 twice, then sw1.") by reading
the instruction, with one deliberate mistake: its third press repeats the first button.
Its repair (a magma-core `CoachingService`) answers MAGMA-style proposals, whose
`extra_keys` is the payload `{"kind": "replace_decision", "decision": ...}`; a
reinjected input carrying `extra_keys["coaching"]` is answered with that decision. An
agent that ignored it would repeat its mistake, and its coached branch would fail.

Every input it receives is appended to the JSON-lines file named by `--log`; with
`--ignore-coaching` it answers reinjected inputs like any other (the flaw under test).

    python magma_agent.py --port 8751 --log inputs.jsonl
"""

from __future__ import annotations

import argparse
import re
import threading
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from magma_core.protocol.agent import (
    AgentDecision,
    AgentInfo,
    AgentInput,
    AgentOutput,
    AgentRequest,
    AgentResponse,
    ToolCall,
)
from magma_core.protocol.agent_coaching import (
    CoachingProposal,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)
from magma_core.workers.coaching_sessions import CoachingSessions, mount_coaching_routes

AGENT_ID = "interop-magma-agent"
TASK = re.compile(r"Press (\w+) twice, then (\w+)\.")
EXPECTED = re.compile(r'press_button\(id="(\w+)"\)')


def press(button: str) -> AgentDecision:
    """Press one button with panda."""
    return AgentDecision(
        tool_calls=[
            ToolCall(name="press_button", arguments={"id": button}, target_robot_name="panda")
        ]
    )


def plan_of(item: AgentInput) -> list[str]:
    """The three presses of the task: from memory, else from the instruction."""
    plan = item.memory.get("plan")
    if isinstance(plan, list):
        return [str(button) for button in plan]
    found = TASK.search(item.instruction.content)
    if found is None:
        return []
    first, second = found.groups()
    return [first, first, second]


def decide(item: AgentInput, apply_coaching: bool) -> tuple[AgentDecision, dict[str, object]]:
    """The next press and the memory after it; a correction under `coaching` wins."""
    plan = plan_of(item)
    done = item.memory.get("done", 0)
    done = done if isinstance(done, int) else 0
    coaching = item.extra_keys.get("coaching") if apply_coaching else None
    if isinstance(coaching, dict) and coaching.get("kind") == "replace_decision":
        decision = AgentDecision.model_validate(coaching["decision"])
    elif done < len(plan):
        # The deliberate mistake: the third press repeats the first button.
        decision = press(plan[0] if done == 2 else plan[done])
    else:
        decision = AgentDecision(say="done")
    return decision, {"plan": plan, "done": done + 1}


class Repair:
    """The agent's coaching service: the diagnosis's expected press, else its own plan."""

    def process(self, request: SpecializedCoachingRequest) -> SpecializedCoachingResponse:
        """MAGMA-style proposals at every offered point (the payload is the extra_keys)."""
        expected = request.diagnosis.expected_decision if request.diagnosis else None
        found = EXPECTED.search(expected or "")
        proposals = []
        for point in request.reinjection_points:
            item = point.input or next(
                step.input for step in request.trajectory if step.id == point.input_step_id
            )
            plan, done = plan_of(item), item.memory.get("done", 0)
            button = found.group(1) if found else plan[done] if done < len(plan) else None
            if button is None:
                continue
            payload = {"kind": "replace_decision", "decision": press(button).model_dump()}
            proposals.append(CoachingProposal(reinjection_point_id=point.id, extra_keys=payload))
        if not proposals:
            return SpecializedCoachingResponse(
                request_id=request.request_id, status="abandoned", reason="nothing to press"
            )
        return SpecializedCoachingResponse(
            request_id=request.request_id, status="corrected", proposals=proposals
        )


def create_app(log: Path, apply_coaching: bool = True) -> FastAPI:
    """The agent's FastAPI application."""
    app = FastAPI()
    lock = threading.Lock()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ready"}

    @app.get("/v1/info")
    def info() -> AgentInfo:
        return AgentInfo(
            agent_id=AGENT_ID,
            agent_version="1.0",
            specialized_coaching=["failure"],
            capabilities={"replace_decision": True},
        )

    @app.post("/v1/responses")
    def responses(request: AgentRequest) -> list[AgentOutput]:
        outputs = []
        for item in request.inputs:
            with lock, log.open("a") as out:
                out.write(item.model_dump_json() + "\n")
            decision, memory = decide(item, apply_coaching)
            outputs += [
                AgentOutput(
                    request_id=request.request_id,
                    source_id=item.id,
                    candidate_index=index,
                    status="completed",
                    memory=memory,
                    output=decision,
                )
                for index in range(item.num_outputs)
            ]
        AgentResponse(outputs).validate_request(request)
        return outputs

    mount_coaching_routes(app, CoachingSessions(supported=True), lambda worker: Repair())
    return app


def main() -> None:
    """Serve the agent on loopback."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--ignore-coaching", action="store_true")
    args = parser.parse_args()
    app = create_app(args.log, apply_coaching=not args.ignore_coaching)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
