"""Playing one situation: save and report it, ask the agent, execute and report each answer.

`Explorer` plays the situations of one run (its docstring tells how a candidate is
executed and how a branch names its faulty candidate); `Node` is a situation about to
be played.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass

from gencoach.protocol import AgentInput
from gencoach.protocol.base import JsonObject
from gencoach.sim.agent_io import AgentAsker, Answer
from gencoach.sim.branches import Budget, SavedSituation, SituationBook
from gencoach.sim.episode import Episode
from gencoach.sim.options import GenerationOptions, GenerationReport
from gencoach.sim.reporting import EventSender, active_errors, execution_record, stage_info


@dataclass(frozen=True)
class Node:
    """A situation about to be reported and asked: its episode and its place in the graph."""

    env: int
    episode: Episode
    parent_candidate_id: str | None
    instruction: dict[str, str]
    memory: JsonObject
    attempt_ids: tuple[int, ...] = ()
    faulty: str | None = None
    """The first candidate of the branch's current stage with a seeded mistake."""


def seeded_mistake(answer: Answer) -> bool:
    """Whether the agent says it made this decision wrong on purpose."""
    for step in answer.internal_steps:
        elements = step.get("input_elements")
        if isinstance(elements, dict) and elements.get("mistake"):
            return True
    return False


def message(kind: str, content: str) -> dict[str, str]:
    """An agent instruction: `{"type": "user"|"env", "content": ...}`."""
    return {"type": kind, "content": content}


class Explorer:
    """Plays situations of one run, numbering its situations, inputs and candidates.

    Every candidate is executed on its own copy of the situation's episode. An invalid or
    error candidate is a leaf, reported executed with its status and no stage end; a
    valid one is executed in the world and judged by the stage. The situation that
    follows a candidate carries the environment feedback (`env`) while its stage goes on,
    or the next stage's instruction (`user`) after a stage success; any other stage end
    ends the branch, and the book keeps the state after it, its stage open again, for a
    recovery from that decision.

    A branch remembers the first decision of its current stage that carries a seeded
    mistake (the reference agent reports the mistake it made on purpose as
    `input_elements.mistake` of its internal step): a stage end that is not an optimal
    success names it as `faulty_candidate_id`, the truth the coaching's diagnoses are
    measured against.
    """

    def __init__(
        self,
        options: GenerationOptions,
        run_id: str,
        recorder: EventSender,
        asker: AgentAsker,
        book: SituationBook,
        budget: Budget,
        report: GenerationReport,
    ) -> None:
        self.options = options
        self.run_id = run_id
        self.recorder = recorder
        self.asker = asker
        self.book = book
        self.budget = budget
        self.report = report
        self._situations = itertools.count()
        self._candidates = itertools.count()

    async def situation(self, node: Node) -> list[Node]:
        """Play a situation; the nodes that continue its branch (first valid ones, in order)."""
        number = next(self._situations)
        situation_id = f"e{node.env}-s{number}"
        episode, state = node.episode, node.episode.snapshot()
        agent_input = AgentInput.model_validate(
            {
                "id": number,
                "instruction": node.instruction,
                "tools": episode.tools(),
                "attributes": episode.attributes(),
                "memory": node.memory,
                "num_outputs": self.options.branches,
            }
        )
        # The teacher may read the state as soon as gencoach knows the situation.
        await self.recorder.save_state(number, state)
        saved = SavedSituation(state, node.env, node.attempt_ids, node.faulty)
        self.book.save(situation_id, saved)
        await self.recorder.emit(
            "situation.created",
            situation_id=situation_id,
            parent_candidate_id=node.parent_candidate_id,
            link="next",
            stage=stage_info(episode.stage),
            input=agent_input.model_dump(mode="json"),
            active_errors=active_errors(episode.active_errors),
            coaching_attempt_ids=list(node.attempt_ids),
        )
        self.report.situations += 1
        answers = await self.asker.ask(f"{self.run_id}:{situation_id}", agent_input)
        continuing: list[Node] = []
        for answer in answers:
            candidate_id = f"e{node.env}-c{next(self._candidates)}"
            await self._candidate(candidate_id, situation_id, answer, node.attempt_ids)
            following = await self.execute(candidate_id, answer, Episode.restore(state), saved)
            if following is not None and len(continuing) < self.options.continue_per_situation:
                continuing.append(following)
        await self.recorder.flush()
        return continuing

    async def _candidate(
        self, candidate_id: str, situation_id: str, answer: Answer, attempt_ids: tuple[int, ...]
    ) -> None:
        fields = answer.created_fields(candidate_id, situation_id, attempt_ids)
        await self.recorder.emit("candidate.created", **fields)

    async def execute(
        self,
        candidate_id: str,
        answer: Answer,
        episode: Episode,
        before: SavedSituation,
        *,
        coached: bool = False,
    ) -> Node | None:
        """Execute and report one candidate answering `before` (`coached`: a branch order's);
        the node that follows it if its branch goes on."""
        env, attempt_ids = before.env, before.attempt_ids
        self.budget.spend()
        if answer.decision is None or answer.invalid_reason is not None:
            status = "invalid" if answer.invalid_reason is not None else "error"
            self.report.answers.count(coached=coached, status=status, error=answer.error)
            await self.recorder.emit(
                "candidate.executed",
                candidate_id=candidate_id,
                execution={},
                status=status,
                stage_end=None,
            )
            return None
        step = episode.step(answer.decision.model_dump(mode="json"))
        end = step.outcome.stage_end
        self.report.answers.count(coached=coached, status=step.outcome.status)
        faulty = before.faulty or (candidate_id if seeded_mistake(answer) else None)
        stage_end: JsonObject | None = None
        feedback = message("env", json.dumps(step.feedback, ensure_ascii=False))
        reported: dict[str, object] = {}
        if end is not None:
            stage_end = end.model_dump(mode="json")
            if faulty is not None and (end.event, end.state) != ("success", "optimal"):
                stage_end["faulty_candidate_id"] = faulty
            if end.event != "success":  # no situation follows: a recovery's starts from it
                reported["feedback"] = feedback
        await self.recorder.emit(
            "candidate.executed",
            candidate_id=candidate_id,
            execution=execution_record(step),
            status=step.outcome.status,
            stage_end=stage_end,
            **reported,
        )
        if end is None:
            instruction = feedback
        else:
            self.report.answers.end(end.event)
            if end.event != "success":
                after = SavedSituation(episode.reopened(), env, attempt_ids, faulty)
                self.book.save_after(candidate_id, after)
            if step.next_stage_id is None:
                return None
            instruction, faulty = message("user", episode.instruction()), None
        return Node(env, episode, candidate_id, instruction, answer.memory, attempt_ids, faulty)
