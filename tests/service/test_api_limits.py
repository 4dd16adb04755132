"""The HTTP API refuses what it cannot safely take, with the status a client expects."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from gencoach.constants import EVENT_FIELD, Keys
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import RUN_STARTED

pytestmark = pytest.mark.slow

KEYS = Keys()


def _started(run_id: str = "limits", **changes: object) -> dict[str, object]:
    return {"type": "run.started", "run_id": run_id, "seq": 0, **RUN_STARTED, **changes}


def _raw_status(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        return sock.recv(4096).split(b"\r\n", 1)[0]


def test_bodies_over_the_limit_get_413_without_being_read(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis
) -> None:
    """A declared 300 MB body, and a chunked one past the limit, answer 413; health stays up."""
    controller = controller_factory(api={"max_body_bytes": 4096})
    controller.start()
    head = b"POST /v1/events HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    declared = _raw_status(controller.port, head + b"Content-Length: 300000000\r\n\r\n[")
    assert declared == b"HTTP/1.1 413 Request Entity Too Large"

    def chunks() -> Iterator[bytes]:
        yield b"["
        for _ in range(100):
            yield json.dumps(_started()).encode() + b","

    response = httpx.post(f"{controller.url}/v1/events", content=chunks())
    assert response.status_code == 413
    assert response.json()["detail"] == (
        "the request body is larger than 4096 bytes (api.max_body_bytes)"
    )
    assert httpx.get(f"{controller.url}/health").status_code == 200
    assert httpx.post(f"{controller.url}/v1/events", json=[_started()]).status_code == 202
    assert redis_client.xlen(KEYS.events) == 1


def test_events_over_the_size_limit_are_refused_on_both_paths(
    controller_factory: Callable[..., ControllerProcess], redis_client: redis.Redis
) -> None:
    """Over HTTP an oversized event is a 422; on the stream it goes to the dead letters."""
    controller = controller_factory(max_event_bytes=2000)
    controller.start()
    big = _started(env_options={"padding": "x" * 3000})
    response = httpx.post(f"{controller.url}/v1/events", json=[big])
    assert response.status_code == 422
    assert "events are at most 2000 bytes" in response.json()["errors"][0]["message"]
    redis_client.xadd(KEYS.events, {EVENT_FIELD: json.dumps(big)})
    (dead,) = wait_for(lambda: redis_client.xrange(KEYS.dead_events), what="a dead letter")
    reason = dead[1][b"reason"].decode()
    assert reason.endswith("events are at most 2000 bytes (controller.max_event_bytes)")
    assert len(dead[1][b"event"]) <= 4096


def test_a_non_ascii_token_is_refused_like_any_wrong_token(
    controller_factory: Callable[..., ControllerProcess],
) -> None:
    """A bearer token with non-ASCII characters answers 403, not 500."""
    controller = controller_factory(
        api={"token_env": "TEST_API_TOKEN"}, env={"TEST_API_TOKEN": "s3cret-token"}
    )
    controller.start()
    header = "Bearer s3cret-tokén".encode()
    status = _raw_status(
        controller.port,
        b"PUT /v1/budgets HTTP/1.1\r\nHost: t\r\nAuthorization: "
        + header
        + b"\r\nContent-Length: 2\r\n\r\n{}",
    )
    assert status == b"HTTP/1.1 403 Forbidden"


def test_budgets_must_be_integers_and_agents_allowed(controller: ControllerProcess) -> None:
    """`"5"` as a budget, and a run naming an agent outside the allowlist, answer 422."""
    before = httpx.get(f"{controller.url}/v1/budgets").json()
    response = httpx.put(f"{controller.url}/v1/budgets", json={"max_pending_per_stage": "5"})
    assert response.status_code == 422
    assert response.json()["errors"] == {
        "max_pending_per_stage": "must be a JSON integer, got str '5'"
    }
    assert httpx.get(f"{controller.url}/v1/budgets").json() == before
    outside = _started(agent_url="http://10.9.9.9:8751")
    response = httpx.post(f"{controller.url}/v1/events", json=[outside])
    assert response.status_code == 422
    (error,) = response.json()["errors"]
    assert error["fields"][0]["field"] == "agent_url"
    assert "is not allowed" in error["message"]


def test_runs_whose_id_holds_a_slash_are_reachable(controller: ControllerProcess) -> None:
    """`coll/T` is found under /v1/runs/coll/T and /v1/runs/coll%2FT, with its sub-routes."""
    assert httpx.post(f"{controller.url}/v1/events", json=[_started("coll/T")]).status_code == 202
    wait_for(
        lambda: httpx.get(f"{controller.url}/v1/runs/coll/T").status_code == 200,
        what="run coll/T applied",
    )
    assert httpx.get(f"{controller.url}/v1/runs/coll%2FT").json()["run_id"] == "coll/T"
    requests = httpx.get(f"{controller.url}/v1/runs/coll%2FT/requests").json()
    assert requests == {"run_id": "coll/T", "requests": []}
    assert httpx.get(f"{controller.url}/v1/runs/coll/T/stages").json()["run_id"] == "coll/T"
