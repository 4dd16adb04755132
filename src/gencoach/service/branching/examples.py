"""Validated examples: proven diagnoses kept as cases for later automatic diagnosis.

`Examples` registers a case once its attempt is proven and keeps the first fully optimal
trajectory per `ExampleKey`, for suboptimal diagnosis; `ExampleStore` holds each key's
cases as one JSON file under `coaching.examples.cache_dir`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
from pydantic import BaseModel, Field

from gencoach.config import Settings
from gencoach.graph.files import write_json_atomic
from gencoach.protocol.jobs import ExampleCase
from gencoach.runtime.logs import get_logger
from gencoach.service.coaching.requests import CoachingRequest
from gencoach.service.dispatching.job_building import job_steps
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.nodes import RunGraph
from gencoach.service.store.trajectory import Step
from gencoach.workers.prompts import format_trajectory

log = get_logger("examples")

MAX_CASES = 5


class ExampleKey(BaseModel, frozen=True):
    """What makes cases comparable: agent, scenario, request kind, stage, terminal event."""

    agent_id: str
    scenario: str
    kind: str
    stage_id: int
    terminal_event: str

    def file_name(self) -> str:
        """The key's file: readable prefix, digest for uniqueness."""
        text = json.dumps(self.model_dump(), sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        return f"{self.scenario}-{self.kind}-stage{self.stage_id}-{digest}.json"[-120:]


class ExampleFile(BaseModel):
    """One key's cases and optimal trajectory."""

    key: ExampleKey
    cases: list[ExampleCase] = Field(default_factory=list)
    optimal_trajectory: str | None = None


class ExampleStore:
    """The cases on disk, at most `max_cases` per key.

    Each key is one JSON file, written atomically under a file lock, so runs, restarts
    and several controllers share them.
    """

    def __init__(self, cache_dir: Path, max_cases: int = MAX_CASES) -> None:
        self.cache_dir = cache_dir
        self.max_cases = max_cases

    def _path(self, key: ExampleKey) -> Path:
        return self.cache_dir / key.file_name()

    def load(self, key: ExampleKey) -> ExampleFile:
        """The key's cases (none yet: empty)."""
        path = self._path(key)
        if not path.is_file():
            return ExampleFile(key=key)
        return ExampleFile.model_validate_json(path.read_bytes())

    @contextmanager
    def _locked(self, key: ExampleKey) -> Iterator[ExampleFile]:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with (self.cache_dir / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self.load(key)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def register(self, key: ExampleKey, case: ExampleCase) -> bool:
        """Keep a proven case; False when the key is full or already holds it."""
        with self._locked(key) as stored:
            if len(stored.cases) >= self.max_cases or case in stored.cases:
                return False
            stored.cases.append(case)
            write_json_atomic(self._path(key), stored.model_dump(mode="json"))
            return True

    def keep_optimal(self, key: ExampleKey, trajectory: str) -> bool:
        """Keep the first fully optimal trajectory of a key; False if one is kept already."""
        with self._locked(key) as stored:
            if stored.optimal_trajectory is not None:
                return False
            stored.optimal_trajectory = trajectory
            write_json_atomic(self._path(key), stored.model_dump(mode="json"))
            return True


_EVENTS = {"suboptimal": "finish_suboptimal"}


def key_for(agent_id: str, graph: RunGraph, route: str, stage_id: int) -> ExampleKey:
    """The key of a request's cases: agent, scenario, request kind, stage, terminal event."""
    kind = "suboptimal" if route == "suboptimal" else "failure"
    return ExampleKey(
        agent_id=agent_id,
        scenario=graph.started.scenario,
        kind=kind,
        stage_id=stage_id,
        terminal_event=_EVENTS.get(route, route),
    )


def trajectory_text(steps: list[Step]) -> str:
    """A trajectory as the diagnosis prompts number it."""
    return format_trajectory(job_steps(steps))


class Examples:
    """Registration on proof, the optimal trajectory per key, and reuse in diagnosis."""

    def __init__(self, store: GraphStore, settings: Callable[[], Settings]) -> None:
        self.graphs = store
        self.settings = settings

    def _files(self) -> ExampleStore:
        return ExampleStore(self.settings().coaching.examples.cache_dir)

    async def _key(self, graph: RunGraph, route: str, stage_id: int) -> ExampleKey:
        agent_id, _ = await self.graphs.agent_identity(graph.run_id)
        return key_for(agent_id, graph, route, stage_id)

    async def for_diagnosis(
        self, graph: RunGraph, route: str, stage_id: int
    ) -> tuple[list[ExampleCase], str | None]:
        """The cases and the optimal trajectory a diagnosis may be shown (if configured)."""
        if not self.settings().coaching.examples.use_for_automatic:
            return [], None
        stored = await anyio.to_thread.run_sync(
            self._files().load, await self._key(graph, route, stage_id)
        )
        return stored.cases, stored.optimal_trajectory

    async def proven(self, request: CoachingRequest, graph: RunGraph, steps: list[Step]) -> None:
        """Keep a proven request's diagnosis as a case (if configured)."""
        diagnosis = request.diagnosis
        if not self.settings().coaching.examples.register_successful or diagnosis is None:
            return
        if request.human or request.route in ("format", "text_rewrite"):
            return
        stage = steps[-1].situation.stage
        case = ExampleCase(
            stage_goal=stage.goal,
            trajectory=trajectory_text([step for step in steps if step.diagnosable]),
            decision_index=diagnosis.decision_index,
            reason=diagnosis.explanation,
            expected_decision=diagnosis.expected_decision or "",
        )
        key = await self._key(graph, request.route, request.stage_id)
        if await anyio.to_thread.run_sync(self._files().register, key, case):
            log.info("example.registered", key=key.model_dump(), request_id=request.request_id)

    async def optimal(self, graph: RunGraph, steps: list[Step]) -> None:
        """Keep the first fully optimal trajectory of its stage (if configured)."""
        if not self.settings().coaching.examples.register_successful:
            return
        stage_steps = [step for step in steps if step.in_current_stage]
        key = await self._key(graph, "suboptimal", stage_steps[-1].stage_id)
        text = trajectory_text(stage_steps)
        if await anyio.to_thread.run_sync(self._files().keep_optimal, key, text):
            log.info("example.optimal_kept", key=key.model_dump())
