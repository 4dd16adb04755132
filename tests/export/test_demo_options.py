"""The export options on a real `gencoach demo` run's saves: run filters, producers, `as`
with `--from`, a tool's failure recogniser and the prompt/completion shape."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gencoach.errors import ExportError
from gencoach.export import ExportSettings, run_export
from gencoach.export.tool_failures import ToolFailures
from gencoach.graph import read_config
from tests.support.exports import read_rows

# The demo runs once per session (about 20 s on two busy cores) inside the first test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _export(source: Path, out: Path, **settings: Any) -> list[dict[str, Any]]:
    run_export(ExportSettings(source=source, format="chat", out=out, **settings))
    return read_rows(out / "chat.jsonl")


def _scenarios(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({str(row["scenario"]) for row in rows})


def _started_at(folder: Path) -> float:
    """When the run saved in `folder` started, as its producer recorded."""
    producer = read_config(folder).producer
    assert producer is not None
    assert producer.started_at is not None
    return producer.started_at


def _graded(out: Path) -> int:
    manifest = json.loads((out / "export_manifest.json").read_text())
    return sum(agent["graded"] for agent in manifest["agents"])


def test_cases_since_and_limit_choose_the_runs_read(demo_saves: Path, tmp_path: Path) -> None:
    """`cases` keeps the named scenarios; `since` the runs started at or after its time
    (at the first start all four, a second after the last none); `limit` the newest runs
    of the agent (latest start, then last by folder name)."""
    rows = _export(demo_saves, tmp_path / "cases", options={"cases": ["sorting", "buttons"]})
    assert set(_scenarios(rows)) <= {"buttons", "sorting"}
    assert _graded(tmp_path / "cases") == 2

    folders = {read_config(p.parent).scenario: p.parent for p in demo_saves.glob("*/config.json")}
    started = {scenario: _started_at(folder) for scenario, folder in folders.items()}
    first = datetime.fromtimestamp(min(started.values()), UTC)
    last = datetime.fromtimestamp(max(started.values()), UTC)
    _export(demo_saves, tmp_path / "since", since=first.isoformat())
    assert _graded(tmp_path / "since") == 4
    with pytest.raises(ExportError, match="passes the filters"):
        _export(demo_saves, tmp_path / "later", since=(last + timedelta(seconds=1)).isoformat())

    # The demo's runs start within a second or two of each other, in no set order.
    newest = sorted(started, key=lambda scenario: (started[scenario], folders[scenario].name))[-2:]
    rows = _export(demo_saves, tmp_path / "limit", limit=2)
    assert set(_scenarios(rows)) <= set(newest)
    assert _graded(tmp_path / "limit") == 2


def _copy(demo_saves: Path, target: Path, version: str, names: list[str]) -> None:
    """Copies of the demo's saves `names`, their producer's version rewritten."""
    for name in names:
        folder = target / name
        shutil.copytree(demo_saves / name, folder)
        config = json.loads((folder / "config.json").read_text())
        config["agent_version"] = version
        (folder / "config.json").write_text(json.dumps(config))


def test_producers_of_real_saves(demo_saves: Path, tmp_path: Path) -> None:
    """Two demo saves rewritten as produced by 9.9.9 beside two of the demo's version:
    the export names both and stops; `--from` the demo's agent exports its two, listing
    the others as incompatible; 9.9.9 alone is exported under its name."""
    names = sorted(path.parent.name for path in demo_saves.glob("*/config.json"))
    version = read_config(demo_saves / names[0]).agent_version
    mixed = tmp_path / "mixed"
    _copy(demo_saves, mixed, version, names[:2])
    _copy(demo_saves, mixed, "9.9.9", names[2:])
    with pytest.raises(ExportError) as caught:
        _export(mixed, tmp_path / "refused")
    assert caught.value.reason == (
        f"the saves under {mixed} were produced by several agents: gencoach-reference "
        f"{version} (2 saves), gencoach-reference 9.9.9 (2 saves, the newest); a dataset "
        "holds one agent's decisions unless asked: choose with --from AGENT[@VERSION] (or "
        "the option 'agents'), or export every one with --any-agent"
    )
    outcome = run_export(
        ExportSettings(
            source=mixed,
            format="chat",
            out=tmp_path / "from",
            from_agents=(f"gencoach-reference@{version}",),
        )
    )
    assert [failure["source"] for failure in outcome.failures] == names[2:]
    assert {row["agent_version"] for row in read_rows(tmp_path / "from" / "chat.jsonl")} == {
        version
    }
    only = tmp_path / "only"
    _copy(demo_saves, only, "9.9.9", names)
    rows = _export(only, tmp_path / "only-out")
    assert {(row["agent_id"], row["agent_version"]) for row in rows} == {
        ("gencoach-reference", "9.9.9")
    }


def test_as_writes_a_parents_demo_runs_for_a_child(demo_saves: Path, tmp_path: Path) -> None:
    """`--from` the demo's agent and `as` a child: every row opens with the child's
    instructions and is named for it, the demo's agent as its source."""
    target = {"agent_id": "child-agent", "agent_version": "2.0.0", "instructions": "Be brief."}
    rows = _export(
        demo_saves,
        tmp_path / "as",
        options={"as": target},
        from_agents=("gencoach-reference",),
    )
    assert rows
    for row in rows:
        system = row["messages"][0]
        assert system["role"] == "system"
        assert str(system["content"]).startswith("Be brief.\n\nAttributes: ")
        assert (row["agent_id"], row["agent_version"]) == ("child-agent", "2.0.0")
        assert row["source_agent_id"] == "gencoach-reference"


def _calls(message: dict[str, Any]) -> set[str]:
    return {call["function"]["name"] for call in message.get("tool_calls") or []}


def _targets(rows: list[dict[str, Any]], ends_only: bool) -> list[dict[str, Any]]:
    """The trainable assistant messages (`ends_only`: only those ending their row)."""
    return [
        message
        for row in rows
        for message in (row["messages"][-1:] if ends_only else row["messages"])
        if message["role"] == "assistant" and message["trainable"]
    ]


def test_a_tool_failure_recogniser_on_real_results(demo_saves: Path, tmp_path: Path) -> None:
    """A predicate calling every result of the tool most answers call failed: no answer
    calling that tool alone is a target any more, in whole-run marks and per-turn row
    ends alike, where without it some were."""
    plain = _export(demo_saves, tmp_path / "plain")
    single = [_calls(m) for m in _targets(plain, ends_only=False) if len(_calls(m)) == 1]
    assert single, "the demo must have answers calling one tool"
    (tool,) = max(single, key=single.count)
    failures = ToolFailures({tool: lambda result: True})

    def alone(rows: list[dict[str, Any]], ends_only: bool) -> int:
        return sum(_calls(m) == {tool} for m in _targets(rows, ends_only))

    assert alone(plain, ends_only=False) > 0
    recognised = _export(demo_saves, tmp_path / "rec", tool_failures=failures)
    assert alone(recognised, ends_only=False) == 0
    per_turn = {"per_turn": True}
    plain = _export(demo_saves, tmp_path / "plain-turns", options=per_turn)
    assert alone(plain, ends_only=True) > 0
    recognised = _export(
        demo_saves, tmp_path / "rec-turns", options=per_turn, tool_failures=failures
    )
    assert alone(recognised, ends_only=True) == 0


def test_prompt_completion_rows_are_the_per_turn_targets(demo_saves: Path, tmp_path: Path) -> None:
    """`shape: prompt_completion` gives one row per per-turn row: its messages up to the
    last as the prompt, the last (an assistant answer) as the completion, no marks."""
    per_turn = _export(demo_saves, tmp_path / "turns", options={"per_turn": True})
    pairs = _export(demo_saves, tmp_path / "pairs", options={"shape": "prompt_completion"})
    assert len(pairs) == len(per_turn) > 0
    for pair, turn in zip(pairs, per_turn, strict=True):
        unmarked = [{k: v for k, v in m.items() if k != "trainable"} for m in turn["messages"]]
        assert pair["prompt"] == unmarked[:-1]
        assert pair["completion"] == unmarked[-1:]
        assert pair["completion"][0]["role"] == "assistant"
        assert "messages" not in pair
