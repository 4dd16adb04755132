"""The save reader round-trips our saves and refuses what MAGMA-GEN's reader refuses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from redis.asyncio import Redis as AsyncRedis

from gencoach.constants import Keys
from gencoach.errors import SaveError
from gencoach.graph import read_save
from gencoach.limits import StageLimits
from gencoach.protocol import parse_event
from gencoach.service.saving.persist import Persister
from gencoach.service.store.graphstore import GraphStore
from tests.support.graphs import EXPECTED_SCORES, known_run_events


@pytest_asyncio.fixture
async def saved(redis_url: str, redis_client: Any, tmp_path: Path) -> Path:
    """A save of the known run, written by the persister."""
    client = AsyncRedis.from_url(redis_url)
    store = GraphStore(client, Keys())
    events = [
        parse_event({"type": kind, "run_id": "r1", "seq": seq, **fields})
        for seq, (kind, fields) in enumerate(known_run_events())
    ]
    await store.apply(events)
    limits = StageLimits(client, Keys())
    folder = await Persister(store, limits, tmp_path / "output", saved_ttl_s=60).save("r1")
    await client.aclose()
    assert folder is not None
    return folder


def _edit(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _refused(folder: Path) -> str:
    with pytest.raises(SaveError) as caught:
        read_save(folder)
    return str(caught.value)


def test_round_trip(saved: Path) -> None:
    """A save we wrote loads whole, every candidate with the score it was saved with."""
    graph = read_save(saved)
    assert graph.config.run_id == "r1"
    assert len(graph.situations) == 5
    for cid, score in EXPECTED_SCORES.items():
        assert graph.candidates[cid].model_dump(by_alias=True)["score"] == score
    assert graph.input_of(6).instruction.content == '{"infos": "ok"}'


def test_symlinked_config_is_refused(saved: Path, tmp_path: Path) -> None:
    """A config.json that is a symlink (here to a copy inside the folder) is refused."""
    (saved / "real.json").write_text((saved / "config.json").read_text())
    (saved / "config.json").unlink()
    (saved / "config.json").symlink_to(saved / "real.json")
    assert _refused(saved).endswith("config.json: is a symlink; saves must hold regular files only")


def test_file_outside_the_folder_is_refused(saved: Path, tmp_path: Path) -> None:
    """A situation file that resolves outside the save folder is refused."""
    outside = tmp_path / "elsewhere.json"
    outside.write_text((saved / "3.json").read_text())
    (saved / "3.json").unlink()
    (saved / "3.json").symlink_to(outside)
    assert _refused(saved).endswith("3.json: resolves outside the save folder")


def test_incomplete_save_is_refused(saved: Path) -> None:
    """A save whose config says export_complete false is refused as incomplete."""
    _edit(saved / "config.json", lambda data: data.update(export_complete=False))
    assert "incomplete save (export_complete is false)" in _refused(saved)


def test_missing_situation_is_refused(saved: Path) -> None:
    """A situation a link names but the folder lacks is refused."""
    (saved / "2.json").unlink()
    assert _refused(saved).endswith("2.json: is missing")


def test_cycle_is_refused(saved: Path) -> None:
    """A link back to an ancestor situation (a cycle) is refused."""

    def loop(data: Any) -> None:
        data["candidates"][0]["links"].append({"situation_id": 0, "kind": "next"})

    _edit(saved / "3.json", loop)
    assert "situation 0 is reached twice" in _refused(saved)


def test_parent_mismatch_is_refused(saved: Path) -> None:
    """A situation whose parent_id is not the candidate linking to it is refused."""

    def reparent(data: Any) -> None:
        data["parent_id"] = 2
        for candidate in data["candidates"]:
            candidate["parent_id"] = 2

    _edit(saved / "4.json", reparent)
    message = _refused(saved)
    assert "parent_id is 2 but candidate 0 links to it" in message


def test_stage_mismatch_is_refused(saved: Path) -> None:
    """A candidate whose stage differs from its situation's is refused, naming the field."""
    _edit(saved / "1.json", lambda data: data["candidates"][0].update(stage_id=1))
    assert "candidates.0.stage_id: must be the situation's stage_id 0, got 1" in _refused(saved)


def test_duplicate_candidate_ids_are_refused(saved: Path) -> None:
    """The same candidate id in two situations is refused."""
    _edit(saved / "4.json", lambda data: data["candidates"][0].update(id=2))
    assert "candidate id 2 is used twice" in _refused(saved)


def test_other_format_major_is_refused(saved: Path) -> None:
    """A save written by MAGMA-GEN 3.x is refused with the version it has."""
    _edit(saved / "config.json", lambda data: data.update(generator_version="3.0"))
    assert "has major 3; only MAGMA-GEN 2.x saves can be read" in _refused(saved)


def test_a_save_written_before_magma_task_descriptions_still_loads(saved: Path) -> None:
    """A save of an earlier gencoach (task description as text, executed candidates whose
    stage went on saved `ongoing`) loads as written."""

    def old(data: Any) -> None:
        data["task_description"] = "press sw0, then sw4"

    _edit(saved / "config.json", old)
    _edit(saved / "0.json", lambda data: data["candidates"][0].update(status="ongoing"))
    graph = read_save(saved)
    assert graph.config.task_description == "press sw0, then sw4"
    assert graph.candidates[0].status == "ongoing"
