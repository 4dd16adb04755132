"""An oracle teacher for any adapter with an `oracle`: a `type: python` backend.

`OracleTeacher(MyAdapter)` is the backend's endpoint (docs/integrations.md §8); its
docstring says how it diagnoses and why it replays one job at a time.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from gencoach.errors import ContractError
from gencoach.integrations.gymnasium.adapter import GymAdapter
from gencoach.integrations.gymnasium.episode import GymEpisode, invalid_reason
from gencoach.protocol import AgentDecision
from gencoach.protocol.decision_text import format_decision
from gencoach.protocol.jobs import JobStep
from gencoach.sim.teacher import select_cases

NO_STATE = "the privileged teacher had no teacher state for these steps"


class OracleTeacher:
    """A python backend answering diagnosis contracts from an adapter's oracle.

    Each situation's teacher state is `{adapter, seed, actions}` (saved by the run). For a
    diagnosis the teacher rebuilds every diagnosable step's env by replay and walks the
    step's calls against the oracle: the first call whose env action differs from the
    oracle's (or a decision without calls, or one the tools refuse) is the faulty
    decision, and the oracle's call from there, with its arguments when the oracle answers
    a whole tool call, is the expected decision. The suboptimal contract gets that first
    departure, or `false` when every decision followed the oracle. Without teacher states
    it blames the last decision and says so.

    A `python` backend's function runs in a worker thread, one per job in flight (up to
    `workers.concurrency` at once), and many envs are not thread-safe even as separate
    instances (module-level state, native libraries). Unless the adapter says it is
    (`GymAdapter.thread_safe`), the teacher replays one job at a time in each process;
    every job replays envs of its own, never another job's.
    """

    def __init__(self, make_adapter: Callable[..., GymAdapter]) -> None:
        self.make_adapter = make_adapter
        # A class says whether its envs are thread-safe; a factory function is taken not to.
        self.serialized = not getattr(make_adapter, "thread_safe", False)
        self._replaying = threading.Lock()

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """Hold this process's replay turn, unless the adapter's envs are thread-safe."""
        with self._replaying if self.serialized else nullcontext():
            yield

    def __call__(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        schema: dict[str, Any] | None = None,
        model: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> str:
        """Answer the contract `schema` names (see the class docstring)."""
        contract = (schema or {}).get("title")
        job = context or {}
        if contract == "CaseSelectionAnswer":
            return json.dumps(select_cases(messages))
        if contract == "RewriteAnswer":
            return json.dumps({"say": "I do not know."})
        with self._turn():
            found = self.first_departure(job)
        if contract == "SuboptimalDiagnosisAnswer" or job.get("route") == "suboptimal":
            if found is None:
                return json.dumps(
                    {
                        "suboptimal": False,
                        "decision_idx": None,
                        "reason": "every decision followed the oracle",
                    }
                )
            index, why, _ = found
            return json.dumps({"suboptimal": True, "decision_idx": index, "reason": why})
        if found is None:
            last = max(len(_diagnosable(job)), 1)
            reason = f"no decision departs from the oracle ({NO_STATE}?); it names the last one"
            return json.dumps({"decision_index": last, "reason": reason, "expected_decision": None})
        index, why, expected = found
        return json.dumps({"decision_index": index, "reason": why, "expected_decision": expected})

    def first_departure(self, job: dict[str, Any]) -> tuple[int, str, dict[str, Any]] | None:
        """The first diagnosable step (1-based) that departs from the oracle: why, and the
        oracle's decision from its situation."""
        states = job.get("teacher_state")
        if not isinstance(states, dict):
            return None
        for index, step in enumerate(_diagnosable(job), start=1):
            state = states.get(str(step.input.id))
            if not isinstance(state, dict):
                continue
            found = self._judge(state, step)
            if found is not None:
                return index, f"Decision {index}: {found[0]}.", found[1]
        return None

    def _judge(self, state: dict[str, Any], step: JobStep) -> tuple[str, dict[str, Any]] | None:
        adapter = self.make_adapter(**state.get("adapter", {}))
        episode = GymEpisode.restore(adapter, int(state["seed"]), state["actions"])
        decision = step.output
        calls = decision.tool_calls if decision is not None else []
        refusal = invalid_reason(adapter, decision) if decision is not None else "no decision"
        for number, call in enumerate(calls or [None], start=1):
            oracle = adapter.oracle_call(episode.env, episode.seed, episode.actions)
            if oracle is None:
                return None
            best = adapter.action(oracle)
            expected = {"say": "", "tool_calls": [oracle.model_dump(mode="json")]}
            named = format_decision(AgentDecision(tool_calls=[oracle]))
            if refusal is not None:
                return f"{refusal}; the oracle's call was {named}", expected
            if call is None:
                return f"it took no action; the oracle's call was {named}", expected
            if adapter.action(call) != best:
                why = f"call {number} ({call.name}) departs from the oracle's {named}"
                return why, expected
            *_, terminated, truncated, _ = episode.env.step(best)
            episode.actions.append(best)
            if terminated or truncated:
                return None
        return None


def _diagnosable(job: dict[str, Any]) -> list[JobStep]:
    steps = []
    for raw in job.get("trajectory") or []:
        try:
            step = JobStep.parse(raw)
        except ContractError:
            continue
        if step.diagnosable:
            steps.append(step)
    return steps
