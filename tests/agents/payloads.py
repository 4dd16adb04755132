"""Request bodies for agent tests."""

from __future__ import annotations

import uuid
from typing import Any

from gencoach.agents.checks.payloads import agent_input, coaching_request, session_config

Json = dict[str, Any]

__all__ = ["agent_input", "coaching_request", "request", "session_config"]


def request(*inputs: Json) -> Json:
    """A `POST /v1/responses` body with these inputs."""
    return {"request_id": f"test-{uuid.uuid4().hex}", "inputs": list(inputs)}
