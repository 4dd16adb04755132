"""Hand-built trajectories for the teacher: played on a real episode, states saved in Redis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from gencoach.constants import Keys
from gencoach.protocol import AgentInput
from gencoach.protocol.jobs import DiagnosisJob, JobStep, RewriteJob
from gencoach.sim import Episode, PressSequence
from gencoach.sim.reporting import execution_record

Json = dict[str, Any]
FIRST_INPUT_ID = 100


@dataclass
class Played:
    """A trajectory played on an episode: the job steps, the episode after them, the outcome."""

    steps: list[JobStep]
    episode: Episode
    last_event: str | None
    # The teacher states saved, by input id (as the worker hands them over).
    states: dict[str, Any]


def play(
    client: redis.Redis | None,
    run_id: str,
    scenario: str,
    decisions: list[Json],
    *,
    seed: int = 0,
    diagnosable_from: int = 0,
) -> Played:
    """Play the decisions; save each situation's state (input ids from 100) when given a client."""
    episode = Episode.start(scenario, seed)
    steps: list[JobStep] = []
    states: dict[str, Any] = {}
    last_event = None
    for number, decision in enumerate(decisions):
        input_id = FIRST_INPUT_ID + number
        if client is not None:
            client.hset(Keys().teacher_state(run_id), str(input_id), episode.to_json())
            states[str(input_id)] = episode.snapshot().model_dump(mode="json")
        instruction = {"type": "user", "content": episode.instruction()}
        result = episode.step(decision)
        end = result.outcome.stage_end
        last_event = end.event if end is not None else None
        steps.append(
            JobStep.model_validate(
                {
                    "id": number,
                    "input": AgentInput.model_validate(
                        {"id": input_id, "instruction": instruction, "memory": {}}
                    ),
                    "output": decision,
                    "execution": execution_record(result),
                    "status": result.outcome.status,
                    "diagnosable": number >= diagnosable_from,
                }
            )
        )
    return Played(steps, episode, last_event, states)


def diagnosis_context(run_id: str, route: str, played: Played) -> Json:
    """The context a python backend receives: the DiagnosisJob's JSON and teacher states."""
    stage = played.episode.stage
    job = DiagnosisJob.model_validate(
        {
            "request_id": "req-1",
            "run_id": run_id,
            "route": route,
            "backend": "teacher",
            "lease": {"run_id": run_id, "stage_id": stage.id, "request_id": "req-1", "lease_s": 30},
            "stage": {"id": stage.id, "goal": stage.goal, "hint": stage.hint},
            "trajectory": [step.model_dump(mode="json") for step in played.steps],
        }
    )
    return {**job.model_dump(mode="json"), "teacher_state": played.states}


def rewrite_context(run_id: str, played: Played, rejected: str) -> Json:
    """The RewriteJob JSON of a rejected text answer."""
    stage = played.episode.stage
    job = RewriteJob.model_validate(
        {
            "request_id": "req-2",
            "run_id": run_id,
            "backend": "teacher",
            "lease": {"run_id": run_id, "stage_id": stage.id, "request_id": "req-2", "lease_s": 30},
            "stage": {"id": stage.id, "goal": stage.goal, "hint": stage.hint},
            "rejected_answer": rejected,
            "rejection_reason": "wrong colour",
            "trajectory": [step.model_dump(mode="json") for step in played.steps],
        }
    )
    return {**job.model_dump(mode="json"), "teacher_state": played.states}


def sequence(scenario_seed: int = 0) -> tuple[str, ...]:
    """The buttons a `buttons` episode of this seed expects."""
    goal = Episode.start("buttons", scenario_seed).stage.goals[0]
    assert isinstance(goal, PressSequence)
    return goal.buttons


def bins(scenario: str = "sorting", seed: int = 0) -> dict[str, str]:
    """Each object's right bin in a tabletop of this seed."""
    world = Episode.start(scenario, seed).world
    return {obj.id: f"{obj.colour}_bin" for obj in world.objects.values()}
