"""`GET /v1/runs` on a real controller: pages that never skip nor repeat a run while runs
start and finish, filters applied in Redis, counts that add up with `/metrics` and
`gencoach status` through state changes and expiry, and bad parameters refused."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest
import redis

from gencoach.constants import Keys
from gencoach.status.snapshot import parse
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED

pytestmark = pytest.mark.slow


def _unanswered_agents(count: int) -> tuple[tuple[str, ...], list[socket.socket]]:
    """Agent URLs nothing can answer while the sockets live: each port is bound, never
    listened on, so no other process of the suite can serve an agent there (a real agent
    there would announce its id and file the run under it instead of its URL)."""
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        held.append(sock)
    return tuple(f"http://127.0.0.1:{sock.getsockname()[1]}" for sock in held), held


AGENTS, _HELD_PORTS = _unanswered_agents(2)
SCENARIOS = ("buttons", "colors", "stack")


def _started(run_id: str, index: int) -> dict[str, Any]:
    return {
        **RUN_STARTED,
        "type": "run.started",
        "run_id": run_id,
        "seq": 0,
        "scenario": SCENARIOS[index % len(SCENARIOS)],
        "agent_url": AGENTS[index % len(AGENTS)],
    }


def _finished(run_id: str) -> dict[str, Any]:
    return {"type": "run.finished", "run_id": run_id, "seq": 1}


def _post(url: str, events: list[dict[str, Any]]) -> None:
    response = httpx.post(f"{url}/v1/events", json=events, timeout=10)
    assert response.status_code == 202, response.text


def _start(url: str, run_ids: list[str]) -> None:
    """Start runs 30 at a time: the controller registers every new run's agent at once."""
    for first in range(0, len(run_ids), 30):
        batch = run_ids[first : first + 30]
        _post(url, [_started(run_id, first + index) for index, run_id in enumerate(batch)])
        wanted = first + len(batch)
        wait_for(
            lambda n=wanted: _listed(url, limit=1)["total"] >= n, what=f"{wanted} runs indexed"
        )


def _listed(url: str, **params: Any) -> dict[str, Any]:
    response = httpx.get(f"{url}/v1/runs", params=params, timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _walk(
    url: str, limit: int, between: Callable[[], None] = lambda: None, **filters: Any
) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = _listed(url, limit=limit, **({"cursor": cursor} if cursor else {}), **filters)
        seen.extend(run["run_id"] for run in page["runs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
        between()


def _metrics_runs(url: str) -> dict[str, float]:
    return parse(httpx.get(f"{url}/metrics", timeout=10).text).runs


def test_a_walk_through_the_pages_lists_every_run_once_while_runs_start_and_finish(
    controller: ControllerProcess,
) -> None:
    """Runs starting and finishing between pages change nothing of the walk: every run
    there at its start is listed exactly once, no run twice, newest first."""
    url = controller.url
    first = [f"walk-{index:03d}" for index in range(150)]
    _start(url, first)
    rng = random.Random(30)
    unfinished = list(first)
    added: list[str] = []

    def meanwhile() -> None:
        new = [f"late-{len(added) + index:03d}" for index in range(3)]
        added.extend(new)
        ending = [unfinished.pop(rng.randrange(len(unfinished))) for _ in range(4)]
        _post(url, [_started(run_id, index) for index, run_id in enumerate(new)])
        _post(url, [_finished(run_id) for run_id in ending])

    seen = _walk(url, 7, meanwhile)
    assert len(seen) == len(set(seen)), "a run was listed twice"
    assert set(first) <= set(seen), f"missed: {sorted(set(first) - set(seen))}"
    assert set(seen) <= set(first) | set(added)
    finished = 150 - len(unfinished)
    wait_for(
        lambda: (
            _listed(url, limit=1)["counts"]
            == {"active": len(unfinished) + len(added), "finished": 0, "saved": finished}
        ),
        what="every finished run saved",
    )


def test_filters_apply_together_and_counts_add_up_with_metrics_and_status(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis
) -> None:
    """State, scenario and agent filters list exactly their runs; the counts of
    `GET /v1/runs`, `/metrics` and `gencoach status` agree as runs finish, are saved and
    expire, and expired runs leave the index."""
    # Saved runs live long enough for the checks below on a loaded machine, then expire.
    controller = controller_factory(saved_ttl_s=20, housekeeping_s=0.5)
    controller.start()
    url = controller.url
    run_ids = [f"filter-{index:02d}" for index in range(60)]
    _start(url, run_ids)
    ending = run_ids[::4]
    _post(url, [_finished(run_id) for run_id in ending])
    wait_for(
        lambda: _listed(url, limit=1)["counts"] == {"active": 45, "finished": 0, "saved": 15},
        what="15 runs saved",
    )
    for index, scenario in enumerate(SCENARIOS):
        agent = AGENTS[index % len(AGENTS)]
        expected = {
            run_id
            for position, run_id in enumerate(run_ids)
            if position % len(SCENARIOS) == index
            and position % len(AGENTS) == index % 2
            and run_id not in ending
        }
        found = _walk(url, 4, state="active", scenario=scenario, agent=agent)
        assert sorted(found) == sorted(expected), (scenario, agent)
        page = _listed(url, state="active", scenario=scenario, agent=agent, limit=1)
        assert page["total"] == len(expected)
    saved = _walk(url, 100, state="saved")
    assert sorted(saved) == sorted(ending)
    assert _metrics_runs(url) == {"active": 45, "finished": 0, "saved": 15}
    done = subprocess.run(
        [sys.executable, "-m", "gencoach", "status", "--url", url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "60 in all: 45 active, 0 finished, 15 saved" in done.stdout, done.stdout
    # Saved runs' keys expire after 20 s: they leave the index and every count.
    wait_for(
        lambda: _listed(url, limit=1)["counts"] == {"active": 45, "finished": 0, "saved": 0},
        timeout_s=60,
        what="the saved runs expired",
    )
    assert _metrics_runs(url) == {"active": 45, "finished": 0, "saved": 0}
    assert _listed(url, limit=1000)["total"] == 45
    entries = cast(list[bytes], redis_client.hkeys(Keys().runs_index("entries")))
    assert sorted(item.decode() for item in entries) == sorted(set(run_ids) - set(ending))
    assert not redis_client.zcard(Keys().runs_index("expiries"))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "0"}, "limit must be an integer from 1 to 1000; got '0'"),
        ({"limit": "1001"}, "limit must be an integer from 1 to 1000; got '1001'"),
        ({"limit": "ten"}, "limit must be an integer from 1 to 1000; got 'ten'"),
        ({"state": "done"}, "state must be one of active, finished, saved; got 'done'"),
        ({"cursor": "not-a-cursor"}, "cursor 'not-a-cursor' is not one this API gave out"),
        ({"cursor": "WyJ4IiwxXQ"}, "cursor 'WyJ4IiwxXQ' is not one this API gave out"),
    ],
)
def test_bad_parameters_are_400_with_a_message(
    controller: ControllerProcess, params: dict[str, str], message: str
) -> None:
    """A limit out of range, an unknown state or a cursor the API never gave is a 400
    whose detail names it, on the API and on the console's view alike."""
    for path in ("/v1/runs", "/console/api/runs"):
        response = httpx.get(f"{controller.url}{path}", params=params)
        assert response.status_code == 400, response.text
        assert response.json() == {"detail": message}


def test_a_run_whose_index_entry_was_lost_is_indexed_again_by_the_reconciler(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis
) -> None:
    """With the runs index wiped (as a crash between a run's write and the index's would
    leave it), the controller's check of the runs it saw open lists them again."""
    # Only the reconciler repairs: it checks the runs it saw open, a slice each pass.
    controller = controller_factory(housekeeping_s=3600)
    controller.start()
    _start(controller.url, ["kept-a", "kept-b"])
    redis_client.delete(*redis_client.keys("gencoach:runs:*"))
    assert _listed(controller.url)["total"] == 0
    wait_for(
        lambda: (
            sorted(run["run_id"] for run in _listed(controller.url)["runs"]) == ["kept-a", "kept-b"]
        ),
        timeout_s=30,
        what="the reconciler to index the runs again",
    )
    assert _metrics_runs(controller.url) == {"active": 2, "finished": 0, "saved": 0}
