"""Intake under bad input and crashes: dead letters with reasons, exactly-once application."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from gencoach.constants import CONTROLLER_GROUP, EVENT_FIELD, Keys
from gencoach.graph import read_save
from gencoach.reporting.client import Reporter
from gencoach.service.store.graphstore import META
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events
from tests.support.metrics import scrape
from tests.support.streams import entries, read_group

pytestmark = pytest.mark.slow

KEYS = Keys()


def _publish_runs(redis_url: str, run_ids: list[str]) -> None:
    for run_id in run_ids:
        with Reporter(run_id, redis_url=redis_url, batch_size=50) as reporter:
            for kind, fields in known_run_events():
                reporter.emit(kind, **fields)


def _all_saved(output_dir: Path, run_ids: list[str]) -> bool:
    for run_id in run_ids:
        config = output_dir / run_id / "config.json"
        if not config.is_file() or not json.loads(config.read_text())["export_complete"]:
            return False
    return True


def _assert_complete_saves(output_dir: Path, run_ids: list[str]) -> None:
    for run_id in run_ids:
        save = read_save(output_dir / run_id)
        assert len(save.situations) == 5, run_id
        assert sorted(save.candidates) == list(range(8)), run_id


def _dead(client: redis.Redis) -> list[dict[str, str]]:
    dead = entries(client, KEYS.dead_events)
    return [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in dead]


def test_bad_events_are_dead_lettered_and_intake_goes_on(
    controller: ControllerProcess, redis_client: redis.Redis, redis_url: str
) -> None:
    """Malformed, unknown-reference and duplicate events never stop intake; each bad one
    lands on the dead-letter stream with its payload and a reason a person can act on (an
    event of a run that never started once no pending event could start it)."""
    redis_client.xadd(KEYS.events, {EVENT_FIELD: "{not json"})
    redis_client.xadd(KEYS.events, {"payload": "x"})
    redis_client.xadd(
        KEYS.events, {EVENT_FIELD: json.dumps({"type": "run.finished", "run_id": "r", "seq": "1"})}
    )
    redis_client.xadd(
        KEYS.events,
        {EVENT_FIELD: json.dumps({"type": "run.finished", "run_id": "ghost", "seq": 0})},
    )
    _publish_runs(redis_url, ["good"])
    _publish_runs(redis_url, ["good"])  # every event again: duplicates, ignored
    wait_for(lambda: _all_saved(controller.output_dir, ["good"]), what="the good run's save")
    _assert_complete_saves(controller.output_dir, ["good"])
    dead = wait_for(
        lambda: len(_dead(redis_client)) == 4 and _dead(redis_client), what="4 dead letters"
    )
    reasons = [entry["reason"] for entry in dead]
    assert reasons[0].startswith("invalid GenerationEvent: GenerationEvent: invalid JSON")
    assert reasons[1] == "the stream entry has no 'event' field"
    assert json.loads(dead[1]["event"]) == {"payload": "x"}
    assert "seq: Input should be a valid integer" in reasons[2]
    assert reasons[3] == (
        "run.finished seq 0 of run ghost: unknown run: no run.started event was applied for "
        "it; it waited for the run's run.started, which was never applied"
    )
    assert dead[0]["event"] == "{not json"
    assert redis_client.xpending(KEYS.events, CONTROLLER_GROUP)["pending"] == 0

    # /metrics counts them: what never parsed has no type; a valid event keeps its own.
    samples = scrape(controller.url)
    assert samples.by("gencoach_events_total", "type", outcome="dead_lettered") == {
        "unparsed": 3,
        "run.finished": 1,
    }
    assert samples.by("gencoach_events_total", "type", outcome="parked") == {"run.finished": 1}
    events = len(known_run_events())
    assert samples.total("gencoach_events_total", outcome="applied") == events
    assert samples.total("gencoach_events_total", outcome="duplicate") == events
    assert samples.value("gencoach_dead_letters") == 4


def test_terminals_carry_the_storage_id_the_step_applying_them_knew(
    controller: ControllerProcess, redis_client: redis.Redis, redis_url: str
) -> None:
    """A terminal forwarded by the step that applied its event names the candidate's
    storage id (its router need not look it up); one forwarded again for a duplicate
    names none, and is routed all the same (looked up)."""
    _publish_runs(redis_url, ["good"])
    _publish_runs(redis_url, ["good"])  # duplicates: their terminals forwarded again
    wait_for(lambda: _all_saved(controller.output_dir, ["good"]), what="the good run's save")
    terminals = [fields for _, fields in entries(redis_client, KEYS.terminals)]
    assert terminals, "the known run has terminal candidates"
    stored = redis_client.hgetall(KEYS.run("good", "candidate_ids"))
    first, again = terminals[: len(terminals) // 2], terminals[len(terminals) // 2 :]
    assert [fields[b"candidate_id"] for fields in first] == [
        fields[b"candidate_id"] for fields in again
    ]
    for fields in first:
        assert fields[b"storage_id"] == stored[fields[b"candidate_id"]]
    assert all(b"storage_id" not in fields for fields in again)
    wait_for(
        lambda: redis_client.xpending(KEYS.terminals, CONTROLLER_GROUP)["pending"] == 0,
        what="every terminal routed and acknowledged",
    )


def test_sigkill_mid_stream_then_restart_applies_everything_once(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """A controller killed with SIGKILL mid-batch and restarted saves every run whole, once."""
    run_ids = [f"run-{index:02d}" for index in range(40)]
    _publish_runs(redis_url, run_ids)
    controller = controller_factory(batch_size=7)
    controller.start()
    wait_for(
        lambda: any((controller.output_dir / r).exists() for r in run_ids), what="a first save"
    )
    controller.signal(signal.SIGKILL)
    controller.wait()
    assert not _all_saved(controller.output_dir, run_ids), "killed too late to test anything"
    pending = redis_client.xpending(KEYS.events, CONTROLLER_GROUP)["pending"]
    controller.start()
    # Saved as Redis says, not only on disk: a run whose save the stop interrupted before
    # it was marked saved is saved once more after the restart (its folder rewritten).
    wait_for(
        lambda: (
            _all_saved(controller.output_dir, run_ids)
            and all(
                redis_client.hget(KEYS.run(run_id, META), "state") == b"saved" for run_id in run_ids
            )
        ),
        timeout_s=60,
        what="all saves, marked saved",
    )
    _assert_complete_saves(controller.output_dir, run_ids)
    assert redis_client.xpending(KEYS.events, CONTROLLER_GROUP)["pending"] == 0
    assert _dead(redis_client) == []
    print(f"entries pending at the kill: {pending}")


def test_a_dead_consumers_run_started_is_taken_over_and_its_run_loses_nothing(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """A consumer that read a run's run.started and died (no lease) holds it while a live
    controller reads the run's other events: they wait for it instead of being refused,
    the dead consumer's entry is taken over once it has idled `lease_s`, long before
    `claim_idle_s`, and the run is saved whole with no dead letter."""
    _publish_runs(redis_url, ["orphaned"])
    redis_client.xgroup_create(KEYS.events, CONTROLLER_GROUP, id="0", mkstream=True)
    ((_, taken),) = read_group(redis_client, CONTROLLER_GROUP, "vanished-host", KEYS.events, 1)
    assert json.loads(taken[EVENT_FIELD.encode()])["type"] == "run.started"
    controller = controller_factory(lease_s=1, gap_timeout_s=60, claim_idle_s=600)
    controller.start()
    wait_for(lambda: _all_saved(controller.output_dir, ["orphaned"]), what="the orphaned run")
    _assert_complete_saves(controller.output_dir, ["orphaned"])
    assert _dead(redis_client) == []
    assert redis_client.xpending(KEYS.events, CONTROLLER_GROUP)["pending"] == 0
    taken_over = [e for e in controller.log_events() if e["event"] == "stream.taken_over"]
    assert [(e["dead"], e["count"]) for e in taken_over] == [("vanished-host", 1)], taken_over
    consumers = {c["name"] for c in redis_client.xinfo_consumers(KEYS.events, CONTROLLER_GROUP)}
    assert consumers == {b"test-controller"}


def test_sigterm_finishes_the_batch_and_exits_cleanly(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis, redis_url: str
) -> None:
    """SIGTERM stops intake after the batch in hand, acknowledged, with exit 0; a restart
    then finishes the rest with nothing lost."""
    run_ids = [f"term-{index:02d}" for index in range(40)]
    _publish_runs(redis_url, run_ids)
    controller = controller_factory(batch_size=7)
    controller.start()
    wait_for(
        lambda: any((controller.output_dir / r).exists() for r in run_ids), what="a first save"
    )
    started = time.monotonic()
    controller.signal(signal.SIGTERM)
    assert controller.wait() == 0
    assert time.monotonic() - started < 5
    assert redis_client.xpending(KEYS.events, CONTROLLER_GROUP)["pending"] == 0
    assert any(event["event"] == "controller.stopped" for event in controller.log_events())
    controller.start()
    # Saved as Redis says, not only on disk: a run whose save the stop interrupted before
    # it was marked saved is saved once more after the restart (its folder rewritten).
    wait_for(
        lambda: (
            _all_saved(controller.output_dir, run_ids)
            and all(
                redis_client.hget(KEYS.run(run_id, META), "state") == b"saved" for run_id in run_ids
            )
        ),
        timeout_s=60,
        what="all saves, marked saved",
    )
    _assert_complete_saves(controller.output_dir, run_ids)
