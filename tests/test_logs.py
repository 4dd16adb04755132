"""Structured logging: JSON lines, bound ids, and credentials never written."""

from __future__ import annotations

import io
import json

import pytest
from pydantic import SecretStr

from gencoach.runtime.logs import REDACTED, bound, configure_logging, get_logger, redact


def _capture(fmt: str = "json") -> io.StringIO:
    stream = io.StringIO()
    configure_logging("debug", fmt, stream)  # type: ignore[arg-type]
    return stream


def test_events_are_json_lines_with_dotted_names() -> None:
    """Off a TTY, each event is one JSON object with its name, level and fields."""
    stream = _capture("auto")
    get_logger("test").info("coaching.admitted", run_id="r1", pending=2)
    record = json.loads(stream.getvalue())
    assert record["event"] == "coaching.admitted"
    assert record["level"] == "info"
    assert record["pending"] == 2
    assert "timestamp" in record


def test_bound_ids_reach_every_event_in_the_block() -> None:
    """Run and request ids bound once appear on every event logged inside the block only."""
    stream = _capture()
    log = get_logger("test")
    with bound(run_id="run-7", request_id="req-1"):
        log.info("inside")
    log.info("outside")
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    assert (inside["run_id"], inside["request_id"]) == ("run-7", "req-1")
    assert "run_id" not in outside


def test_secrets_are_redacted_in_events() -> None:
    """Header values, tokens, SecretStr values and URL passwords never reach the log."""
    stream = _capture()
    get_logger("test").info(
        "backend.configured",
        headers={"Authorization": "Bearer sk-live-123"},
        api_key="sk-live-456",
        token=SecretStr("sk-live-789"),
        url="redis://user:hunter2@cache:6379/0",
        nested={"backend": {"password": "pw-secret"}},
    )
    text = stream.getvalue()
    for secret in ("sk-live-123", "sk-live-456", "sk-live-789", "hunter2", "pw-secret"):
        assert secret not in text
    record = json.loads(text)
    assert record["headers"] == {"Authorization": REDACTED}
    assert record["url"] == f"redis://user:{REDACTED}@cache:6379/0"


def test_redact_leaves_ordinary_values_alone() -> None:
    """Values that are not credentials pass through unchanged."""
    value = {"run_id": "r", "limits": [5, 5], "enabled": True, "url": "http://agent:8080/v1"}
    assert redact(value) == value


def test_unknown_level_is_refused() -> None:
    """A log level that does not exist fails with a message naming it."""
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging("loud", "json", io.StringIO())


def test_counts_named_like_secrets_are_kept() -> None:
    """Token counts are not credentials: `prompt_tokens` stays visible, `access_token` not."""
    assert redact({"prompt_tokens": 12, "total_tokens": 30}) == {
        "prompt_tokens": 12,
        "total_tokens": 30,
    }
    assert redact({"access_token": "abc", "X-Api-Key": "k"}) == {
        "access_token": REDACTED,
        "X-Api-Key": REDACTED,
    }
