"""Bodies are JSON in UTF-8 (another declared charset is 415, not decoded as UTF-8), and
`PUT /v1/budgets` takes exactly the budgets http-api.md names, as integers."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import redis

from gencoach.config import Limits
from gencoach.constants import Keys
from tests.support.controller import ControllerProcess

pytestmark = pytest.mark.slow

KEYS = Keys()
HTTP_API = Path(__file__).parents[2] / "docs" / "http-api.md"
# "café" in Latin-1: valid UTF-8 would read é as two bytes; these bytes are not UTF-8 at all.
LATIN1_EVENT = '[{"type": "run.started", "run_id": "café", "seq": 0}]'.encode("latin-1")


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=latin-1", "application/json;charset=\"ISO-8859-1\"",
     "application/json; charset=utf-16"],
)  # fmt: skip
def test_json_declared_in_another_charset_is_refused_with_415(
    controller: ControllerProcess, redis_client: redis.Redis, content_type: str
) -> None:
    """A body that says it is Latin-1 is refused naming its charset, not read as UTF-8."""
    for method, path, body in (
        ("POST", "/v1/events", LATIN1_EVENT),
        ("PUT", "/v1/budgets", b'{"max_pending_per_stage": 2}'),
    ):
        response = httpx.request(
            method, controller.url + path, content=body, headers={"content-type": content_type}
        )
        assert response.status_code == 415, (path, response.text)
        assert "the body must be JSON in UTF-8" in response.json()["detail"]
        charset = content_type.partition("charset=")[2].strip('"').lower()
        assert f"(got charset {charset!r})" in response.json()["detail"]
    assert redis_client.xlen(KEYS.events) == 0
    assert redis_client.hgetall(KEYS.budgets) == {}


def test_utf8_and_ascii_charsets_are_taken(controller: ControllerProcess) -> None:
    """`charset=UTF-8` and `charset=us-ascii` are JSON as usual."""
    for charset in ("UTF-8", "us-ascii"):
        response = httpx.put(
            f"{controller.url}/v1/budgets",
            content=b'{"max_pending_per_stage": 2}',
            headers={"content-type": f"application/json; charset={charset}"},
        )
        assert response.status_code == 200, response.text


def _documented_budgets() -> list[str]:
    """The budgets http-api.md says `PUT /v1/budgets` takes (its first parenthesis)."""
    text = HTTP_API.read_text()
    section = text[text.index("`PUT /v1/budgets`") :]
    listed = section[section.index("(") : section.index(")")]
    return re.findall(r"`([a-z_]+)`", listed)


def test_put_budgets_takes_each_budget_the_api_page_names_and_no_other(
    controller: ControllerProcess,
) -> None:
    """Every budget http-api.md lists is taken as an integer; the page lists all of them,
    and a number that is not an integer is refused as the page says."""
    documented = _documented_budgets()
    assert sorted(documented) == sorted(Limits.model_fields)
    for name in documented:
        response = httpx.put(f"{controller.url}/v1/budgets", json={name: 2})
        assert response.status_code == 200, (name, response.text)
        assert response.json()["effective"][name] == 2
    refused = httpx.put(f"{controller.url}/v1/budgets", json={documented[0]: 2.5})
    assert refused.status_code == 422, refused.text
    unknown = httpx.put(f"{controller.url}/v1/budgets", json={"lease_s": 10})
    assert unknown.status_code == 422, unknown.text
