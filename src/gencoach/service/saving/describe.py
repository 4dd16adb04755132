"""The task description a save records, in MAGMA Core's shape (`describe_task`)."""

from __future__ import annotations

from gencoach.protocol import StageDescription, TaskDescription
from gencoach.service.store.nodes import RunGraph, StoredSituation


def describe_task(graph: RunGraph) -> TaskDescription:
    """The run's task description, as MAGMA-GEN saves it.

    MAGMA-GEN's `config.json` holds `get_loaded_task_descriptions()`: the task's text, one
    description per stage id and a coaching hint; its viewer and coaches index the stage
    descriptions by stage id. A generator that reports that object in `run.started` has it
    saved as is; one that reports the text alone gets each stage described from the first
    situation reported in it (goal, instruction, budgets, hint), and a stage never reached
    described by its id alone.
    """
    reported = graph.started.task_description
    if isinstance(reported, TaskDescription):
        return reported
    first: dict[int, StoredSituation] = {}
    for sid in sorted(graph.situations):
        situation = graph.situations[sid]
        first.setdefault(situation.stage.id, situation)
    count = max(first, default=-1) + 1
    stages = [_describe(stage_id, first.get(stage_id)) for stage_id in range(count)]
    hint = next((s.stage.hint for _, s in sorted(first.items()) if s.stage.hint), None)
    return TaskDescription(task_description=reported, stages_description=stages, coaching_hint=hint)


def _describe(stage_id: int, situation: StoredSituation | None) -> StageDescription:
    name = f"stage_{stage_id}"
    if situation is None:
        return StageDescription(goal_description="", instruction="", stage_name=name)
    stage = situation.stage
    instruction = situation.input.instruction
    return StageDescription.model_validate(
        {
            "goal_description": stage.goal,
            "instruction": instruction.content if instruction.type == "user" else "",
            "stage_name": name,
            "target_tool_calls": stage.target_tool_calls,
            "max_tool_calls": stage.max_tool_calls,
            "linked_to_prev": stage.linked_to_prev,
            "text_only": stage.text_only,
            "request_type": "unknown",
        }
    )
