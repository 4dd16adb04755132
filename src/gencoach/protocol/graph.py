"""MAGMA-GEN 2.0 saved-graph records: `config.json` and one `<id>.json` per situation."""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal, Self

from pydantic import ConfigDict, Field, field_validator, model_validator

from gencoach.protocol.agent import AgentDecision, AgentError, AgentInput
from gencoach.protocol.base import ContractModel, FieldError, JsonObject
from gencoach.protocol.coaching import DECISION_SOURCE_KEY, DecisionSource, as_decision_source

GRAPH_FORMAT_MAJOR: Final = 2
GRAPH_FORMAT_VERSION: Final = "2.0"
"""The `generator_version` gencoach writes: the MAGMA-GEN format version, not its own."""
UNKNOWN_AGENT: Final = "unknown"
"""The `agent_id` and `agent_version` of a run whose agent never announced its identity."""

# PEP 440, as MAGMA-GEN parses `generator_version` (with `packaging.version.Version`).
_PEP440 = re.compile(
    r"""^\s*v?
    (?:[0-9]+!)?                                                # epoch
    (?P<major>[0-9]+)(?:\.[0-9]+)*                              # release
    (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?  # pre-release
    (?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?               # post-release
    (?:[-_.]?dev[-_.]?[0-9]*)?                                  # development release
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?                         # local version
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)

CandidateStatus = Literal[
    "invalid", "ongoing", "finished", "optimal", "suboptimal", "error", "unassessed"
]
NonNegativeInt = Annotated[int, Field(ge=0)]


class Producer(ContractModel):
    """Which package wrote a save, and its version."""

    package: str
    version: str
    # When the run started (seconds since the epoch); saves written before it was kept
    # do not say.
    started_at: float | None = None


class StageDescription(ContractModel):
    """One stage of a task, as MAGMA Core describes it (`BaseStage.get_description()` plus
    `stage_name`); MAGMA's further keys (`target_tool_calls`, `text_only`, ...) are kept."""

    model_config = ConfigDict(extra="allow")

    goal_description: str
    instruction: str = ""
    stage_name: str = ""


class TaskDescription(ContractModel):
    """A run's task as MAGMA Core describes it (`get_loaded_task_descriptions()`): the text,
    one description per stage id (in order), and the hint coaches may read."""

    task_description: str | None
    stages_description: list[StageDescription]
    coaching_hint: str | None = None


class RunConfig(ContractModel):
    """A run's `config.json`; `export_complete` turns true only once every file is written."""

    run_id: str
    scenario: str
    target: str
    target_kind: str
    generator_version: str
    export_complete: bool
    agent_id: str
    agent_version: str
    roots: list[NonNegativeInt]
    env_options: JsonObject
    # An object as MAGMA-GEN writes it; saves of gencoach before 0.2 hold the text alone.
    task_description: TaskDescription | str
    error_statistics: JsonObject
    # Written by MAGMA-GEN (the folder it exported to); optional so our saves may omit it.
    data_folder: str | None = None
    producer: Producer | None = None
    # gencoach's: the run's `run.started` said every call addresses one agent, so exports
    # leave `target_robot_name` out (absent in MAGMA-GEN's saves: false).
    single_agent: bool = False

    @field_validator("generator_version")
    @classmethod
    def _format_major(cls, value: str) -> str:
        match = _PEP440.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a version string like '2.0'")
        if int(match["major"]) != GRAPH_FORMAT_MAJOR:
            raise ValueError(
                f"save format {value!r} has major {int(match['major'])}; "
                f"only MAGMA-GEN {GRAPH_FORMAT_MAJOR}.x saves can be read"
            )
        return value

    @model_validator(mode="after")
    def _unique_roots(self) -> RunConfig:
        for index, root in enumerate(self.roots):
            if root in self.roots[:index]:
                raise FieldError(f"roots.{index}", f"duplicate root situation {root}")
        return self


class SituationLink(ContractModel):
    """An edge from a candidate to the situation that follows it."""

    situation_id: int
    kind: Literal["next", "alternative"]


class StageScore(ContractModel):
    """Outcome counts of the trajectories below a candidate that ended a stage, for one stage."""

    model_config = ConfigDict(serialize_by_alias=True)

    optimal: NonNegativeInt
    non_optimal: NonNegativeInt = Field(alias="non-optimal")
    unassessed: NonNegativeInt
    total_child: NonNegativeInt

    @classmethod
    def from_counts(
        cls, optimal: int, non_optimal: int, unassessed: int, total: int | None = None
    ) -> Self:
        """Build a score; `total` (with failed trajectories) defaults to the three counts' sum."""
        assessed = optimal + non_optimal + unassessed
        return cls.parse(
            {
                "optimal": optimal,
                "non-optimal": non_optimal,
                "unassessed": unassessed,
                "total_child": assessed if total is None else total,
            }
        )

    @model_validator(mode="after")
    def _total_covers_counts(self) -> StageScore:
        # Failed and exceeded trajectories count in the total only (MAGMA-GEN's StageStat).
        total = self.optimal + self.non_optimal + self.unassessed
        if self.total_child < total:
            reason = (
                f"must be at least optimal + non-optimal + unassessed = {total}, "
                f"got {self.total_child}"
            )
            raise FieldError("total_child", reason)
        return self


DescendantScore = dict[Annotated[str, Field(pattern=r"^stage_[0-9]+$")], StageScore]
"""Descendant outcome counts keyed `stage_<k>`."""


class CoachingMarker(ContractModel):
    """How a candidate took part in coaching; all defaults, so MAGMA's `{}` loads."""

    type_coaching: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$")] | None = None
    coaching_role: Literal["fixed_node", "recovery_node"] | None = None
    diagnosed_as_faulty: bool = False
    diagnostic_types: list[str] = Field(default_factory=list)
    trajectory_diagnostic_applied: bool = False


class CandidateRecord(ContractModel):
    """One answer to a situation, its execution and what came of it."""

    id: int
    parent_id: int | None
    stage_id: int
    kind: Literal["agent", "simulation_resume"]
    response_status: Literal["completed", "error"]
    output: AgentDecision | None = None
    error: AgentError | None = None
    internal_steps: list[JsonObject] = Field(default_factory=list)
    execution: JsonObject = Field(default_factory=dict)
    status: CandidateStatus
    execution_finished: bool
    score: DescendantScore = Field(default_factory=dict)
    coaching: CoachingMarker = Field(default_factory=CoachingMarker)
    coaching_source: JsonObject = Field(default_factory=dict)
    coaching_attempt_ids: list[int] = Field(default_factory=list)
    origin: Literal["model", "coaching", "simulation"]
    links: list[SituationLink] = Field(default_factory=list)

    @property
    def decision_source(self) -> DecisionSource | None:
        """Where a correction's decision came from (`coaching_source.decision_source`;
        `unknown` when the save does not say); None for a candidate that is no correction."""
        if self.origin != "coaching":
            return None
        return as_decision_source(self.coaching_source.get(DECISION_SOURCE_KEY))

    @model_validator(mode="after")
    def _consistent(self) -> CandidateRecord:
        if self.response_status == "completed" and (self.output is None or self.error is not None):
            raise FieldError("response_status", "completed responses need an output and no error")
        if self.response_status == "error" and (self.output is not None or self.error is None):
            raise FieldError("response_status", "error responses need an error and no output")
        seen: set[int] = set()
        for index, link in enumerate(self.links):
            if link.situation_id in seen:
                reason = f"duplicate link to situation {link.situation_id}"
                raise FieldError(f"links.{index}.situation_id", reason)
            seen.add(link.situation_id)
        return self


class SituationRecord(ContractModel):
    """A saved situation (`<id>.json`): the agent's input and the candidates answering it."""

    id: int
    stage_id: int
    parent_id: int | None
    input: AgentInput
    candidates: list[CandidateRecord]

    @model_validator(mode="after")
    def _own_candidates(self) -> SituationRecord:
        # As MAGMA-GEN's reader: a candidate's parent is the candidate that led to its
        # situation (the situation's own parent), and it answers the situation's stage.
        seen: set[int] = set()
        for index, candidate in enumerate(self.candidates):
            where = f"candidates.{index}"
            if candidate.id in seen:
                raise FieldError(f"{where}.id", f"duplicate candidate id {candidate.id}")
            seen.add(candidate.id)
            if candidate.parent_id != self.parent_id:
                reason = (
                    f"must be the situation's parent_id {self.parent_id}, got {candidate.parent_id}"
                )
                raise FieldError(f"{where}.parent_id", reason)
            if candidate.stage_id != self.stage_id:
                reason = (
                    f"must be the situation's stage_id {self.stage_id}, got {candidate.stage_id}"
                )
                raise FieldError(f"{where}.stage_id", reason)
        return self
