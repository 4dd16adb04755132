"""Branch orders made by hand, as gencoach publishes them, for the generator tests."""

from __future__ import annotations

import json
from typing import Any

import redis

from gencoach.constants import EVENT_FIELD, ORDER_FIELD, Keys
from gencoach.protocol import BranchOrder
from gencoach.service.coaching.requests import CoachingRequest
from gencoach.settling import SCRIPT, settle_keys
from gencoach.sim import EpisodeState
from tests.support.streams import entries

Json = dict[str, Any]


def streamed_events(client: redis.Redis, run_id: str) -> list[Json]:
    """The events of one run on the events stream, in stream order."""
    events = [
        json.loads(fields[EVENT_FIELD.encode()]) for _, fields in entries(client, Keys().events)
    ]
    return [event for event in events if event["run_id"] == run_id]


def find_event(client: redis.Redis, run_id: str, kind: str, **fields: Any) -> Json | None:
    """The first streamed event of this type whose fields have these values."""
    for event in streamed_events(client, run_id):
        if event["type"] == kind and all(event.get(k) == v for k, v in fields.items()):
            return event
    return None


def branch_order(
    run_id: str,
    anchor: Json,
    decision: Json,
    memory: Json,
    *,
    attempt_id: int = 7,
    kind: str = "replacement",
    name: str = "coached",
) -> BranchOrder:
    """An order to execute `decision` from the anchor situation (its situation.created event)."""
    coached_input = {**anchor["input"], "extra_keys": {"coaching": {"kind": "replace_decision"}}}
    return BranchOrder.model_validate(
        {
            "branch_id": f"{name}|{kind}",
            "run_id": run_id,
            "anchor": {"kind": kind, "situation_id": anchor["situation_id"]},
            "situation_id": f"{name}:s",
            "candidate_id": f"{name}:c",
            "input": coached_input,
            "candidate": {
                "request_id": f"{name}:reinject",
                "source_id": anchor["input"]["id"],
                "candidate_index": 0,
                "status": "completed",
                "memory": memory,
                "internal_steps": [],
                "output": decision,
                "error": None,
            },
            "coaching": {"type_coaching": "failure:diagnosis", "coaching_role": "fixed_node"},
            "attempt_id": attempt_id,
        }
    )


def saved_state(client: redis.Redis, input_id: int, run_id: str = "r") -> EpisodeState:
    """The world state the generator saved for an input id of a run."""
    raw = client.hget(Keys().teacher_state(run_id), str(input_id))
    assert raw is not None, f"no state saved for input {input_id}"
    return EpisodeState.model_validate_json(raw)


def publish(client: redis.Redis, order: BranchOrder) -> None:
    """Append the order to its run's branch stream, as gencoach does."""
    client.xadd(Keys().branches(order.run_id), {ORDER_FIELD: order.model_dump_json()})


def hold_settling(client: redis.Redis, run_id: str) -> None:
    """Stand for a correction gencoach is still preparing, in a test that hands the generator
    its order itself: a `corrected` request, so the run is not settled before the order."""
    request = CoachingRequest(
        request_id=f"{run_id}:held",
        run_id=run_id,
        route="failure",
        kind="failure",
        type_coaching="failure:diagnosis",
        candidate_id=0,
        candidate_gen_id="held",
        stage_id=0,
        state="corrected",
    ).moved("corrected")
    client.hset(Keys().requests(run_id), request.request_id, request.model_dump_json())


def publish_held(client: redis.Redis, order: BranchOrder) -> None:
    """Publish the order of the correction `hold_settling` stood for, as gencoach does: the
    order first, then the request past ordering (and the run's probe checked)."""
    publish(client, order)
    key = Keys().requests(order.run_id)
    held = CoachingRequest.model_validate_json(client.hget(key, f"{order.run_id}:held") or "")
    client.hset(key, held.request_id, held.moved("reinjected").model_dump_json())
    script = client.register_script(SCRIPT)
    script(keys=settle_keys(Keys(), order.run_id), args=["check", order.run_id])
