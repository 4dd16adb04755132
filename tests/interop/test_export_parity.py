"""MAGMA-GEN's `launch_export` and `gencoach export --agent` give the same rows in the same splits.

Runs in the MAGMA venv (`.venv-magma`, Python 3.12, magma-core 2.0.1 and magma-gen 2.0.0)
against gencoach from the main `.venv`, through the command line only. A small exporter
plugin, registered in the `magma.export.gen` entry-point group by a `.dist-info` folder
on `PYTHONPATH`, is run by both tools on the saves of one `gencoach demo` run, copied
into several folders (including `a`, `a/b` and `a-b`, which sort differently by path
parts and by string, as MAGMA-GEN's own two sorts do).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("magma_gen.launch_export", reason="runs in the MAGMA venv (make interop)")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
GENCOACH = REPO / ".venv" / "bin" / "gencoach"
MAGMA_VENV_PYTHON = REPO / ".venv-magma" / "bin" / "python"
PLUGIN = "parity"
COPIES = ("a", "a/b", "a-b", "c", "d")

PLUGIN_MODULE = '''
"""A MAGMA exporter whose rows show the example id and the shuffled input orders."""
import os

from magma_core.protocol.agent_export import (
    DatasetRenderer,
    ExportRecord,
    ExportResult,
    GenExporter,
)


class Renderer(DatasetRenderer):
    filenames = {"rows": "rows.json"}

    def render(self, channel, example):
        return example


class ParityExporter(GenExporter):
    agent_id = os.environ["PARITY_AGENT_ID"]
    agent_version = os.environ["PARITY_AGENT_VERSION"]

    def __init__(self):
        self.renderer = Renderer()

    def export(self, examples, *, options=None):
        results = []
        for example in examples:
            data = {
                "id": example.example_id,
                "tools": [tool.get("name") for tool in example.input.tools],
                "attributes": list(example.input.attributes),
                "rules": example.input.memory.get("memory_list"),
                "say": example.candidate.output.say,
                "options": options,
            }
            rendered = self.renderer.render("rows", data)
            record = ExportRecord(record_id=example.example_id, dataset="rows", data=rendered)
            results.append(
                ExportResult(example_id=example.example_id, status="exported", records=[record])
            )
        return results
'''


def _magma_python() -> str:
    return str(MAGMA_VENV_PYTHON) if MAGMA_VENV_PYTHON.exists() else sys.executable


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=240, check=False
    )


@pytest.fixture(scope="module")
def demo_saves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The save folders of one short `gencoach demo` run."""
    assert GENCOACH.exists(), (
        f"gencoach is not installed at {GENCOACH}; run `make .venv/.installed`"
    )
    output = tmp_path_factory.mktemp("demo")
    done = _run(
        [
            str(GENCOACH),
            "demo",
            "--scenario",
            "buttons",
            "--scenario",
            "text_question",
            "--envs",
            "1",
            "--max-wall-s",
            "15",
            "--output",
            str(output),
        ],
        dict(os.environ),
        output,
    )
    assert done.returncode == 0, f"gencoach demo failed:\n{done.stdout}\n{done.stderr}"
    (graphs,) = output.glob("*/graphs")
    saves = sorted(path.parent for path in graphs.glob("*/config.json"))
    assert len(saves) == 2, f"expected one save per scenario, found {saves}"
    return graphs


@pytest.fixture
def plugin_env(tmp_path: Path, demo_saves: Path) -> dict[str, str]:
    """An environment where both tools find the plugin, and gencoach finds magma-core."""
    plugins = tmp_path / "plugins"
    info = plugins / "parity_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (plugins / "parity_plugin.py").write_text(PLUGIN_MODULE)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: parity-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[magma.export.gen]\n{PLUGIN} = parity_plugin:ParityExporter\n"
    )
    spec = importlib.util.find_spec("magma_core")
    assert spec is not None, "magma-core is not installed here"
    assert spec.origin is not None, "magma-core is not a regular package here"
    magma = tmp_path / "magma-core"
    magma.mkdir()
    (magma / "magma_core").symlink_to(Path(spec.origin).parent, target_is_directory=True)
    config = json.loads(next(demo_saves.glob("*/config.json")).read_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{plugins}{os.pathsep}{magma}"
    env["PARITY_AGENT_ID"] = config["agent_id"]
    env["PARITY_AGENT_VERSION"] = config["agent_version"]
    return env


@pytest.fixture
def source(tmp_path: Path, demo_saves: Path) -> Path:
    """The demo's saves copied into folders whose path and string orders differ."""
    root = tmp_path / "source"
    saves = sorted(path.parent for path in demo_saves.glob("*/config.json"))
    for index, name in enumerate(COPIES):
        target = root / name
        target.mkdir(parents=True, exist_ok=True)
        for file in saves[index % len(saves)].glob("*.json"):
            shutil.copy2(file, target / file.name)
    return root


def _magma_export(
    source: Path, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [_magma_python(), "-m", "magma_gen.launch_export", str(source), "--agent", PLUGIN]
    return _run([*command, *extra], env, source.parent)


def _gencoach_export(
    source: Path, env: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [str(GENCOACH), "export", str(source), "--agent", PLUGIN, "--no-progress"]
    return _run([*command, *extra], env, source.parent)


def _rows(path: Path) -> list[str]:
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def _digest(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
        if path.is_file()
    }


def test_folder_split_gives_the_same_rows_in_the_same_splits(
    source: Path, plugin_env: dict[str, str], tmp_path: Path
) -> None:
    """Both tools put the same folders on each side and the same rows in each split file."""
    options = tmp_path / "options.json"
    options.write_text('{"flavour": "parity"}')
    settings = ["--validation-ratio", "0.3", "--split-seed", "5", "--shuffle-seed", "9"]
    settings += ["--options", str(options)]
    magma = _magma_export(source, plugin_env, *settings)
    assert magma.returncode == 0, f"launch_export failed:\n{magma.stdout}\n{magma.stderr}"
    magma_folder = source / "datasets"
    before = _digest(magma_folder)

    ours = _gencoach_export(source, plugin_env, "--split-by", "folder", *settings)
    assert ours.returncode == 0, f"gencoach export failed:\n{ours.stdout}\n{ours.stderr}"
    our_folder = source / "datasets" / f"agent-{PLUGIN}"

    magma_split = json.loads((magma_folder / "export_manifest.json").read_text())["split"]
    our_split = json.loads((our_folder / "export_manifest.json").read_text())["split"]
    for side in ("train", "validation"):
        magma_side = sorted(
            Path(folder).relative_to(source).as_posix() for folder in magma_split[side]
        )
        assert sorted(item["folder"] for item in our_split[side]) == magma_side, side
    assert magma_split["validation"], "the split must hold out at least one folder"
    for name in ("rows.json", "rows_train.json", "rows_validation.json"):
        assert _rows(our_folder / name) == _rows(magma_folder / name), name
    assert _rows(our_folder / "rows.json"), "the plugin must have exported rows"
    assert _digest(magma_folder) == before, "gencoach changed MAGMA-GEN's export"


def test_the_producer_identity_rule_matches_and_any_agent_overrides(
    source: Path, plugin_env: dict[str, str]
) -> None:
    """Saves of another agent version: MAGMA-GEN refuses them all, so does gencoach unless told."""
    env = {**plugin_env, "PARITY_AGENT_VERSION": "9.9.9"}
    magma = _magma_export(source, env)
    assert magma.returncode != 0
    assert "No compatible generation graphs found" in magma.stderr

    ours = _gencoach_export(source, env, "--split-by", "folder")
    assert ours.returncode == 2, ours.stderr
    assert "error: no compatible save under" in ours.stderr
    assert "MAGMA exporter 'parity' accepts" in ours.stderr
    assert "incompatible producer identity/version" in ours.stderr
    assert not (source / "datasets").exists()

    forced = _gencoach_export(source, env, "--split-by", "folder", "--any-agent")
    assert forced.returncode == 0, forced.stderr
    assert "from 5 saves" in forced.stdout


def _after_fallback(save: Path) -> set[str]:
    """The `<situation>:<candidate>` ids of a save's answers that are, or follow, a
    fallback-made correction, read from the save files as written."""
    answers: dict[int, tuple[int, Any, Any]] = {}
    for path in save.glob("*.json"):
        if path.stem.isdigit():
            for candidate in json.loads(path.read_text())["candidates"]:
                source = (candidate.get("coaching_source") or {}).get("decision_source")
                answers[candidate["id"]] = (int(path.stem), candidate.get("parent_id"), source)
    found = set()
    for candidate_id, (situation_id, _, _) in answers.items():
        current: Any = candidate_id
        while current in answers:
            if answers[current][2] == "fallback":
                found.add(f"{situation_id}:{candidate_id}")
                break
            current = answers[current][1]
    return found


def test_exclude_fallbacks_is_gencoach_s_and_leaves_fallback_made_answers_out(
    demo_saves: Path, plugin_env: dict[str, str], tmp_path: Path
) -> None:
    """`exclude_fallbacks` in `--agent`'s options is honoured by gencoach's selection: the
    exporter never sees the answers at or below a fallback-made correction (the reference
    agent's format repairs are its fallback's) and never receives the option itself."""
    saves = sorted(path.parent for path in demo_saves.glob("*/config.json"))
    save = max(saves, key=lambda folder: len(_after_fallback(folder)))
    excluded = _after_fallback(save)
    assert excluded, f"the demo's saves must hold a fallback-made correction: {saves}"
    source = tmp_path / "source"
    shutil.copytree(save, source / save.name)

    def rows(options: str, out: str) -> list[str]:
        path = tmp_path / f"{out}.json"
        path.write_text(options)
        done = _gencoach_export(
            source, plugin_env, "--options", str(path), "--out", str(tmp_path / out)
        )
        assert done.returncode == 0, f"gencoach export failed:\n{done.stdout}\n{done.stderr}"
        exported = json.loads((tmp_path / out / "rows.json").read_text())
        assert {json.dumps(row["options"]) for row in exported} == {'{"flavour": "parity"}'}
        return sorted(row["id"] for row in exported)

    every = rows('{"flavour": "parity"}', "every")
    kept = rows('{"flavour": "parity", "exclude_fallbacks": true}', "kept")
    assert set(every) & excluded, f"no exported answer follows a fallback ({excluded})"
    assert kept == [row for row in every if row not in excluded]
