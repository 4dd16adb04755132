"""`gencoach audit` on MAGMA-GEN's own saves: a graph of MAGMA-GEN's nodes, coached with
its own marking methods and written by its `GraphManager.export`, and gencoach's demo
saves as MAGMA-GEN reads them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

from magma_core.domain.agent_call import Call
from magma_core.simulation.agents.answers import ValidAgentAnswer
from magma_core.simulation.data_structures.situation import Situation, UserInstruction
from magma_gen.graph import AgentNode, SituationNode, StageEndStatus
from magma_gen.managers.graph.graph_manager import GraphManager

# A run's own keys of a MAGMA-GEN config (its runner's `run_metadata`), taken from a demo
# save; gencoach's additions (`producer`, `single_agent`) are left out.
MAGMA_KEYS = (
    "run_id", "scenario", "target", "target_kind", "generator_version", "agent_id",
    "agent_version", "env_options", "task_description", "error_statistics",
)  # fmt: skip


def _situation(parent: AgentNode | None) -> SituationNode:
    situation = Situation(memory={}, instruction=UserInstruction("press sw0, then sw4"))
    return SituationNode(situation, 0, 1, parent, None)  # type: ignore[arg-type]


def _candidate(situation: SituationNode, node_id: int, end: StageEndStatus) -> AgentNode:
    answer = ValidAgentAnswer(
        source_node_id=situation.storage_id,
        agent_step_id=1,
        say="",
        calls=[Call("press_button", {"id": "sw0"}, "panda")],
    )
    node = AgentNode(situation, node_id, answer)
    node.stage_end = end
    node.execution_finished = True
    situation.add_child(node)
    return node


def _coached(faulty: AgentNode, node_id: int, attempt: int) -> SituationNode:
    """A replacement of a root decision, as MAGMA-GEN's coaching makes one: a new root."""
    root = _situation(None)
    coached = _candidate(root, node_id, StageEndStatus.OPTIMAL)
    faulty.mark_coaching_handled("failure:diagnosis", True)
    coached.mark_created_by_coaching("failure:diagnosis", "fixed_node")
    coached.add_coaching_attempt_id(attempt)
    coached.coaching_source = {"node_id": faulty.id, "request_id": attempt}
    return root


def _magma_save(folder: Path, template: Path, alternatives: int) -> Path:
    folder.mkdir()
    first = _situation(None)
    faulty = _candidate(first, 0, StageEndStatus.ERROR)
    roots = [first] + [_coached(faulty, 1 + index, index) for index in range(alternatives)]
    GraphManager.export(SimpleNamespace(root_nodes=roots), str(folder))  # type: ignore[arg-type]
    config = json.loads((template / "config.json").read_text())
    headers = {key: config[key] for key in MAGMA_KEYS}
    headers.update(
        export_complete=True,
        roots=[root.storage_id for root in roots],
        data_folder=str(folder),
    )
    (folder / "config.json").write_text(json.dumps(headers))
    return folder


def _audit(gencoach: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(gencoach), "audit", *args], capture_output=True, text=True, timeout=120
    )


def test_a_save_written_by_magma_gen_passes_and_its_alternatives_are_counted(
    gencoach_bin: Path, demo_saves: list[Path], tmp_path: Path
) -> None:
    """MAGMA-GEN's save of a failed first decision replaced twice by coaching passes the
    audit (markers checked on the graph alone: it has no request file); held to one
    alternative per place, the two coached roots are named."""
    folder = _magma_save(tmp_path / "magma-run", demo_saves[0], alternatives=2)
    done = _audit(gencoach_bin, str(folder))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("1 saves, 2 coached candidates (0 recovery)")
    held = _audit(gencoach_bin, str(folder), "--max-alternatives", "1")
    assert held.returncode == 1
    assert "alternatives: 2 coached alternatives start from the run's start" in held.stdout


def test_gencoach_s_demo_saves_pass_the_audit(gencoach_bin: Path, demo_saves: list[Path]) -> None:
    """The demo's saves, which MAGMA-GEN's reader loads (test_saves.py), pass the audit."""
    done = _audit(gencoach_bin, *(str(folder) for folder in demo_saves))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("no violation")
