"""Body routes read JSON only, refuse an object that repeats a key, and bound budgets."""

from __future__ import annotations

import httpx
import pytest
import redis

from gencoach.constants import Keys
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED

pytestmark = pytest.mark.slow

KEYS = Keys()
EVENT = b'[{"type": "run.started", "run_id": "r", "seq": 0, "agent_url": "http://a"}]'
# Every route with a body, and a body it would accept as JSON.
BODY_ROUTES = [
    ("POST", "/v1/events", EVENT),
    ("POST", "/v1/runs/r/interventions", b'{"candidate_id": "c"}'),
    ("PUT", "/v1/budgets", b'{"max_pending_per_stage": 2}'),
]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_body_routes_refuse_anything_but_json_with_415(
    controller: ControllerProcess, redis_client: redis.Redis, content_type: str | None
) -> None:
    """text/plain, a form or no Content-Type: 415 saying to send JSON, nothing changed."""
    for method, path, body in BODY_ROUTES:
        headers = {"content-type": content_type} if content_type else {}
        response = httpx.request(method, controller.url + path, content=body, headers=headers)
        assert response.status_code == 415, (path, response.text)
        shown = repr(content_type) if content_type else "none"
        assert response.json()["detail"] == (
            f"the body must be JSON: send Content-Type: application/json (got {shown})"
        )
    assert redis_client.xlen(KEYS.events) == 0
    assert redis_client.hgetall(KEYS.budgets) == {}


def test_json_with_a_charset_is_json(controller: ControllerProcess) -> None:
    """`application/json; charset=utf-8` is accepted."""
    event = {"type": "run.started", "run_id": "r", "seq": 0, **RUN_STARTED}
    response = httpx.post(
        f"{controller.url}/v1/events",
        content=httpx.Request("POST", "/", json=[event]).content,
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    ("method", "path", "key", "wrap"),
    [
        ("PUT", "/v1/budgets", "max_pending_per_stage", "{}"),
        ("POST", "/v1/events", "run_id", "[{}]"),
        ("POST", "/v1/runs/r/interventions", "candidate_id", "{}"),
    ],
)
def test_an_object_that_repeats_a_key_is_422_naming_it(
    controller: ControllerProcess,
    redis_client: redis.Redis,
    method: str,
    path: str,
    key: str,
    wrap: str,
) -> None:
    """Last-wins is not guessed: the repeated key is named and nothing is changed."""
    body = wrap.format(f'{{"{key}": 1, "{key}": 2}}')
    response = httpx.request(
        method, controller.url + path, content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == (
        f"the body repeats the key {key!r}; each key of an object may appear once"
    )
    assert response.json()["errors"] == [{"field": key, "reason": "duplicate key"}]
    assert redis_client.xlen(KEYS.events) == 0
    assert redis_client.hgetall(KEYS.budgets) == {}


@pytest.mark.parametrize("value", [2**63, 1_000_001, 0])
def test_budgets_have_an_upper_bound(
    controller: ControllerProcess, redis_client: redis.Redis, value: int
) -> None:
    """A budget outside 1..1,000,000 is 422 naming it; 1,000,000 itself is accepted."""
    url = f"{controller.url}/v1/budgets"
    response = httpx.put(url, json={"max_unproven_per_stage": value})
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == {
        "max_unproven_per_stage": "must be an integer from 1 to 1000000"
    }
    assert redis_client.hgetall(KEYS.budgets) == {}
    accepted = httpx.put(url, json={"max_unproven_per_stage": 1_000_000})
    assert accepted.json()["effective"]["max_unproven_per_stage"] == 1_000_000
