"""gencoach's saves as MAGMA-GEN reads them: `SavedGraph`, its scoring, its viewer."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from magma_core.simulation.agents import BadAgentAnswer
from magma_core.simulation.data_structures import Situation
from magma_gen.graph import (
    AgentNode,
    NodeResult,
    SituationNode,
    StageEndStatus,
    StepStatusSummary,
)
from magma_gen.storage.reader import SavedGraph
from pydantic import TypeAdapter

from conftest import Processes, answers, free_port, wait_until

# The stage end a saved status stands for, as MAGMA-GEN's `candidate_record` writes it
# (`invalid` and `finished` are answers whose stage went on).
STAGE_ENDS = {
    "optimal": StageEndStatus.OPTIMAL,
    "suboptimal": StageEndStatus.SUBOPTIMAL,
    "unassessed": StageEndStatus.UNASSESSED,
    "error": StageEndStatus.ERROR,
}


def magma_scores(graph: SavedGraph) -> dict[int, dict[str, object]]:
    """Each candidate's descendant score as MAGMA-GEN's own graph computes it."""
    situations = {
        sid: SituationNode(
            Situation(memory=dict(record.input.memory)), record.stage_id, 1, None, None
        )
        for sid, record in graph.situations.items()
    }
    agents: dict[int, AgentNode] = {}
    for sid, record in graph.situations.items():
        for candidate in record.candidates:
            answer = BadAgentAnswer(
                say="", raw_action="", reason="saved", source_node_id=sid, agent_step_id=1
            )
            node = AgentNode(situations[sid], candidate.id, answer)
            node.stage_end = STAGE_ENDS.get(candidate.status, StageEndStatus.ONGOING)
            if candidate.kind == "simulation_resume":
                node.mark_internal_execution()
            situations[sid].add_child(node)
            agents[candidate.id] = node
    for candidate in graph.candidates.values():
        node = agents[candidate.id]
        for link in candidate.links:
            child = situations[link.situation_id]
            child.parent = node
            if link.kind == "next":
                assert node.child is None, f"candidate {candidate.id} has two next situations"
                node.add_child(child)
            else:
                node.add_alternative_child(child)
    for root in graph.metadata["roots"]:
        situations[root].compute_node_result()
    return {cid: (node.get_node_result() or NodeResult()).to_dict() for cid, node in agents.items()}


def test_every_demo_save_loads_with_magma_gen_and_scores_as_magma_gen_scores(
    demo_saves: list[Path],
) -> None:
    """`SavedGraph` loads each save; every candidate's score is MAGMA-GEN's own."""
    for folder in demo_saves:
        graph = SavedGraph(folder)
        assert graph.candidates, f"{folder.name}: no candidate"
        expected = magma_scores(graph)
        saved = {cid: candidate.score for cid, candidate in graph.candidates.items()}
        differing = {
            cid: (saved[cid], expected[cid]) for cid in saved if saved[cid] != expected[cid]
        }
        assert differing == {}, f"{folder.name}: saved vs MAGMA-GEN scores differ"


def test_every_demo_save_has_magma_gen_task_descriptions_statuses_and_executions(
    demo_saves: list[Path],
) -> None:
    """`task_description` is MAGMA's object (one description per stage); a candidate whose
    stage went on after its execution is `finished`, never `ongoing`; an invalid answer is
    never executed; every execution is a MAGMA-GEN `StepStatusSummary`."""
    summary = TypeAdapter(StepStatusSummary)
    for folder in demo_saves:
        graph = SavedGraph(folder)
        described = graph.metadata["task_description"]
        assert set(described) == {"task_description", "stages_description", "coaching_hint"}
        stages = {record.stage_id for record in graph.situations.values()}
        assert len(described["stages_description"]) > max(stages)
        for stage in described["stages_description"]:
            assert {"goal_description", "instruction", "stage_name"} <= set(stage)
        for candidate in graph.candidates.values():
            if candidate.execution_finished:
                assert candidate.status != "ongoing", f"{folder.name}: {candidate.id}"
            if candidate.status == "invalid":
                assert not candidate.execution_finished, f"{folder.name}: {candidate.id}"
            if candidate.execution_finished:
                step = summary.validate_python(candidate.execution)
                assert summary.dump_python(step, mode="json") == candidate.execution


@pytest.fixture
def viewer(demo_saves: list[Path], magma_python: Path, processes: Processes) -> str:
    """The URL of MAGMA-GEN's viewer (`magma_gen_gui`) serving the demo's saves."""
    (root,) = {folder.parent for folder in demo_saves}
    port = free_port()
    start = "import sys; from magma_gen_gui.server import main; sys.exit(main())"
    args = ["--output-dir", str(root), "--port", str(port)]
    processes.start("viewer", [str(magma_python), "-c", start, *args])
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: processes.check_alive() or answers(f"{url}/api/health"), 30, "the viewer")
    return url


def test_the_magma_gen_viewer_shows_every_demo_save(viewer: str, demo_saves: list[Path]) -> None:
    """The viewer lists each save as finished and answers 200 on its graph and every node."""
    listing = requests.get(f"{viewer}/api/runs", timeout=10)
    assert listing.status_code == 200
    runs = {run["name"]: run for run in listing.json()}
    assert set(runs) == {folder.name for folder in demo_saves}
    with requests.Session() as http:
        for name, run in runs.items():
            assert run["status"] == "finished", (name, run["reason"])
            graph = http.get(f"{viewer}/api/runs/{run['id']}/graph", timeout=10)
            assert graph.status_code == 200, (name, graph.text)
            nodes = graph.json()["nodes"]
            assert nodes, name
            assert graph.json()["stages"], name
            for node in nodes:
                answer = http.get(f"{viewer}/api/runs/{run['id']}/nodes/{node['id']}", timeout=10)
                assert answer.status_code == 200, (name, node["id"], answer.text)
