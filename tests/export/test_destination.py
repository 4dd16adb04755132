"""Each format exports into a folder of its own; no export overwrites another's manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gencoach.errors import ExportError
from gencoach.export.manifest import MANIFEST_FILE
from tests.support.exports import Export
from tests.support.saved_runs import write_run

MAGMA_MANIFEST = {
    "producer": {"package": "magma_gen", "version": "2.0.0"},
    "complete": True,
    "signature": "0" * 64,
    "settings": {"agent_id": "reference-agent", "agent_version": "1.0.0"},
    "rows": {"rows": 0},
    "split": {"train": [], "validation": []},
    "files": {},
}


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


def test_formats_write_side_by_side_under_datasets(export: Export, source: Path) -> None:
    """`chat` and `preference` each get `datasets/<format>/`, neither touching the other."""
    write_run(source / "run")
    export("chat")
    chat = _files(source / "datasets" / "chat")
    export("preference")
    assert _files(source / "datasets" / "chat") == chat
    assert (source / "datasets" / "preference" / MANIFEST_FILE).is_file()
    assert sorted(path.name for path in (source / "datasets").iterdir()) == ["chat", "preference"]


def test_a_magma_gen_export_in_datasets_is_left_alone(export: Export, source: Path) -> None:
    """MAGMA-GEN writes straight into `SOURCE/datasets/`; gencoach's exports go beside it."""
    write_run(source / "run")
    magma = source / "datasets"
    magma.mkdir()
    (magma / MANIFEST_FILE).write_text(json.dumps(MAGMA_MANIFEST))
    (magma / "rows.json").write_text("[]\n")
    before = _files(magma)
    export("chat")
    assert _files(magma) == before
    assert (magma / "chat" / "chat.jsonl").is_file()


def test_out_into_a_magma_gen_export_is_refused(
    export: Export, source: Path, tmp_path: Path
) -> None:
    """`--out` pointing at MAGMA-GEN's export folder is refused, and nothing is written."""
    write_run(source / "run")
    target = tmp_path / "magma-export"
    target.mkdir()
    (target / MANIFEST_FILE).write_text(json.dumps(MAGMA_MANIFEST))
    with pytest.raises(ExportError) as caught:
        export("chat", out=target)
    assert caught.value.reason == (
        f"refusing to export 'chat' into {target}: it holds an export by magma_gen 2.0.0, "
        "which gencoach never overwrites; choose another --out"
    )
    assert sorted(path.name for path in target.iterdir()) == [MANIFEST_FILE]


def test_out_into_another_formats_export_is_refused(
    export: Export, source: Path, tmp_path: Path
) -> None:
    """One `--out` folder for two formats: the second export is refused by name."""
    write_run(source / "run")
    target = tmp_path / "shared"
    export("chat", out=target)
    before = _files(target)
    with pytest.raises(ExportError) as caught:
        export("preference", out=target)
    assert caught.value.reason == (
        f"refusing to export 'preference' into {target}: it holds gencoach's 'chat' export; "
        "each format needs a folder of its own, choose another --out"
    )
    assert _files(target) == before


def test_an_unreadable_manifest_is_not_overwritten(
    export: Export, source: Path, tmp_path: Path
) -> None:
    """A manifest gencoach cannot read might be anyone's: the folder is refused."""
    write_run(source / "run")
    target = tmp_path / "unknown"
    target.mkdir()
    (target / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(ExportError, match="is not a readable export manifest"):
        export("chat", out=target)
    assert (target / MANIFEST_FILE).read_text() == "{not json"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"agent": "mine"}, "give a --format or an --agent to export with (one of them)"),
        ({"format": ""}, "give a --format or an --agent to export with (one of them)"),
        (
            {"any_agent": True, "from_agents": ("me",)},
            "--from and option 'agents' choose producers; they do not go with --agent (which "
            "exports its own agent's saves) nor with --any-agent (which exports every one)",
        ),
        ({"split_by": "scenario"}, "--split-by must be task or folder, got 'scenario'"),
        (
            {"format": "preference", "dedupe": False},
            "--dedupe/--no-dedupe apply to the chat and full-history formats only",
        ),
    ],
)
def test_conflicting_choices_are_refused(
    source: Path, settings: dict[str, object], message: str
) -> None:
    """A format and an agent together, neither, or a stray flag: one clear message."""
    from gencoach.export import ExportSettings, run_export

    write_run(source / "run")
    arguments: dict[str, object] = {"format": "chat", **settings}
    with pytest.raises(ExportError) as caught:
        run_export(ExportSettings(source=source, **arguments))  # type: ignore[arg-type]
    assert caught.value.reason == message


def test_an_unknown_magma_exporter_names_the_installed_ones(source: Path) -> None:
    """`--agent` with no such entry point in `magma.export.gen` says what is installed."""
    from gencoach.export import ExportSettings, run_export

    write_run(source / "run")
    with pytest.raises(ExportError) as caught:
        run_export(ExportSettings(source=source, agent="nobody"))
    assert caught.value.reason == (
        "no MAGMA exporter 'nobody' in entry-point group 'magma.export.gen'; installed: none"
    )
