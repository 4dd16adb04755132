"""What a run's start and end set going: its agent's registration, its save, its agent's
unregistration.

`RunLife` is told of each run start and end by intake and the reconciler, and runs the
work each sets going as a task of its own.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus

from gencoach.config import Settings
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.isolation import guarded
from gencoach.service.saving.saves import SaveLoop
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.watches import RENEW_S


class RunLife:
    """Starts each run's registration and each run's save and unregistration.

    Intake tells it of each `run.started` and `run.finished` it applied; the reconciler
    tells it of runs it finds abandoned, never registered (a crash, Redis away) or finished
    and unsaved. While a run's registration is under way here, its deadline in
    `Keys.registrations` is kept ahead, so no reconciliation pass takes it over. Each piece
    of work runs as its own task, so a slow agent or a large save never holds up intake,
    the reconciler's pass, or another run.
    """

    def __init__(
        self,
        store: GraphStore,
        registry: AgentRegistry,
        saves: SaveLoop,
        settings: Callable[[], Settings],
    ) -> None:
        self.store = store
        self.registry = registry
        self.saves = saves
        self.settings = settings
        self._tasks: TaskGroup | None = None
        self._registering: set[str] = set()
        self._started: set[str] = set()  # since the reconciler last took them

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hold the task group the work runs in, until cancelled with the controller;
        meanwhile keep the registrations under way here from coming due."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            task_status.started()
            while True:
                await anyio.sleep(RENEW_S)
                if self._registering:
                    await guarded("run.registrations_renew_failed", self._renew)()

    def started(self, run_id: str, agent_url: str) -> None:
        """A run just applied: note it as open and register its agent."""
        self._started.add(run_id)
        self.register(run_id, agent_url)

    def register(self, run_id: str, agent_url: str) -> None:
        """Ask the run's agent for its routes, unless that is already under way."""
        if run_id in self._registering:
            return
        self._registering.add(run_id)
        self._group().start_soon(self._register, run_id, agent_url)

    def finished(self, run_id: str) -> None:
        """A run finished, or was found abandoned: save it and unregister its agent."""
        self._group().start_soon(guarded("run.finish_failed", self._finish, run_id=run_id), run_id)

    async def unsaved(self, run_id: str) -> None:
        """A finished run found unsaved (its save may have been lost in a crash)."""
        await self.saves.queue(run_id)

    async def requests_moved(self, run_id: str) -> None:
        """A finished run's requests moved after its save may have read them."""
        await self.saves.requests_moved(run_id)

    def take_started(self) -> set[str]:
        """The runs started since the last call (the reconciler watches them for loss)."""
        started, self._started = self._started, set()
        return started

    async def _renew(self) -> None:
        # One command for every registration under way here: a pass looks at a run only
        # once this controller stopped renewing it (it died).
        await self.store.watches.registering(sorted(self._registering))

    def _group(self) -> TaskGroup:
        if self._tasks is None:
            raise RuntimeError("RunLife.run must be started before work is handed to it")
        return self._tasks

    async def _register(self, run_id: str, agent_url: str) -> None:
        register = guarded("run.register_failed", self.registry.register, run_id=run_id)
        try:
            await register(run_id, agent_url, self.settings())
        finally:
            self._registering.discard(run_id)

    async def _finish(self, run_id: str) -> None:
        await self.saves.queue(run_id)
        started = await self.store.started(run_id)
        if started is not None:
            await self.registry.unregister(run_id, started.agent_url)
