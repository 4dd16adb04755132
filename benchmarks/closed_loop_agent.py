"""The closed-loop benchmark's agent and what it measures of each decision.

The agent is the env agent (`gencoach agent serve --env`) with its LLM policy, built as
`env_app` builds it, with the policy wrapped in a `Recorder`: every decision the model
makes is kept with the situation it answered (the input's `gym_state`: seed and actions),
so the benchmark counts the decisions of a campaign and scores each one against the
adapter's oracle (`score`), the same privileged oracle the coach's teacher uses.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from gencoach.agents.app import create_agent_app
from gencoach.agents.memory import Memory
from gencoach.agents.policy import Decided, Policy
from gencoach.agents.reference.agent import reference_info
from gencoach.agents.reference.reference_coach import ReferenceCoach
from gencoach.agents.sessions import SessionStore
from gencoach.integrations.gymnasium import GYM_STATE_KEY, GymAdapter
from gencoach.integrations.gymnasium.agent import EnvAgentOptions, env_policy
from gencoach.integrations.gymnasium.episode import GymEpisode, invalid_reason
from gencoach.integrations.gymnasium.oracle_policy import OraclePolicy
from gencoach.protocol import AgentDecision, AgentInput


@dataclass
class Decision:
    """One answer of the model: the situation (seed, actions before it) and the decision,
    or None when the answer could not be read as one (`error`)."""

    seed: int
    actions: list[Any]
    decision: AgentDecision | None
    error: str | None


@dataclass
class Recorder:
    """A policy that records every decision of the policy it wraps."""

    inner: Policy
    prompt_log: Path | None = None
    """Where each prompt the model is sent is appended (one JSON list a line)."""
    decisions: list[Decision] = field(default_factory=list)

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """The inner policy's candidates, each recorded."""
        body = getattr(self.inner, "body", None)
        if body is not None and self.prompt_log is not None:
            with self.prompt_log.open("a") as log:
                log.write(json.dumps(body(agent_input, memory)["messages"]) + "\n")
        decided = await self.inner.decide(agent_input, memory, count)
        state = agent_input.extra_keys.get(GYM_STATE_KEY) or {}
        for candidate in decided:
            error = candidate.error.code if candidate.error is not None else None
            self.decisions.append(
                Decision(
                    seed=int(state.get("seed", -1)),
                    actions=list(state.get("actions", [])),
                    decision=candidate.decision,
                    error=error,
                )
            )
        return decided

    def take(self) -> list[Decision]:
        """The decisions recorded so far, forgotten here."""
        taken, self.decisions = self.decisions, []
        return taken


def serve_agent(
    adapter: GymAdapter, options: EnvAgentOptions, prompt_log: Path | None = None
) -> tuple[str, Recorder, Any]:
    """The env agent with its policy recorded, served by uvicorn in a thread on loopback;
    its URL, its recorder and the server (set `should_exit` to stop it).

    Its coach repairs with the teacher's expected call first, as the env agent's coach
    does, and falls back on the oracle (`fallback`), not on the model deciding again: a
    one-decision trajectory (the model's first answer unreadable) is diagnosed by
    gencoach's single-step rule without asking the teacher, and the privileged oracle is
    the coach the benchmark means, so every correction is right.
    """
    policy, _ = env_policy(adapter, options)
    coach = ReferenceCoach(OraclePolicy(adapter), "fallback")
    recorder = Recorder(policy, prompt_log)
    sessions = SessionStore(structured_output=options.structured_output)
    app = create_agent_app(reference_info(options.agent_id), recorder, coach, sessions=sessions)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}", recorder, server


@dataclass
class Scores:
    """What the decisions of one evaluation show."""

    episodes: int = 0
    successes: int = 0
    decisions: int = 0
    format_errors: int = 0
    """Answers that are no valid call of an offered tool (unreadable, text, wrong tool or
    arguments): the `format` route's kind."""
    mistakes: int = 0
    """Decisions other than the oracle's call: what the oracle teacher would coach."""
    after_mistake: int = 0
    """Decisions that follow a mistake in the same episode."""
    recovered: int = 0
    """Of those, the oracle's call from where the mistake left the env."""
    ends: dict[str, int] = field(default_factory=dict)

    def success_interval(self) -> tuple[float, float]:
        """The Wilson 95% interval of the success rate."""
        return wilson(self.successes, self.episodes)


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def score(adapter: GymAdapter, decisions: list[Decision]) -> Scores:
    """Replay each episode's decisions (in the order made) and judge each against the oracle."""
    by_seed: dict[int, list[Decision]] = defaultdict(list)
    for decision in decisions:
        by_seed[decision.seed].append(decision)
    scores = Scores(episodes=len(by_seed))
    for seed, made in by_seed.items():
        mistaken = False
        for one in made:
            episode = GymEpisode.restore(adapter, seed, one.actions)
            right = adapter.oracle_call(episode.env, seed, episode.actions)
            valid = one.decision is not None and invalid_reason(adapter, one.decision) is None
            scores.decisions += 1
            scores.format_errors += not valid or not (one.decision and one.decision.tool_calls)
            followed = (
                valid
                and one.decision is not None
                and right is not None
                and len(one.decision.tool_calls) == 1
                and adapter.action(one.decision.tool_calls[0]) == adapter.action(right)
            )
            if mistaken:
                scores.after_mistake += 1
                scores.recovered += followed
            mistaken = not followed
            scores.mistakes += mistaken
            if valid and one.decision is not None and one.decision.tool_calls:
                judged = episode.play(one.decision)
                if judged.event is not None:
                    scores.ends[judged.event] = scores.ends.get(judged.event, 0) + 1
                    scores.successes += judged.event == "success"
    return scores
