"""Which agent URLs a run may name: those under an entry of `agents`."""

from __future__ import annotations

import pytest

from gencoach.config import Settings

AGENTS = ["http://localhost", "https://agents.internal:8443/pool", "http://127.0.0.1:8888"]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://localhost:8888", True),  # no port in the entry: any port
        ("http://LOCALHOST/v1", True),
        ("https://localhost:8888", False),  # another scheme
        ("http://localhost.evil.com", False),
        ("http://localhost@evil.com", False),  # user-info, not host
        ("https://agents.internal:8443/pool", True),
        ("https://agents.internal:8443/pool/a1", True),
        ("https://agents.internal:8443/poolside", False),  # path prefix by segment
        ("https://agents.internal:8443/pool/../admin", False),
        ("https://agents.internal/pool/a1", False),  # entry names port 8443
        ("https://agents.internal:9443/pool/a1", False),
        ("http://127.0.0.1:8888/", True),
        ("http://127.0.0.1:8889/", False),
        ("http://127.0.0.1/", False),  # default port 80, not 8888
        ("not a url", False),
        ("http://[::1", False),
    ],
)
def test_agent_allowed(url: str, allowed: bool) -> None:
    """An agent URL must match an entry's scheme and host, its port if named, and its path."""
    assert Settings(agents=AGENTS).agent_allowed(url) is allowed


def test_default_agents_are_local() -> None:
    """By default only agents on this machine are allowed."""
    settings = Settings()
    assert settings.agent_allowed("http://127.0.0.1:8888")
    assert settings.agent_allowed("http://localhost:9000/agent")
    assert not settings.agent_allowed("http://10.0.0.5:8888")


def test_no_agents_allows_none() -> None:
    """An empty allow-list refuses every agent."""
    assert not Settings(agents=[]).agent_allowed("http://localhost")
