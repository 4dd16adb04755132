"""gencoach's reference agent driven by magma-gen's own client code.

The decision request goes through magma-gen's agent manager send path
(`BaseAgentManager.send_to_container`); the session and repair through `RemoteCoaching`;
the reinjection through `BaseAgentCoachingManager._create_injected_node` and
`BaseAgentManager._send_coaching_pending`, exactly as MAGMA-GEN reinjects. Only the
graph manager and the coach that receives the repair are stand-ins here: they hold
state MAGMA-GEN's full generation loop would, and no logic under test.
"""

from __future__ import annotations

import json
import logging
import threading
from itertools import count
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from magma_core.protocol.agent import AgentInput, AgentRequest
from magma_core.protocol.agent_coaching import (
    CoachingBackendConfig,
    CoachingLog,
    CoachingSessionConfig,
)
from magma_core.simulation.agents import BadAgentAnswer
from magma_core.simulation.data_structures import (
    RobotToolStatus,
    Situation,
    ToolErrorFlag,
    UserInstruction,
)
from magma_core.simulation.skills import SkillStateRef
from magma_gen.agents.base.agent_coaching import BaseAgentCoachingManager
from magma_gen.agents.base.generic_agent import BaseAgentManager
from magma_gen.coaching.coach_base import CoachingBuildContext
from magma_gen.coaching.coach_structure import (
    CoachingRequest,
    CoachingTerminalEvent,
    DiagnosisResult,
    RepairFocus,
    TrajectoryStep,
)
from magma_gen.coaching.remote import RemoteCoaching
from magma_gen.graph import AgentNode, CompleteSituationNode, NodeInjection

from conftest import Processes, answers, free_port, wait_until

LOG = logging.getLogger("interop")
BAD_CALL = ToolErrorFlag.BAD_CALL


class GraphManagerStandIn:
    """What the reinjection path asks of MAGMA-GEN's graph manager: ids and bookkeeping."""

    def __init__(self) -> None:
        self.ids = count(100)
        self.root_nodes: list[Any] = []
        self.running: list[AgentNode] = []
        self.observer = None

    def get_new_node_id(self) -> int:
        return next(self.ids)

    def add_new_running_nodes(self, nodes: list[AgentNode]) -> None:
        self.running += nodes


class CoachStandIn:
    """Receives what `RemoteCoaching` completes or aborts, as MAGMA-GEN's coach would."""

    def __init__(self) -> None:
        self.logger = LOG
        self.shared_state = self
        self.injections: list[NodeInjection] = []
        self.aborted: list[Any] = []
        self.done = threading.Event()

    def has_request(self, request_id: int) -> bool:
        return True

    def _complete_request(self, request: Any, *, fixed_node: Any, main: Any, extras: Any) -> None:
        self.injections = [main, *extras]
        self.done.set()

    def _abort_request(self, request: Any, *, fixed_node: Any = None) -> None:
        self.aborted.append(request)
        self.done.set()


def _manager(agent_url: str, graph: GraphManagerStandIn) -> BaseAgentManager:
    """magma-gen's agent manager, with only what its send paths read."""
    manager = BaseAgentManager.__new__(BaseAgentManager)
    manager.agents_container_url = agent_url
    manager.timeout = 30
    manager.logger = LOG
    manager.stop_requested = threading.Event()
    manager.graph_manager = graph
    manager.agent_coaching_manager = BaseAgentCoachingManager(graph, None, LOG)  # type: ignore[arg-type]
    return manager


@pytest.fixture
def reference_agent(gencoach_bin: Path, processes: Processes) -> str:
    """The URL of gencoach's reference agent (`gencoach agent serve`)."""
    port = free_port()
    processes.start("agent", [str(gencoach_bin), "agent", "serve", "--port", str(port)])
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: processes.check_alive() or answers(f"{url}/health"), 30, "the agent")
    return url


def _buttons_input(demo_saves: list[Path]) -> AgentInput:
    """A first input of the reference world's buttons task, from a demo save."""
    folder = next(folder for folder in demo_saves if "buttons" in folder.name)
    roots = json.loads((folder / "config.json").read_text())["roots"]
    record = json.loads((folder / f"{roots[0]}.json").read_text())
    return AgentInput.model_validate(record["input"])


def test_magma_gen_client_code_drives_the_reference_agent_through_a_reinjection(
    reference_agent: str, llm_stub: str, demo_saves: list[Path]
) -> None:
    """magma-gen sends a decision request, opens a session, asks a repair, reinjects the
    proposal under `extra_keys.coaching` and closes the session: the reference agent
    answers each, and its reinjected answer is the correction it proposed."""
    first = _buttons_input(demo_saves)
    root = CompleteSituationNode(
        situation=Situation(
            memory={},
            attributes=first.attributes,
            instruction=UserInstruction(first.instruction.content),
        ),
        stage_id=0,
        parent=None,
        skill_state_ref=None,  # type: ignore[arg-type]
    )
    root.tools = first.tools
    graph = GraphManagerStandIn()
    manager = _manager(reference_agent, graph)

    # The send path: one decision.
    request = AgentRequest(request_id=uuid4().hex, inputs=[root.agent_input()])
    (output,) = manager.send_to_container(request)
    assert output.status == "completed"
    node = AgentNode(root, 1, BadAgentAnswer("", "", "pending", root.get_id(), 1))
    node.apply_agent_output(output)
    node.set_output_skill_state_ref(SkillStateRef(1))
    root.add_child(node)
    assert not node.is_bad()

    # The session and the repair, as RemoteCoaching asks them.
    backend = CoachingBackendConfig(
        type="ollama", endpoint=llm_stub, default_model="stub",
        headers={"Content-type": "application/json"},
    )  # fmt: skip
    logs: list[CoachingLog] = []
    remote = RemoteCoaching(
        reference_agent, ["failure"], f"interop-{uuid4().hex[:8]}",
        CoachingSessionConfig(backends={"stub": backend}), logs.append,
    )  # fmt: skip
    target = first.instruction.content.split()[1]  # "Press sw3 twice, ...": sw3
    repair = f'panda.press_button(id="{target}")'
    coach = CoachStandIn()
    status = {"infos": "panda: press_button failed with message: unknown button",
              "failure_reason": "unknown button"}  # fmt: skip
    coaching_request = CoachingRequest(
        focus=RepairFocus.DIAGNOSIS, terminal_event=CoachingTerminalEvent.FAILURE,
        terminal_node=node, target_node=node, stage_id=0, request_type="unknown",
        traj_id=[node.id], status_dict=status,
        steps=[TrajectoryStep(
            node=node, diagnosable=True, in_current_stage=True,
            tool_statuses=[RobotToolStatus("panda", "unknown button", False, BAD_CALL)],
        )],
    )  # fmt: skip
    context = CoachingBuildContext(goal_description="press the buttons", tools=first.tools,
                                   stages_description=[])  # fmt: skip
    diagnosis = DiagnosisResult(1, "the wrong button was pressed", repair)
    try:
        assert remote.submit("failure", coaching_request, context, coach, diagnosis)  # type: ignore[arg-type]
        assert coach.done.wait(30), "RemoteCoaching never completed the repair"
        assert coach.aborted == [], [log.content for log in logs]
        injections = coach.injections
        assert {injection.anchor.value for injection in injections} == {
            "fixed_node", "recovery_node",
        }  # fmt: skip
        # No situation follows the bad call (it ended its stage): MAGMA-GEN builds the
        # recovery's from the terminal status, as gencoach builds it from the feedback a
        # generator reports with `candidate.executed` (docs/coaching.md, "Restart points"):
        # the status return as an `env` instruction, the memory after the call, the call's
        # input otherwise, with no inherited correction.
        recovery = next(i for i in injections if i.anchor.value == "recovery_node")
        after = recovery.input_situation.agent_input()
        assert (after.instruction.type, json.loads(after.instruction.content)) == ("env", status)
        assert after.memory == node.output_memory
        assert (after.tools, after.attributes) == (first.tools, first.attributes)
        assert "coaching" not in after.extra_keys
        expected = {
            "say": "",
            "tool_calls": [
                {"name": "press_button", "arguments": {"id": target}, "target_robot_name": "panda"}
            ],
        }
        for injection in injections:
            # The proposal's extra_keys is the payload itself, as MAGMA-GEN expects it; the
            # reference agent says where its decision came from (MAGMA-GEN passes it on).
            assert injection.extra_keys == {
                "kind": "replace_decision",
                "decision": expected,
                "decision_source": "expected_decision",
            }

            # The reinjection, as MAGMA-GEN makes it, and the agent's answer to it.
            coaching_manager = manager.agent_coaching_manager
            created = coaching_manager._create_injected_node(
                fixed_node=node, injection=injection, coaching_type="failure:diagnosis"
            )
            assert created.parent.extra_keys["coaching"] == injection.extra_keys
            answers_by_id = manager._send_coaching_pending([created])
            assert not created.is_bad(), created.answer.to_dict()
            decision = answers_by_id[created.id]
            assert [(call.name, call.arguments) for call in decision.get_action()] == [
                ("press_button", {"id": target})
            ]
    finally:
        remote.close()
    assert remote.session_deleted
