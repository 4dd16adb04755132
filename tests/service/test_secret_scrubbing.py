"""A backend or an agent that echoes a configured secret never gets it into what gencoach
stores, logs or serves: logs, request reasons, the requests route, coaching logs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest
import redis

from gencoach.config.scrubbing import SECRET_MASK
from gencoach.constants import Keys
from gencoach.reporting.client import Reporter
from tests.support.agent_server import ScriptedAgent, correction
from tests.support.coaching import coaching_settings, report_known, settled
from tests.support.controller import ControllerProcess, wait_for
from tests.support.graphs import known_run_events
from tests.support.llm_server import ScriptedLLMServer, error
from tests.support.streams import entries

pytestmark = pytest.mark.slow

KEY = "sk-live-abcdef0123456789"
TOKEN = "api-token-zyxw98765"


def _echoing_coach(request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = correction(request)
    answer["logs"] = [{"coaching_type": "repair", "content": f"backend said: bad key {KEY}"}]
    return 200, answer


def test_an_echoed_api_key_is_masked_everywhere(
    controller_factory: Callable[..., ControllerProcess],
    scripted_agent: ScriptedAgent,
    llm: ScriptedLLMServer,
    redis_url: str,
    redis_client: redis.Redis,
) -> None:
    """The key the LLM answers 401 with, and that the agent logs, appears nowhere as itself."""
    llm.script(*[error(401, f"Incorrect API key provided: {KEY}")] * 5)
    scripted_agent.coaching_replies.extend([_echoing_coach] * 3)
    settings = coaching_settings(llm)
    settings["backends"]["llm"]["headers"] = {"Authorization": f"Bearer {KEY}"}
    controller = controller_factory(
        settings=settings, api={"token_env": "TEST_TOKEN"}, env={"TEST_TOKEN": TOKEN}
    )
    controller.start()
    controller.start_workers()
    report_known(redis_url, "leak", scripted_agent.url)
    found = wait_for(settled(controller, "leak", 3), timeout_s=60, what="three settled requests")
    assert found["failure"]["state"] == "error", found
    with Reporter("leak", redis_url=redis_url, start_seq=len(known_run_events()) - 1) as report:
        report.emit("run.finished")
    folder = controller.output_dir / "leak"
    wait_for(lambda: (folder / "_coaching_logs").is_dir(), timeout_s=30, what="the save")

    reason = found["failure"]["reason"]
    assert SECRET_MASK in reason, reason
    served = httpx.get(f"{controller.url}/v1/runs/leak/requests").text
    stored = b"".join(
        value
        for key in redis_client.keys("*")
        if redis_client.type(key) == b"hash"
        for value in cast(dict[bytes, bytes], redis_client.hgetall(key)).values()
    ) + b"".join(
        value for _, fields in entries(redis_client, Keys().results) for value in fields.values()
    )
    logs = "".join(path.read_text() for path in (folder / "_coaching_logs").iterdir())
    assert f"bad key {SECRET_MASK}" in logs
    worker_logs = "".join(p.read_text() for p in controller.folder.glob("workers-*.log"))
    for text in (served, stored.decode(errors="replace"), logs, controller.log_text(), worker_logs):
        assert KEY not in text
        assert TOKEN not in text
