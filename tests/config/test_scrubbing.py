"""Which configured values count as secrets, and how free text is masked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gencoach.config import load_settings
from gencoach.config.scrubbing import install, scrub, scrub_value, secret_values


@pytest.fixture
def installed() -> Iterator[None]:
    """Secrets installed for the test, none after it."""
    install(["sk-abcdef123", "Bearer sk-abcdef123"])
    yield
    install([])


def test_credential_headers_keys_and_the_token_are_secrets(tmp_path: Path) -> None:
    """Credential headers (with and without their scheme) and the API token are collected;
    a Content-Type header is not, and short values are left alone."""
    config = tmp_path / "gencoach.yaml"
    config.write_text(
        "backends:\n  b:\n    type: openai\n    default_model: m\n"
        "    endpoint: http://127.0.0.1:1/v1/chat/completions\n"
        "    headers: {Authorization: 'Bearer sk-abcdef123', Content-Type: application/json,"
        " X-Api-Key: key-987654321, X-Token: abc}\n"
        "api: {token_env: TOKEN}\n"
    )
    settings = load_settings(config, {"TOKEN": "api-token-123"})
    assert secret_values(settings) == {
        "Bearer sk-abcdef123",
        "sk-abcdef123",
        "key-987654321",
        "api-token-123",
    }


@pytest.mark.usefixtures("installed")
def test_every_occurrence_is_masked_at_any_depth() -> None:
    """A key echoed in a message, or deep in a JSON value, becomes ***."""
    assert scrub("Incorrect API key provided: sk-abcdef123.") == (
        "Incorrect API key provided: ***."
    )
    assert scrub_value({"a": ["x Bearer sk-abcdef123 y", 3]}) == {"a": ["x *** y", 3]}
    assert scrub("nothing to hide") == "nothing to hide"
