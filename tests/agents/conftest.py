"""Fixtures for agent tests: apps served on loopback, and scripted LLM servers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.agent_server import Serve, ThreadedServer
from tests.support.llm_server import ScriptedLLMServer, scripted_llm_servers


@pytest.fixture
def serve() -> Iterator[Serve]:
    """A factory serving an ASGI app on a loopback port; every server stops after the test."""
    servers: list[ThreadedServer] = []

    def start(app: Any) -> str:
        server = ThreadedServer(app)
        server.start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    """A scripted OpenAI-compatible server on loopback."""
    with scripted_llm_servers() as start:
        yield start()
