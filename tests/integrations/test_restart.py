"""A generator killed (SIGKILL) while it holds branch orders it has not executed, then started
again on the same campaign: its runs resume, and each unfinished order is executed once."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any

import pytest
import redis

from gencoach.constants import ORDER_FIELD, Keys
from tests.support.agent_server import ScriptedAgent
from tests.support.controller import wait_for
from tests.support.lake import lake_order, walker
from tests.support.processes import kill_tree
from tests.support.streams import reported_events

pytest.importorskip("gymnasium")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CAMPAIGN = "slow"
RUNS = (f"{CAMPAIGN}-0", f"{CAMPAIGN}-1")
ORDERS = 10  # per run


def generator(
    agent: str, redis_url: str, grace_s: float, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """`gencoach sim gym` on the slow lake, two runs of the campaign at once."""
    command = [sys.executable, "-m", "gencoach", "sim", "gym"]
    command += ["tests.integrations.slowlake:SlowLake", "--agent", agent, "--redis-url"]
    command += [redis_url, "--runs", "2", "--concurrency", "2", "--campaign", CAMPAIGN]
    command += ["--branch-grace-s", str(grace_s)]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def pending(client: redis.Redis) -> int:
    """Orders the campaign's consumer read and has not acknowledged, over its runs."""
    return sum(client.xpending(Keys().branches(run), CAMPAIGN)["pending"] for run in RUNS)


def executions(client: redis.Redis, candidates: set[str]) -> Counter[str]:
    """How many times each of these candidates was reported executed."""
    seen = reported_events(client)
    return Counter(
        e["candidate_id"]
        for e in seen
        if e["type"] == "candidate.executed" and e["candidate_id"] in candidates
    )


def test_a_restarted_generator_executes_each_unfinished_order_exactly_once(
    redis_url: str, redis_client: redis.Redis, scripted_agent: ScriptedAgent, tmp_path: Path
) -> None:
    """Killed with orders read and not executed, the generator restarted on its campaign
    resumes both runs from their remembered situations, re-reads the orders it had not
    acknowledged, and every order ends executed exactly once, with no seq or id reused."""
    scripted_agent.answer = walker
    log_path = tmp_path / "generator.log"
    with log_path.open("ab") as log:
        first = generator(scripted_agent.url, redis_url, 120, log)
        try:

            def both_ended() -> bool:
                ended = {e["run_id"] for e in reported_events(redis_client) if e.get("stage_end")}
                return ended == set(RUNS)

            wait_for(both_ended, timeout_s=60, what=f"both runs' stage ends ({log_path})")
            seen = reported_events(redis_client)
            situations = {(e["run_id"], e["situation_id"]): e for e in seen if "input" in e}
            coached: set[str] = set()
            for run in RUNS:
                for number in range(1, ORDERS + 1):
                    made = lake_order("s1", number, "right", situations[(run, "s1")], run)
                    redis_client.xadd(Keys().branches(run), {ORDER_FIELD: json.dumps(made)})
                    coached.add(made["candidate_id"])

            def holding() -> bool:
                done = sum(executions(redis_client, coached).values())
                return done >= 1 and pending(redis_client) >= 2

            wait_for(holding, timeout_s=60, what="an order executed and others held")
        finally:
            kill_tree(first.pid)
            first.wait(10)
        before = executions(redis_client, coached)
        assert 0 < sum(before.values()) < len(coached), "the kill came too late to test"
        # The grace is what the restarted generator waits after a branch for the next order:
        # generous, since on a loaded machine the next one may take seconds to run.
        second = generator(scripted_agent.url, redis_url, 10, log)
        assert second.wait(180) == 0, log_path.read_text()
    output = log_path.read_text()
    assert "2 resumed" in output, output
    assert executions(redis_client, coached) == dict.fromkeys(coached, 1)
    assert pending(redis_client) == 0
    seen = reported_events(redis_client)
    for run in RUNS:
        mine = [e for e in seen if e["run_id"] == run]
        kinds = Counter(e["type"] for e in mine)
        assert (kinds["run.started"], kinds["run.finished"]) == (1, 1)
        seqs = [e["seq"] for e in mine]
        assert seqs == list(range(len(seqs))), "seqs go on without a gap or a repeat"
        ids: list[Any] = [e["situation_id"] for e in mine if e["type"] == "situation.created"]
        ids += [e["candidate_id"] for e in mine if e["type"] == "candidate.created"]
        assert len(ids) == len(set(ids))
