"""Whether a generation failed in a way its exit code must say, and how its answers count.

`run_failure` names the cause that makes `gencoach sim run` and `gencoach sim gym` exit 1
(docs/integrations.md §9); `AnswerTally` counts the candidates a generator executed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gencoach.protocol import AgentError
from gencoach.sim.agent_io import CALL_FAILED

CRASH_CODES = frozenset({"policy_crashed", CALL_FAILED})
"""Error codes that mean the agent itself broke, not one of its answers."""


@dataclass
class AnswerTally:
    """The candidates a generator executed: its own asks and the coached ones apart."""

    asked: int = 0
    """Candidates the agent answered to the generator's own situations."""
    coached: int = 0
    """Candidates gencoach's branch orders brought (corrections executed)."""
    invalid: int = 0
    errors: int = 0
    first_error: str | None = None
    """`code: message` of the first error candidate."""
    first_crash: str | None = None
    """`code: message` of the first candidate that says the agent crashed."""
    stage_ends: dict[str, int] = field(default_factory=dict)

    def count(self, *, coached: bool, status: str, error: AgentError | None = None) -> None:
        """Count one executed candidate (`status`: invalid, error or anything else)."""
        if coached:
            self.coached += 1
        else:
            self.asked += 1
        self.invalid += status == "invalid"
        if status != "error":
            return
        self.errors += 1
        said = f"{error.code}: {error.message}" if error is not None else "error: no detail"
        self.first_error = self.first_error or said
        if error is None or error.code in CRASH_CODES:
            self.first_crash = self.first_crash or said

    def end(self, event: str) -> None:
        """Count a stage end."""
        self.stage_ends[event] = self.stage_ends.get(event, 0) + 1

    def add(self, other: AnswerTally) -> None:
        """Add another run's counts to these."""
        self.asked += other.asked
        self.coached += other.coached
        self.invalid += other.invalid
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        self.first_crash = self.first_crash or other.first_crash
        for event, count in other.stage_ends.items():
            self.stage_ends[event] = self.stage_ends.get(event, 0) + count

    def described(self) -> str:
        """`N candidates asked, M coached (I invalid, E errors[; first: ...]), stage ends: ...`."""
        first = f"; first: {self.first_error}" if self.first_error else ""
        ends = ", ".join(f"{event} {count}" for event, count in sorted(self.stage_ends.items()))
        return (
            f"{self.asked} candidates asked, {self.coached} coached "
            f"({self.invalid} invalid, {self.errors} errors{first}), "
            f"stage ends: {ends or 'none'}"
        )


def run_failure(
    stage_ends: Mapping[str, int], first_crash: str | None, *, resumed: bool = False
) -> str | None:
    """Why the generation failed (the agent crashed, no stage ended), or None.

    The agent crashed when a candidate's error is in `CRASH_CODES`: `policy_crashed`, the
    toolkit's code for a policy that raised, or `agent_call_failed`, no answer at all.
    Other error candidates (a model's unreadable answer, a refused backend) are counted
    and the first is named in the summary, but do not fail the run: an LLM agent gives
    some in any long campaign.

    `resumed`: some runs were taken up after an earlier invocation, whose stage ends are
    not counted here, so ending none now is no failure.
    """
    if first_crash is not None:
        return f"the agent crashed: {first_crash}"
    if not resumed and not any(stage_ends.values()):
        return (
            "no stage ended: every branch stopped on an invalid or error answer, or the run "
            "was cut short (see the counts above)"
        )
    return None
