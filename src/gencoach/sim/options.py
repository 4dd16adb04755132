"""What a generation run is asked to do, and what it did."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gencoach.constants import DEFAULT_PREFIX
from gencoach.sim.scenarios import SCENARIOS
from gencoach.sim.verdict import AnswerTally, run_failure

PositiveInt = Annotated[int, Field(ge=1)]
PositiveFloat = Annotated[float, Field(gt=0)]


class GenerationOptions(BaseModel):
    """Everything a run of the reference generator needs; built once at the edge.

    Report to gencoach through `redis_url` (which also carries branch orders and the
    world states the privileged teacher reads) or `api_url` (events only); with
    neither, the run is standalone and its events go to the log alone.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str = "buttons"
    agent_url: str
    redis_url: str | None = None
    api_url: str | None = None
    api_token: str | None = Field(default=None, repr=False)
    key_prefix: str = DEFAULT_PREFIX
    run_id: str | None = None
    seed: int = 0
    envs: PositiveInt = 1
    branches: PositiveInt = 2
    continue_per_situation: PositiveInt = 1
    concurrency: PositiveInt = 8
    timeout_s: PositiveFloat = 60.0
    max_decisions: PositiveInt | None = None
    max_wall_s: PositiveFloat | None = None
    injection_probability: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    branch_grace_s: Annotated[float, Field(ge=0.0)] = 60.0
    """The longest wait, once every branch ended, for gencoach's settled answer."""
    poll_s: PositiveFloat = 0.5
    log_path: Path | None = None

    @field_validator("scenario")
    @classmethod
    def _known_scenario(cls, value: str) -> str:
        if value not in SCENARIOS:
            raise ValueError(f"unknown scenario {value!r}; valid choices: {', '.join(SCENARIOS)}")
        return value

    @field_validator("agent_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http(s) URL with a host")
        return value

    @field_validator("run_id")
    @classmethod
    def _no_hash_tag(cls, value: str | None) -> str | None:
        if value is not None and (not value or set(value) & set("{}")):
            raise ValueError("a run id is not empty and has no '{' or '}'")
        return value

    @model_validator(mode="after")
    def _one_destination(self) -> GenerationOptions:
        if self.redis_url is not None and self.api_url is not None:
            raise ValueError("report through redis_url or api_url, not both")
        return self

    @property
    def standalone(self) -> bool:
        """Whether the run reports to no gencoach."""
        return self.redis_url is None and self.api_url is None


class GenerationReport(BaseModel):
    """What a run did: its nodes, how its stages ended, the branch orders, why it stopped."""

    run_id: str
    scenario: str
    situations: int = 0
    answers: AnswerTally = Field(default_factory=AnswerTally)
    """The candidates executed: asked of the agent and coached apart, errors, stage ends."""
    orders_executed: int = 0
    orders_skipped: int = 0
    settle_timeouts: int = 0
    """Times the run ended on `branch_grace_s` rather than on gencoach's settled answer."""
    finish_reason: str = ""
    log_path: Path | None = None
    elapsed_s: float = 0.0

    @property
    def candidates(self) -> int:
        """Candidates the agent answered to the run's own situations (not the coached ones)."""
        return self.answers.asked

    @property
    def invalid(self) -> int:
        """Candidates refused by the tool contract."""
        return self.answers.invalid

    @property
    def errors(self) -> int:
        """Error candidates (no decision)."""
        return self.answers.errors

    @property
    def first_error(self) -> str | None:
        """What the agent said about its first error answer (code: message)."""
        return self.answers.first_error

    @property
    def stage_ends(self) -> dict[str, int]:
        """How many stages ended, per event."""
        return self.answers.stage_ends

    def failure(self) -> str | None:
        """Why the run failed (the agent crashed, no stage ended), or None."""
        return run_failure(self.answers.stage_ends, self.answers.first_crash)

    def summary(self) -> str:
        """The report on one line."""
        line = (
            f"run {self.run_id} ({self.scenario}): {self.situations} situations, "
            f"{self.answers.described()}, branch orders: {self.orders_executed} executed, "
            f"{self.orders_skipped} skipped; {self.finish_reason} after {self.elapsed_s:.1f} s"
        )
        if self.settle_timeouts:
            line += " (no settled answer came: ended on --branch-grace-s)"
        if self.log_path is not None:
            line += f"; log: {self.log_path}"
        return line
