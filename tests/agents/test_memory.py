"""Memory: history and rules rebuilt after each decision; reinjected corrections skip the model."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gencoach.agents import Memory, create_agent_app, entry_decision
from gencoach.errors import ContractError
from gencoach.protocol import AgentInput, AgentInstruction, AgentResponse
from tests.agents.fakes import PRESS, EchoPolicy, info
from tests.agents.payloads import agent_input, request
from tests.support.agent_server import Serve

BEFORE: dict[str, Any] = {
    "history": [
        {"author": "USER", "content": "Press sw1 twice, then sw2."},
        {"author": "MODEL", "content": json.dumps(PRESS.model_dump(mode="json"))},
    ],
    "memory_list": ["never press sw5"],
    "scratch": {"kept": True},
}


def test_after_appends_the_instruction_and_the_decision() -> None:
    """Feedback is recorded as SYSTEM and the decision as MODEL JSON; rules and other keys stay."""
    memory = Memory.parse(BEFORE)
    after = memory.after(AgentInstruction(type="env", content="{}"), PRESS)
    data = after.to_json()
    history = data["history"]
    assert isinstance(history, list)
    assert history[-2:] == [
        {"author": "SYSTEM", "content": "{}"},
        {"author": "MODEL", "content": json.dumps(PRESS.model_dump(mode="json"))},
    ]
    assert data["memory_list"] == ["never press sw5"]
    assert data["scratch"] == {"kept": True}
    assert entry_decision(after.history[-1]) == PRESS
    assert memory.to_json() == BEFORE  # the input's memory is not changed


def test_a_malformed_memory_is_refused_with_its_field() -> None:
    """Rules that are not strings are refused, naming the rule."""
    with pytest.raises(ContractError) as caught:
        Memory.of(AgentInput.parse(agent_input(1, "go", memory={"memory_list": [3]})))
    assert caught.value.fields == ["memory_list.0"]


@pytest.mark.parametrize(
    ("payload", "decision"),
    [
        ({"kind": "replace_decision", "decision": PRESS.model_dump(mode="json")},
         PRESS.model_dump(mode="json")),
        ({"kind": "replace_say", "text": "blue"}, {"say": "blue", "tool_calls": []}),
    ],
)  # fmt: skip
def test_a_reinjected_correction_is_answered_without_the_policy(
    serve: Serve, payload: dict[str, Any], decision: dict[str, Any]
) -> None:
    """`replace_decision`/`replace_say` yield that decision for every candidate, history rebuilt."""
    policy = EchoPolicy(mode="crash")
    url = serve(create_agent_app(info(), policy))
    item = agent_input(
        4, '{"infos": "panda: press_button succeed"}', kind="env", memory=BEFORE, num_outputs=2
    )
    item["extra_keys"] = {"coaching": payload, "other": 1}
    response = httpx.post(f"{url}/v1/responses", json=request(item))
    assert response.status_code == 200
    answer = AgentResponse.parse(response.json())
    assert policy.calls == []
    for candidate in answer.root:
        assert candidate.status == "completed"
        assert candidate.output is not None
        assert candidate.output.model_dump(mode="json") == decision
        assert candidate.memory["history"] == [
            *BEFORE["history"],
            {"author": "SYSTEM", "content": item["instruction"]["content"]},
            {"author": "MODEL", "content": json.dumps(decision)},
        ]
        assert candidate.memory["memory_list"] == BEFORE["memory_list"]
        assert candidate.internal_steps[0]["origin"] == "coaching"
