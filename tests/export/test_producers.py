"""Producer identity/version checks on every format, reported as MAGMA-GEN reports them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.errors import ExportError
from gencoach.export.command import (
    EXIT_FAILURES,
    EXIT_OK,
    EXIT_UNUSABLE,
    ExportFilters,
    export_command,
)
from tests.support.exports import Export, read_rows
from tests.support.saved_runs import run_config, write_run

FILES = {"chat": "chat.jsonl", "full-history": "hr_data.json", "preference": "preference.jsonl"}


def _two_versions(source: Path) -> None:
    """A run of agent 1.0.0 and a newer one written by agent 9.9.9."""
    old = run_config("run-old", agent_version="1.0.0", started_at="2026-12-01T09:00:00Z")
    new = run_config("run-new", agent_version="9.9.9", started_at="2026-12-01T10:00:00Z")
    write_run(source / "old", config=old)
    write_run(source / "new", config=new)


def _command(source: Path, *accepted: str, any_agent: bool = False) -> int:
    return export_command(
        source, "chat", None, 0.05, 42, 42, False, None, False, any_agent=any_agent,
        filters=ExportFilters(from_agents=accepted), dedupe=False,
    )  # fmt: skip


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_a_newer_version_beside_the_old_one_is_not_chosen_silently(
    export: Export, source: Path, fmt: str
) -> None:
    """Saves of 1.0.0 and a newer 9.9.9: no format guesses which one the dataset is for;
    the export stops, names both (the newest marked) and says how to choose."""
    _two_versions(source)
    with pytest.raises(ExportError) as caught:
        export(fmt)
    assert caught.value.reason == (
        f"the saves under {source} were produced by several agents: reference-agent 1.0.0 "
        "(1 save), reference-agent 9.9.9 (1 save, the newest); a dataset holds one agent's "
        "decisions unless asked: choose with --from AGENT[@VERSION] (or the option 'agents'), "
        "or export every one with --any-agent"
    )
    assert not (source / "datasets").exists()


def test_the_command_exits_2_on_several_producers(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal reaches the user as one error line and exit code 2."""
    _two_versions(source)
    assert _command(source) == EXIT_UNUSABLE
    assert capsys.readouterr().err.startswith(
        f"error: the saves under {source} were produced by several agents: "
    )


def test_saves_of_one_version_only_are_exported_and_named(
    source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every save written by 9.9.9: there is nothing to choose between, so they are
    exported, and the summary and the manifest name the producer; asking for 1.0.0
    instead finds no compatible save."""
    write_run(source / "new", config=run_config("run-new", agent_version="9.9.9"))
    assert _command(source) == EXIT_OK
    folder = source / "datasets" / "chat"
    assert capsys.readouterr().out == (
        f"exported 5 rows (chat: 5) from 1 save to {folder}; 1 train task, 0 validation "
        "tasks; reference-agent 9.9.9: 1 graded, 1 kept\n"
    )
    manifest = json.loads((folder / "export_manifest.json").read_text())
    assert manifest["settings"]["producers"] == ["reference-agent 9.9.9"]
    assert _command(source, "reference-agent@1.0.0") == EXIT_UNUSABLE
    assert capsys.readouterr().err == (
        "refused new: incompatible producer identity/version: agent reference-agent 9.9.9; "
        "this export accepts reference-agent 1.0.0 (accept it with --from "
        "reference-agent@9.9.9 or the option 'agents')\n"
        f"error: no compatible save under {source}: format 'chat' accepts reference-agent "
        "1.0.0, the saves were produced by reference-agent 9.9.9 (choose with --from "
        "AGENT[@VERSION] or --any-agent)\n"
    )


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_every_format_refuses_another_version_as_a_listed_failure(
    export: Export, source: Path, fmt: str
) -> None:
    """Told to accept 1.0.0, every format refuses the 9.9.9 save, lists it in
    export_failures.json as MAGMA-GEN lists it, and the export is not complete."""
    _two_versions(source)
    messages: list[str] = []
    outcome = export(fmt, messages=messages, from_agents=("reference-agent@1.0.0",))
    reason = (
        "incompatible producer identity/version: agent reference-agent 9.9.9; this export "
        "accepts reference-agent 1.0.0 (accept it with --from reference-agent@9.9.9 or the "
        "option 'agents')"
    )
    assert outcome.failures == [{"source": "new", "example": None, "error": reason}]
    assert not outcome.complete
    assert messages == [f"refused new: {reason}"]
    folder = source / "datasets" / fmt
    assert json.loads((folder / "export_failures.json").read_text()) == outcome.failures
    rows = read_rows(folder / FILES[fmt])
    assert rows
    assert all("run-new" not in json.dumps(row) for row in rows)


@pytest.mark.parametrize("identity", [("unknown", "unknown"), ("reference-agent", "")])
def test_a_save_of_an_unknown_agent_is_refused(
    export: Export, source: Path, identity: tuple[str, str]
) -> None:
    """A save whose agent never announced its identity says nothing of what produced it:
    refused and listed beside the known producer's rows; `--any-agent` takes it."""
    write_run(source / "known", config=run_config("run-known"))
    agent_id, version = identity
    config = run_config("run-unknown", agent_id=agent_id, agent_version=version)
    write_run(source / "unknown", config=config)
    outcome = export("chat", dedupe=False)
    assert outcome.failures == [
        {
            "source": "unknown",
            "example": None,
            "error": f"incompatible producer identity/version: agent {agent_id!r} {version!r} "
            "is unknown (the agent never announced its identity); accept it with --any-agent",
        }
    ]
    assert outcome.saves == 1
    assert export("chat", dedupe=False, any_agent=True).complete


def test_a_list_of_versions_is_accepted(export: Export, source: Path) -> None:
    """`agents` with a list of versions exports both, and the manifest names them."""
    _two_versions(source)
    accepted = {"agent_id": "reference-agent", "agent_version": ["1.0.0", "9.9.9"]}
    outcome = export("chat", options={"agents": [accepted]}, dedupe=False)
    assert outcome.complete
    assert outcome.saves == 2
    manifest = json.loads((source / "datasets" / "chat" / "export_manifest.json").read_text())
    assert manifest["settings"]["producers"] == ["reference-agent 1.0.0, 9.9.9"]
    assert [(a["agent_version"], a["graded"]) for a in manifest["agents"]] == [
        ("1.0.0", 1),
        ("9.9.9", 1),
    ]


def test_from_accepts_an_agent_at_a_version_or_any_version(source: Path) -> None:
    """`--from AGENT@VERSION` exports that version only; `--from AGENT` any of its versions,
    as `--any-agent` every producer."""
    _two_versions(source)
    assert _command(source, "reference-agent@9.9.9") == EXIT_FAILURES
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    assert {row["agent_version"] for row in rows} == {"9.9.9"}
    assert _command(source, "reference-agent") == EXIT_OK
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    assert {row["agent_version"] for row in rows} == {"1.0.0", "9.9.9"}
    assert _command(source, any_agent=True) == EXIT_OK
    rows = read_rows(source / "datasets" / "chat" / "chat.jsonl")
    assert {row["agent_version"] for row in rows} == {"1.0.0", "9.9.9"}


def test_no_compatible_save_is_an_error(export: Export, source: Path) -> None:
    """Every save refused: nothing is written and the reason names what was accepted."""
    _two_versions(source)
    with pytest.raises(ExportError) as caught:
        export("chat", options={"agents": [{"agent_id": "child-agent"}]})
    assert caught.value.reason == (
        f"no compatible save under {source}: format 'chat' accepts child-agent (any version), "
        "the saves were produced by reference-agent 1.0.0, reference-agent 9.9.9 (choose "
        "with --from AGENT[@VERSION] or --any-agent)"
    )
    assert not (source / "datasets" / "chat").exists()


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        ("me", "option 'agents' must be a list of"),
        ([{"agent_id": "me", "agent_version": 2}], "option 'agents' must be a list of"),
        ([{"agent": "me"}], "option 'agents' must be a list of"),
    ],
)
def test_bad_agents_options_are_named(
    export: Export, source: Path, agents: object, message: str
) -> None:
    """The `agents` option says its shape when it is wrong."""
    _two_versions(source)
    with pytest.raises(ExportError) as caught:
        export("chat", options={"agents": agents})
    assert caught.value.reason.startswith(message)


def test_a_bad_from_flag_is_named(export: Export, source: Path) -> None:
    """`--from agent@` has no version."""
    _two_versions(source)
    with pytest.raises(ExportError, match=r"--from must be AGENT or AGENT@VERSION, got 'x@'"):
        export("chat", from_agents=("x@",))


def test_a_magma_exporter_refusal_hints_at_what_goes_with_agent(
    export: Export, source: Path
) -> None:
    """`--agent` takes neither `--from` nor the option 'agents' (both exit 2 with it), so a
    save its exporter refuses is told to use `--any-agent` (which goes with `--agent`) or
    a built-in format with `--from`; a built-in format still hints at `--from`."""
    from gencoach.export.producers import Accepted, check_producers
    from gencoach.export.sources import discover

    _two_versions(source)
    saves = discover(source).saves
    own = [Accepted("reference-agent", frozenset(["1.0.0"]))]
    _, (refused,), _ = check_producers(saves, own, where=str(source), exporter="full-history")
    assert refused.reason.endswith(
        "(MAGMA exporter 'full-history' reads its own agent's saves: accept it with "
        "--any-agent, or export it with a built-in format and --from reference-agent@9.9.9)"
    )
    _, (refused,), _ = check_producers(saves, own, where=str(source))
    assert refused.reason.endswith(
        "(accept it with --from reference-agent@9.9.9 or the option 'agents')"
    )
    with pytest.raises(ExportError, match="they do not go with --agent"):
        export(None, agent="full-history", from_agents=("reference-agent@9.9.9",))
