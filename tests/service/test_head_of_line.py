"""No run's coaching waits on another's: runs whose agent hangs (accepts connections,
never answers) or cannot be reached are parked in their own lanes while a healthy run is
corrected; a registration that never succeeds ends the run's opportunities with why.
A real controller, real workers, a real hanging HTTP peer, all on loopback."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent_server import ScriptedAgent, ThreadedServer
from tests.support.coaching import PRESS_SW4, coaching_settings, report_known, settled
from tests.support.controller import ControllerProcess, wait_for
from tests.support.hanging_agent import HangingAgent
from tests.support.llm_server import ScriptedLLMServer, ScriptedReply, json_reply
from tests.support.metrics import scrape
from tests.support.processes import free_port
from tests.support.restartable_redis import RestartableRedis

pytestmark = pytest.mark.slow

HANGING_RUNS = 6
# The healthy run alone settles in a few seconds (longer on a loaded machine). A run behind
# a hanging agent waits for its registration until `registration_give_up_s` (300 s by
# default), so a healthy run that waited on one would take longer than this generous bound.
HEALTHY_BOUND_S = 120.0
# Long enough that every run below is applied while the first read of the agent is still
# under way, even on a loaded machine: a read that ended is not shared with later runs.
SHARED_GIVE_UP_S = 20


@pytest.fixture
def hanging_agent() -> Iterator[HangingAgent]:
    """An agent that accepts and never answers."""
    agent = HangingAgent()
    yield agent
    agent.close()


def _diagnosis() -> ScriptedReply:
    return json_reply(
        {"decision_index": 2, "reason": "sw9 is not in the task", "expected_decision": PRESS_SW4}
    )


def test_hanging_agents_do_not_delay_a_healthy_run(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    hanging_agent: HangingAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """Six runs whose agent hangs and two whose agent is unreachable, all reported first:
    the healthy run reported after them is corrected as if it were alone, and the others'
    terminals are shown parked in /metrics."""
    llm.script(_diagnosis())
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.start_workers()
    for index in range(HANGING_RUNS):
        report_known(redis_url, f"hang{index}", hanging_agent.url)
    for index in range(2):
        report_known(redis_url, f"gone{index}", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    report_known(redis_url, "healthy", scripted_agent.url)
    found = wait_for(
        settled(controller, "healthy", 3),
        timeout_s=HEALTHY_BOUND_S,
        what=f"the healthy run's three corrections, reported behind {HANGING_RUNS} runs whose "
        "agent hangs: a run waiting for its agent's registration must not delay another run",
    )
    elapsed_s = time.monotonic() - started
    # Coached: each request reinjected, or already gone on to be executed and proven.
    assert {r["state"] for r in found.values()} <= {"reinjected", "executed", "proven"}, found
    metrics = scrape(controller.url)
    parked = metrics.value("gencoach_terminals_in_hand", phase="parked")
    unhandled = metrics.value("gencoach_stream_unhandled_entries", stream="terminals")
    assert parked > 0, elapsed_s
    assert parked == unhandled, (parked, unhandled)  # every unacknowledged terminal is parked
    assert metrics.value("gencoach_terminal_slots", scope="all") == 32


def test_a_registration_that_never_succeeds_ends_the_opportunities_with_why(
    controller_factory: Callable[..., ControllerProcess],
    hanging_agent: HangingAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """After `registration_give_up_s` the run's opportunities end skipped, the reason says
    the agent was given up on; it is logged once and counted in /metrics."""
    controller = controller_factory(settings=coaching_settings(llm), registration_give_up_s=3)
    controller.start()
    report_known(redis_url, "hang", hanging_agent.url)
    found = wait_for(settled(controller, "hang", 3), timeout_s=30, what="three ended requests")
    for request in found.values():
        assert request["state"] == "skipped", found
        assert request["reason"].startswith(
            f"the agent's {request['route']} coaching is unavailable: the agent never answered "
            "GET /v1/info (gave up after 1 attempt over 3 s; last: no answer in time)"
        ), request["reason"]
    abandoned = [e for e in controller.log_events() if e["event"] == "agent.registration_abandoned"]
    assert len(abandoned) == 1, abandoned
    skips = scrape(controller.url).by("gencoach_opportunities_total", "reason", outcome="skipped")
    assert skips == {"kind_unavailable": 3}
    assert llm.requests == []


def test_runs_naming_one_unreachable_agent_share_its_registration(
    controller_factory: Callable[..., ControllerProcess],
    hanging_agent: HangingAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """Twenty runs behind one agent that never answers: the agent is asked once, not once
    per run, and the give-up ends every run's opportunities, logged once."""
    controller = controller_factory(
        settings=coaching_settings(llm), registration_give_up_s=SHARED_GIVE_UP_S
    )
    controller.start()
    runs = [f"shared-{n}" for n in range(20)]
    for run_id in runs:
        report_known(redis_url, run_id, hanging_agent.url)
    for run_id in runs:
        found = wait_for(
            settled(controller, run_id, 3), timeout_s=SHARED_GIVE_UP_S + 60, what=f"{run_id} ended"
        )
        assert {request["state"] for request in found.values()} == {"skipped"}, found
    assert len(hanging_agent.held) == 1, f"{len(hanging_agent.held)} reads of one agent's info"
    abandoned = [e for e in controller.log_events() if e["event"] == "agent.registration_abandoned"]
    assert len(abandoned) == 1, abandoned


def test_an_agent_that_comes_up_late_is_asked_again_and_its_run_coached(
    controller_factory: Callable[..., ControllerProcess],
    llm: ScriptedLLMServer,
    redis_url: str,
) -> None:
    """The run's agent refuses connections when the run starts: its registration is retried
    with backoff, its candidates stay parked, and once the agent listens they are coached."""
    llm.script(_diagnosis())
    agent = ScriptedAgent()
    server = ThreadedServer(agent.app())  # its port is chosen; nothing listens there yet
    controller = controller_factory(settings=coaching_settings(llm))
    controller.start()
    controller.start_workers()
    report_known(redis_url, "late", server.url)
    wait_for(
        lambda: any(e["event"] == "agent.registration_retry" for e in controller.log_events()),
        what="a registration retry",
    )
    wait_for(
        lambda: scrape(controller.url).value("gencoach_terminals_in_hand", phase="parked") > 0,
        what="the run's candidates parked",
    )
    server.start()
    try:
        found = wait_for(settled(controller, "late", 3), timeout_s=60, what="the late run coached")
    finally:
        server.stop()
    # Coached: each request reinjected, or already gone on to be executed and proven.
    assert {r["state"] for r in found.values()} <= {"reinjected", "executed", "proven"}, found


def test_registrations_lost_to_a_controller_kill_and_a_redis_restart_delay_no_other_run(
    scripted_agent: ScriptedAgent,
    hanging_agent: HangingAgent,
    llm: ScriptedLLMServer,
    tmp_path: Path,
) -> None:
    """Six runs' registration is in flight (their agent hangs) when the controller is
    SIGKILLed and Redis restarted (with its append-only file): the next controller asks
    their agent again, parks their terminals, and corrects a healthy run meanwhile."""
    llm.script(_diagnosis())
    server = RestartableRedis(tmp_path / "redis", aof=True)
    server.start()
    try:
        first = ControllerProcess(_folder(tmp_path, "first"), server.url, **_coaching(llm))
        first.start()
        for index in range(HANGING_RUNS):
            report_known(server.url, f"lost{index}", hanging_agent.url)
        wait_for(
            lambda: len(hanging_agent.held) >= 1,
            timeout_s=60,
            what="the first controller reading the hanging agent's info",
        )
        first.stop()  # SIGKILL: the registration in flight is lost with the process
        asked_by_first = len(hanging_agent.held)  # connections accepted, never closed
        server.restart(keep_data=True)

        second = ControllerProcess(_folder(tmp_path, "second"), server.url, **_coaching(llm))
        second.start()
        second.start_workers()
        report_known(server.url, "healthy", scripted_agent.url)
        found = wait_for(
            settled(second, "healthy", 3),
            timeout_s=HEALTHY_BOUND_S,
            what=f"the healthy run's three corrections, reported after {HANGING_RUNS} runs "
            "whose registration was lost: a lost registration must not delay another run",
        )
        assert {r["state"] for r in found.values()} <= {"reinjected", "executed", "proven"}, found
        wait_for(
            lambda: len(hanging_agent.held) > asked_by_first,
            timeout_s=60,
            what="the second controller asking the lost registrations' agent again",
        )
        parked = scrape(second.url).value("gencoach_terminals_in_hand", phase="parked")
        assert parked > 0, second.log_text()[-4000:]
        second.stop()
    finally:
        server.kill()


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return folder


def _coaching(llm: ScriptedLLMServer) -> dict[str, Any]:
    return {"settings": coaching_settings(llm)}
