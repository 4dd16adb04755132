"""`/metrics` scraped while a real loop runs: a controller process, two worker processes
with the teacher backend, the reference generator and a scripted agent. The counters
follow what the generator reported and what coaching did with it."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis

from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions
from tests.support.agent_server import ScriptedAgent
from tests.support.coaching import complete_save
from tests.support.controller import ControllerProcess, wait_for
from tests.support.generation_log import read_log
from tests.support.metrics import Samples, scrape
from tests.support.players import buttons_player
from tests.support.saves import assert_audit_clean
from tests.support.teacher import follow_the_diagnosis, teacher_controller

pytestmark = [pytest.mark.slow, pytest.mark.asyncio, pytest.mark.timeout(150)]

RUN = "metrics-loop"
QUEUES = {"gencoach-diagnosis", "gencoach-repair"}


@pytest.fixture
def coaching_controller(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """A controller with the teacher backend and two worker processes; killed after."""
    with teacher_controller(tmp_path, redis_url) as process:
        yield process


def applied(samples: Samples) -> float:
    return samples.total("gencoach_events_total", outcome="applied")


async def test_counters_follow_the_events_and_the_coaching(
    coaching_controller: ControllerProcess,
    scripted_agent: ScriptedAgent,
    redis_url: str,
    tmp_path: Path,
) -> None:
    url = coaching_controller.url
    before = scrape(url)
    assert applied(before) == 0
    assert before.by("gencoach_queue_jobs", "queue").keys() == QUEUES
    assert before.value("gencoach_runs", state="active") == 0

    scripted_agent.answer = buttons_player("wrong_button")
    scripted_agent.coaching_replies.extend([follow_the_diagnosis] * 20)
    log = tmp_path / "run.jsonl"
    options = GenerationOptions(
        agent_url=scripted_agent.url,
        redis_url=redis_url,
        run_id=RUN,
        log_path=log,
        branch_grace_s=120.0,  # a bound: the run ends on gencoach's settled answer
        max_wall_s=100.0,
    )
    during: list[float] = []
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            while True:
                during.append(applied(await anyio.to_thread.run_sync(scrape, url)))
                await anyio.sleep(0.2)

        tg.start_soon(watch)
        await run_generation(options)
        tg.cancel_scope.cancel()
    assert during == sorted(during), "a counter went down between scrapes"
    assert any(seen > 0 for seen in during), "no scrape saw the loop under way"

    reported = Counter(event["type"] for event in read_log(log))

    def caught_up() -> Samples | None:
        samples = scrape(url)
        counted = samples.by("gencoach_events_total", "type", outcome="applied")
        proven = samples.value("gencoach_proofs_total", route="failure", outcome="proven")
        # Workers flush their counts every second, apart from the controller's: wait for the
        # jobs' counts and the teacher's calls too (a proof may be counted before the flush
        # that carries its diagnosis's call).
        jobs = samples.by("gencoach_jobs_total", "kind")
        calls = samples.total("gencoach_llm_calls_total", backend="teacher", outcome="ok")
        worked = jobs.get("repair", 0) >= 3 and jobs.get("diagnosis", 0) >= 3 and calls >= 3
        return samples if counted == reported and proven == 3 and worked else None

    samples = wait_for(caught_up, timeout_s=30, what="the events, proofs and jobs to be counted")

    # The coaching funnel: four failures, three proven, the fourth abandoned by rule.
    assert samples.by("gencoach_opportunities_total", "outcome", route="failure") == {"admitted": 4}
    requests = samples.by("gencoach_requests_total", "state", route="failure")
    assert {state: requests[state] for state in ("opportunity", "admitted", "proven")} == {
        "opportunity": 4,
        "admitted": 4,
        "proven": 3,
    }
    assert requests["abandoned"] == 1
    assert samples.value("gencoach_reinjections_total", route="failure", outcome="branched") == 3
    assert samples.value("gencoach_branch_orders_total", route="failure") == 3

    # The workers' counts reached Redis: jobs, and the teacher's calls with their latency.
    jobs = samples.by("gencoach_jobs_total", "kind")
    assert jobs["repair"] >= 3, jobs
    assert jobs["diagnosis"] >= 3, jobs
    calls = samples.total("gencoach_llm_calls_total", backend="teacher", outcome="ok")
    assert calls >= 3
    timed = samples.value(
        "gencoach_llm_call_duration_seconds_count", backend="teacher", outcome="ok"
    )
    assert timed == calls
    assert samples.value("gencoach_job_duration_seconds_count", kind="repair") == jobs["repair"]

    # Bounded labels: nothing names a run, a request or a candidate.
    values = {value for _, labels in samples for _, value in labels}
    assert not [value for value in values if RUN in value or ":" in value], values

    # The campaign's save holds the coaching invariants.
    assert assert_audit_clean(complete_save(coaching_controller, RUN).folder).proven_attempts == 3

    # Gauges measured at the scrape.
    assert samples.total("gencoach_runs") == 1
    assert samples.total("gencoach_queue_workers") >= 2
    assert ("gencoach_controller_loop_lag_seconds", frozenset()) in samples
    assert samples.by("gencoach_stream_unhandled_entries", "stream").keys() == {
        "events",
        "terminals",
        "results",
    }

    # `gencoach status` prints the same funnel.
    command = [sys.executable, "-m", "gencoach", "status", "--url", url]
    with anyio.fail_after(30):
        done = await anyio.run_process(command, check=False, env=os.environ | {"COLUMNS": "200"})
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    funnel = {stage: rows.get(stage) for stage in ("seen", "admitted", "proven", "failed")}
    assert funnel == {"seen": ["4"], "admitted": ["4"], "proven": ["3"], "failed": ["1"]}
