"""The console's JSON routes on a real controller process, over the known run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis

from gencoach.console.sources import LiveSource
from gencoach.constants import Keys
from gencoach.protocol import CoachingLog
from gencoach.reporting.client import Reporter
from gencoach.service.coaching.requests import RequestStore
from gencoach.service.store.graphstore import GraphStore
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_events, known_run_events

pytestmark = pytest.mark.slow

TOKEN = "console-route-token"


@pytest.fixture
def controller(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> Iterator[ControllerProcess]:
    """A controller (coaching off) whose changes need a bearer token, with the known run."""
    process = ControllerProcess(
        tmp_path, redis_url, api={"token_env": "GC_ROUTE_TOKEN"}, env={"GC_ROUTE_TOKEN": TOKEN}
    )
    process.start()
    with Reporter("known", redis_url=redis_url) as reporter:
        for kind, fields in known_run_events()[:-1]:
            reporter.emit(kind, **fields)
    wait_for(
        lambda: httpx.get(f"{process.url}/v1/runs/known").json().get("situations") == 5,
        what="the known run's five situations",
    )
    yield process
    process.stop()


def _get(controller: ControllerProcess, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{controller.url}/console/api/{path}", params=params)


def test_the_page_and_its_assets_come_from_the_package(controller: ControllerProcess) -> None:
    """`/` is the console's page; its scripts are served as JavaScript; the session route
    says a token is required."""
    page = httpx.get(controller.url + "/")
    assert page.status_code == 200
    assert '<script type="module" src="/console/static/js/app.js">' in page.text
    script = httpx.get(controller.url + "/console/static/js/graph.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert _get(controller, "session").json()["mode"] == "live"
    assert _get(controller, "session").json()["token_required"] is True


def test_auth_route_applies_the_api_token_rule(controller: ControllerProcess) -> None:
    """No token: 401; a wrong one (even non-ASCII): 403; the right one: 200."""
    url = f"{controller.url}/console/api/auth"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert httpx.get(url, headers={b"Authorization": "Bearer é".encode()}).status_code == 403
    assert httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_runs_answer_304_while_nothing_changes_and_filter(controller: ControllerProcess) -> None:
    """A poll with the last ETag gets 304 and no body; filters narrow the list."""
    first = _get(controller, "runs")
    row = first.json()["runs"][0]
    assert (row["run_id"], row["state"], row["scenario"], row["situations"]) == (
        "known", "active", "buttons", 5,
    )  # fmt: skip
    again = httpx.get(
        f"{controller.url}/console/api/runs", headers={"If-None-Match": first.headers["ETag"]}
    )
    assert (again.status_code, again.content) == (304, b"")
    assert _get(controller, "runs", scenario="other").json()["runs"] == []
    assert _get(controller, "runs", state="active").json()["facets"]["agent"] == [
        "http://127.0.0.1:8751"
    ]


def test_graph_and_node_views(controller: ControllerProcess) -> None:
    """The tree keeps the coached alternative beside the original, and its header the
    task as the save describes it (and as one line) and the target with its kind; a node
    carries its input, stage end and generator ids; unknown runs and nodes are 404 with a
    message."""
    view = _get(controller, "graph", run="known").json()
    assert view["run"]["roots"] == [0]
    task = view["run"]["task_description"]
    assert task["task_description"] == "press sw0, then sw4; then say done"
    # The header's task line: the stages' goals, as on the runs page; the target apart.
    assert view["run"]["task"] == "press sw0 then sw4 · say done"
    assert (view["run"]["target"], view["run"]["target_kind"]) == ("sw0-sw4", "button_sequence")
    c1 = view["situations"][0]["candidates"][0]
    assert (c1["gen_id"], c1["links"]) == ("c1", [[1, "next"], [4, "alternative"]])
    coached = view["situations"][4]["candidates"][0]
    assert (coached["origin"], coached["attempts"], coached["stage_end"]) == (
        "coaching", [1], "success/optimal",
    )  # fmt: skip
    node = _get(controller, "node", run="known", candidate=3).json()
    assert node["candidate"]["gen_id"] == "c4"
    assert node["candidate"]["decision_line"] == 'panda.press_button(id="sw9")'
    assert node["situation"]["gen_id"] == "S_b"
    assert node["can_correct"] is True
    missing = _get(controller, "graph", run="nope")
    assert (missing.status_code, missing.json()["detail"]) == (404, "unknown run 'nope'")
    assert _get(controller, "node", run="known", candidate=99).status_code == 404


def test_funnel_and_stages_views(controller: ControllerProcess) -> None:
    """The funnel lists every route, the backends and the RQ queues; stages show the
    budgets in force and each active run."""
    funnel = _get(controller, "funnel").json()
    assert [row["route"] for row in funnel["routes"]][:2] == ["format", "failure"]
    assert {q["queue"] for q in funnel["queues"]} == {"gencoach-diagnosis", "gencoach-repair"}
    assert all(q["queued"] == 0 for q in funnel["queues"])
    stages = _get(controller, "stages").json()
    assert stages["budgets"]["effective"]["max_pending_per_stage"] == 5
    assert [run["run_id"] for run in stages["runs"]] == ["known"]


@pytest.mark.asyncio
async def test_logs_keep_the_request_they_came_from(redis_url: str, redis_client: Any) -> None:
    """Logs added with a request id are found again under that request, in order."""
    client = AsyncRedis.from_url(redis_url)
    store = GraphStore(client, Keys())
    logs = [CoachingLog(coaching_type="diagnosis", content=f"round {n}") for n in (1, 2)]
    await store.add_logs("r", logs[:1])
    await store.add_logs("r", logs, request_id="r:1:failure")
    assert await store.log_owners("r") == {1: "r:1:failure", 2: "r:1:failure"}
    await client.aclose()


@pytest.mark.asyncio
async def test_live_graph_is_read_again_only_after_a_change(
    redis_url: str, redis_client: Any
) -> None:
    """While a run's events and branches stay the same the cached graph is served; a new
    event makes the next read see it."""
    client = AsyncRedis.from_url(redis_url)
    store = GraphStore(client, Keys())
    source = LiveSource(store, RequestStore(client, Keys()))
    events = known_events("cached")
    await store.apply(events[:-3])
    first = await source.graph("cached")
    assert first is not None
    assert await source.graph("cached") is first
    await store.apply(events[-3:])
    fresh = await source.graph("cached")
    assert fresh is not None
    assert fresh is not first
    assert len(fresh.situations) == len(first.situations) + 1
    assert await source.graph("unknown") is None
    await client.aclose()
