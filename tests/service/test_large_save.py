"""A controller saving a large run goes on answering its API meanwhile."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from gencoach.service.store.graphstore import GraphStore
from tests.support.controller import ControllerProcess
from tests.support.graphs import chain_run_events

pytestmark = pytest.mark.slow

SITUATIONS = 2500
# Generous, for a loaded machine: the test shows the API is served during the save, not how
# fast (benchmarks/saves.py measures the pauses; building the save on the event loop held
# every request for the whole build).
HEALTH_BOUND_S = 5.0


@pytest.mark.asyncio
@pytest.mark.timeout(240)
async def test_health_answers_while_a_large_run_is_saved(
    controller: ControllerProcess, store: GraphStore
) -> None:
    """While a 2,500-situation run is saved, every `/health` is answered, ready, at once."""
    events = chain_run_events("large", SITUATIONS)
    for start in range(0, len(events), 500):
        await store.apply(events[start : start + 500])
    finished = [{"type": "run.finished", "run_id": "large", "seq": len(events)}]
    async with httpx.AsyncClient(base_url=controller.url, timeout=30) as client:
        assert (await client.post("/v1/events", json=finished)).status_code == 202
        answers: list[tuple[int, float]] = []
        deadline = time.monotonic() + 180
        while (await store.state("large")) != "saved":
            assert time.monotonic() < deadline, "the large run was not saved within 180 s"
            started = time.monotonic()
            try:
                status = (await client.get("/health", timeout=HEALTH_BOUND_S)).status_code
            except httpx.TimeoutException:
                pytest.fail(f"/health gave no answer within {HEALTH_BOUND_S} s during the save")
            answers.append((status, time.monotonic() - started))
    assert len(answers) >= 5, f"the save was over before /health was asked: {answers}"
    assert {status for status, _ in answers} == {200}, answers
    folder = controller.output_dir / "large"
    assert json.loads((folder / "config.json").read_text())["export_complete"] is True
    assert len(list(folder.glob("*.json"))) == SITUATIONS + 1  # every situation, and config
