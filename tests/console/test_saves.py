"""The read-only console over save folders: no Redis, served by uvicorn on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gencoach.console import create_saves_app
from tests.support.agent_server import ThreadedServer
from tests.support.saves import chain_save

STARTED_AT = 1_764_619_200.5


@pytest.fixture
def saves(tmp_path: Path) -> Iterator[str]:
    """A saves console over one readable save, one with logs and one incomplete save."""
    chain_save(tmp_path / "a" / "first", 3, run_id="first")
    first = tmp_path / "a" / "first" / "config.json"
    producer = {"package": "gencoach", "version": "0.1.0", "started_at": STARTED_AT}
    first.write_text(json.dumps({**json.loads(first.read_text()), "producer": producer}))
    logs = tmp_path / "a" / "first" / "_coaching_logs"
    logs.mkdir()
    (logs / "000001_diagnosis.md").write_text("# Diagnosis, round 1\n")
    chain_save(tmp_path / "b" / "broken", 2, run_id="broken")
    config = tmp_path / "b" / "broken" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "export_complete": False}))
    server = ThreadedServer(create_saves_app(tmp_path))
    server.start()
    yield server.url
    server.stop()


def test_saves_are_listed_and_unreadable_ones_say_why(saves: str) -> None:
    """Complete saves are listed as saved runs; an incomplete one is listed with its reason."""
    rows = httpx.get(f"{saves}/console/api/runs").json()["runs"]
    readable = [row for row in rows if row["run_id"]]
    assert [(row["run_id"], row["state"], row["situations"]) for row in readable] == [
        ("first", "saved", 3)
    ]
    (first,) = readable
    assert first["started_at"] == STARTED_AT  # the run's start, kept in its save
    assert first["saved_at"] > STARTED_AT  # when its config.json was written
    assert (first["folder"], first["task"]) == ("a/first", "sw0")
    (broken,) = [row for row in rows if not row["run_id"]]
    assert broken["folder"] == "b/broken"
    assert "export_complete is false" in broken["reason"]
    assert httpx.get(f"{saves}/console/api/session").json()["mode"] == "saves"


def test_saved_graph_and_node_are_read_only(saves: str) -> None:
    """A saved node shows its record and the run's logs, and offers no correction; the
    live-only routes do not exist."""
    view = httpx.get(f"{saves}/console/api/graph", params={"run": "first"}).json()
    assert [s["id"] for s in view["situations"]] == [0, 1, 2]
    assert view["run"]["live"] is False
    node = httpx.get(f"{saves}/console/api/node", params={"run": "first", "candidate": 1}).json()
    assert node["candidate"]["status"] == "error"
    assert node["can_correct"] is False
    assert node["requests"] == []
    assert node["run_logs"] == [{"coaching_type": "diagnosis", "content": "# Diagnosis, round 1\n"}]
    assert httpx.get(f"{saves}/console/api/funnel").status_code == 404
    assert httpx.get(f"{saves}/console/api/graph", params={"run": "x"}).status_code == 404
