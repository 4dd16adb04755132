"""A run's settled signal: gencoach answers a generator's probe on the run's branch stream,
after every order it published, once no coaching request can still publish one."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from importlib import resources

import httpx
import pytest
import redis

from gencoach.constants import Keys
from gencoach.errors import ContractError
from gencoach.protocol import BranchOrder, RunSettled
from gencoach.reporting.client import Reporter
from gencoach.reporting.outbox import parse_entry
from gencoach.service.coaching.lifecycle import MAY_ORDER, TRANSITIONS
from gencoach.settling import SCRIPT, ask_args, settle_keys
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import coaching_settings, succeed_after
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events
from tests.support.llm_server import ScriptedLLMServer, json_reply
from tests.support.streams import entries

KEYS = Keys()


def _report_known(reporter: Reporter, agent_url: str) -> None:
    """The known run's events up to its end, not finished (a failure among them)."""
    for kind, fields in known_run_events()[:-1]:
        if kind == "run.started":
            fields = {**fields, "agent_url": agent_url}
        reporter.emit(kind, **fields)


def _run(controller: ControllerProcess, run_id: str) -> dict[str, object]:
    return httpx.get(f"{controller.url}/v1/runs/{run_id}").json()


def _entries(client: redis.Redis, run_id: str) -> list[BranchOrder | RunSettled]:
    return [parse_entry(fields) for _, fields in entries(client, KEYS.branches(run_id))]


def test_the_scripts_states_that_may_order_are_the_lifecycles() -> None:
    """`lua/settle.lua` holds back an answer for exactly the states `lifecycle.MAY_ORDER`
    names, and those are the states from which a request can still reach `reinjected`."""
    table = re.search(r"local MAY_ORDER = \{(.*?)\}", SCRIPT, re.DOTALL)
    assert table is not None
    assert set(re.findall(r"(\w+) = true", table.group(1))) == set(MAY_ORDER)

    def reaches_reinjected(state: str, seen: frozenset[str] = frozenset()) -> bool:
        targets = TRANSITIONS[state]  # type: ignore[index]
        return "reinjected" in targets or any(
            reaches_reinjected(t, seen | {state}) for t in targets if t not in seen | {state}
        )

    assert {s for s in TRANSITIONS if reaches_reinjected(s)} == set(MAY_ORDER)


def test_the_script_waits_for_routing_and_for_requests_that_may_order(
    redis_client: redis.Redis,
) -> None:
    """A probe is answered only once its terminals are routed and no request may still
    order; the answer is one `run.settled` entry naming the probe's seq, and a request
    that ends answers a waiting probe."""
    script = redis_client.register_script(
        resources.files("gencoach").joinpath("lua/settle.lua").read_text()
    )
    keys = settle_keys(KEYS, "r1")
    assert script(keys=keys, args=["check", "r1"]) == b"none"
    assert script(keys=keys, args=ask_args("r1", 7, ["c4:executed"])) == b"routing"
    redis_client.hset(KEYS.requests("r1"), "q1", json.dumps({"state": "diagnosing"}))
    assert script(keys=keys, args=["routed", "r1", "c4:executed"]) == b"coaching"
    assert _entries(redis_client, "r1") == []
    redis_client.hset(KEYS.requests("r1"), "q1", json.dumps({"state": "reinjected"}))
    assert script(keys=keys, args=["check", "r1"]) == b"settled"
    assert script(keys=keys, args=["check", "r1"]) == b"settled"
    assert _entries(redis_client, "r1") == [RunSettled(run_id="r1", through_seq=7)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ask", "r1", "seven", "[]"], "the last seq must be an integer, got seven"),
        (["ask", "r1", "7", "{"], "the terminals must be a JSON list"),
        (["settle", "r1"], "unknown settle operation settle"),
    ],
)
def test_a_malformed_probe_is_refused_with_its_reason(
    redis_client: redis.Redis, args: list[str], message: str
) -> None:
    """A probe the script cannot read is refused, naming what is wrong, and writes nothing."""
    script = redis_client.register_script(SCRIPT)
    with pytest.raises(redis.ResponseError, match=message):
        script(keys=settle_keys(KEYS, "r1"), args=args)
    assert redis_client.exists(KEYS.settle("r1")) == 0


def test_an_entry_that_is_neither_an_order_nor_an_answer_is_named() -> None:
    """A branch-stream entry without `order` or `settled` is refused with the fields it has."""
    with pytest.raises(ContractError, match="holds 'order' or 'settled', not junk"):
        parse_entry({b"junk": b"{}"})


@pytest.mark.slow
def test_a_run_without_coaching_settles_as_soon_as_its_terminals_are_routed(
    controller: ControllerProcess, redis_url: str, scripted_agent: ScriptedAgent
) -> None:
    """With coaching off (no agent registration to wait for), the generator's probe is
    answered once its terminals are routed; the API shows the run settled through that
    seq, and a new event makes the reporter ask again."""
    with Reporter("quiet", redis_url=redis_url) as generator:
        _report_known(generator, scripted_agent.url)
        assert generator.wait_settled(timeout_s=120)
        body = _run(controller, "quiet")
        assert (body["settled"], body["settled_seq"]) == (True, generator.next_seq - 1)
        generator.emit("run.finished")
        assert not generator.settled
    wait_for(lambda: _run(controller, "quiet")["state"] != "active", what="the run finished")
    assert _run(controller, "quiet")["settled"] is True


@pytest.mark.slow
def test_an_order_comes_before_the_answer_and_the_branch_is_waited_for(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    """A failure's order is on the stream before the run's settled answer: waiting returns
    False with the order in hand; once its branch is executed and proven the run settles,
    and every answer on the stream follows every order."""
    llm.script(
        json_reply({"decision_index": 2, "reason": "sw9 is wrong", "expected_decision": None})
    )
    settings = coaching_settings(llm, format=False, suboptimal=False)
    controller = controller_factory(settings=settings)
    controller.start()
    controller.start_workers()
    with Reporter("loop", redis_url=redis_url) as generator:
        _report_known(generator, scripted_agent.url)
        orders: list[BranchOrder] = []

        def settled_or_ordered() -> bool:
            if generator.wait_settled(timeout_s=1):
                return True
            orders.extend(generator.branch_orders())
            return bool(orders)

        wait_for(settled_or_ordered, timeout_s=120, what="the order")
        (order,) = orders
        succeed_after(generator, order)
        wait_for(lambda: generator.wait_settled(timeout_s=1), timeout_s=120, what="settled")
        assert generator.branch_orders() == []
        assert _run(controller, "loop")["settled_seq"] == generator.next_seq - 1
    entries = _entries(redis_client, "loop")
    assert isinstance(entries[0], BranchOrder)
    assert all(isinstance(entry, RunSettled) for entry in entries[1:])
    assert entries[-1] == RunSettled(run_id="loop", through_seq=generator.next_seq - 1)
