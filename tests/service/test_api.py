"""The HTTP API: health, event batches all-or-nothing, bearer tokens."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
import redis

from gencoach.constants import Keys
from tests.support.controller import ControllerProcess
from tests.support.graphs import RUN_STARTED

pytestmark = pytest.mark.slow

KEYS = Keys()


def _event(seq: object, **changes: object) -> dict[str, object]:
    return {"type": "run.started", "run_id": "api-run", "seq": seq, **RUN_STARTED, **changes}


def test_health_answers_ready(controller: ControllerProcess) -> None:
    """GET /health answers 200 ready while intake runs."""
    response = httpx.get(f"{controller.url}/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ready"


def test_batch_with_an_invalid_event_is_refused_whole(
    controller: ControllerProcess, redis_client: redis.Redis
) -> None:
    """A batch with one invalid event answers 422 naming it, and appends nothing."""
    before = redis_client.xlen(KEYS.events)
    batch = [_event(0), _event("2"), _event(2, surprise=True)]
    response = httpx.post(f"{controller.url}/v1/events", json=batch)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"] == "2 of 3 events are invalid; none were accepted"
    assert [error["index"] for error in body["errors"]] == [1, 2]
    assert body["errors"][0]["fields"][0]["field"] == "seq"
    assert body["errors"][1]["fields"][0] == {"field": "surprise", "reason": "unknown field"}
    assert redis_client.xlen(KEYS.events) == before


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b"{nope", "the body is not valid JSON"),
        (b'{"type": "run.finished"}', "the body must be a JSON array of events"),
    ],
)
def test_malformed_bodies_answer_400(
    controller: ControllerProcess, body: bytes, detail: str
) -> None:
    """A body that is not a JSON array answers 400 with the reason."""
    response = httpx.post(
        f"{controller.url}/v1/events", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith(detail)


def test_valid_batch_is_accepted(controller: ControllerProcess) -> None:
    """A valid batch answers 202 with the count accepted."""
    response = httpx.post(f"{controller.url}/v1/events", json=[_event(0)])
    assert response.status_code == 202
    assert response.json() == {"accepted": 1}


def test_mutations_need_the_bearer_token(
    controller_factory: Callable[..., ControllerProcess],
) -> None:
    """With api.token_env set, posting events needs the token: 401 without, 403 wrong."""
    controller = controller_factory(
        api={"token_env": "TEST_API_TOKEN"}, env={"TEST_API_TOKEN": "s3cret-token"}
    )
    controller.start()
    url = f"{controller.url}/v1/events"
    assert httpx.post(url, json=[_event(0)]).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.post(url, json=[_event(0)], headers=wrong).status_code == 403
    right = {"Authorization": "Bearer s3cret-token"}
    assert httpx.post(url, json=[_event(0)], headers=right).status_code == 202
    assert httpx.get(f"{controller.url}/health").status_code == 200
    assert "s3cret-token" not in controller.log_text()
