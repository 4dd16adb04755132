"""The controller daemon: one task group running intake, coaching, saves and the API.

`Controller` wires the stages and runs them, stops them in two phases and reloads the
config on SIGHUP; `run_controller` is the daemon's entry point.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import anyio
import httpx
from anyio.abc import TaskGroup, TaskStatus
from fastapi import FastAPI

from gencoach.config import Settings, scrubbing
from gencoach.constants import CONTROLLER_GROUP, Keys
from gencoach.errors import ConfigError
from gencoach.limits import StageLimits
from gencoach.metrics import MetricsRecorder as MetricsRecorder
from gencoach.runtime.logs import get_logger
from gencoach.service.branching.coached_branches import BranchRecorder
from gencoach.service.branching.examples import Examples
from gencoach.service.branching.interventions import Interventions
from gencoach.service.branching.reinjection import Reinjector
from gencoach.service.coaching.budgets import Budgets
from gencoach.service.coaching.lanes import TerminalLanes
from gencoach.service.coaching.registry import AgentRegistry
from gencoach.service.coaching.requests import RequestStore
from gencoach.service.leases import Lease
from gencoach.service.metrics import ControllerMetrics
from gencoach.service.pipeline import CoachingPipeline, Dispatcher
from gencoach.service.pools import (
    API_SOCKET_TIMEOUT_S,
    LOOP_CONNECTIONS,
    LOOP_WAIT_S,
    pooled_client,
)
from gencoach.service.recovery.housekeeping import Housekeeper
from gencoach.service.recovery.reconcile import Reconciler
from gencoach.service.runlife import RunLife
from gencoach.service.saving.persist import Persister
from gencoach.service.saving.saves import SaveLoop
from gencoach.service.store.consumer import ConsumerOptions, StreamConsumer
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.intake import Intake, IntakeOptions
from gencoach.service.web.api import ApiContext, create_app
from gencoach.service.web.httpserver import BodyLimit, Concurrency, ConnectionLimits, HttpServer

log = get_logger("controller")


class _Loop(Protocol):
    @property
    def running(self) -> bool: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ControllerOptions:
    """Everything the controller needs, resolved at the edge (the CLI)."""

    settings: Settings
    redis_url: str
    consumer: str
    dispatcher: Callable[[], Dispatcher]
    reload: Callable[[], Settings] | None = None
    # Adds routes to the API (the console) from what the routes work with.
    extend_api: Callable[[FastAPI, ApiContext], None] | None = None

    @property
    def api_token(self) -> str | None:
        """The bearer token mutating routes require, if any."""
        token = self.settings.api.token
        return token.get_secret_value() if token is not None else None


class Controller:
    """The daemon's parts and their lifetimes.

    Shutdown has two phases. On SIGTERM or SIGINT the controller stops taking work
    (intake and the coaching streams finish and acknowledge the batch in hand, the API
    stops accepting connections, queued saves are written), waiting up to `grace_s`;
    whatever is still running then is cancelled and named in the log. A second signal
    cancels at once. SIGHUP re-reads the config file: new budgets and route switches
    apply from the next admission.
    """

    def __init__(self, options: ControllerOptions) -> None:
        self.options = options
        self._settings = options.settings
        scrubbing.install(scrubbing.secret_values(options.settings))
        section = options.settings.controller
        self.keys = Keys(options.settings.redis.key_prefix)
        api = options.settings.api
        self.client = pooled_client(options.redis_url, LOOP_CONNECTIONS, LOOP_WAIT_S, None)
        self.api_client = pooled_client(
            options.redis_url, api.max_concurrent_requests, api.busy_wait_s, API_SOCKET_TIMEOUT_S
        )
        self.http_client = httpx.AsyncClient(timeout=30.0)
        self.store = GraphStore(
            self.client,
            self.keys,
            section.gap_timeout_s,
            cache_entries=section.node_cache_entries,
            cache_ttl_s=section.node_cache_ttl_s,
        )
        self.lease = Lease(self.client, self.keys, options.consumer, section.lease_s)
        dispatcher = options.dispatcher()
        self.metrics = ControllerMetrics(
            self.client,
            self.api_client,
            self.keys,
            dispatcher.backlogs,
            lambda: self.lanes.gauges(),
        )
        recorder = self.metrics.recorder
        self.requests = RequestStore(self.client, self.keys, recorder, self._lease_s)
        self.limits = StageLimits(self.client, self.keys)
        self.budgets = Budgets(self.client, self.keys, lambda: self._settings.coaching)
        self.persister = Persister(
            self.store, self.limits, options.settings.output_dir, section.saved_ttl_s, self.budgets
        )
        self.registry = AgentRegistry(self.client, self.keys, self.http_client)
        self.recorder = BranchRecorder(self.client, self.keys, self.store, recorder)
        self.examples = Examples(self.store, self.settings)
        self.reinjector = Reinjector(
            self.store,
            self.requests,
            self.recorder,
            self.http_client,
            self.budgets,
            self.examples,
            self.registry,
            metrics=recorder,
            claims=self.lease,
        )
        self.coach = CoachingPipeline(
            self.client,
            self.keys,
            self.store,
            self.requests,
            self.limits,
            self.registry,
            self.settings,
            self.budgets,
            dispatcher,
            self.reinjector,
            self.examples,
            metrics=recorder,
        )
        self.saves = SaveLoop(self.store, self.persister)
        self.runs = RunLife(self.store, self.registry, self.saves, self.settings)
        self.intake = Intake(
            self.client,
            self.keys,
            self.store,
            IntakeOptions(
                consumer=options.consumer,
                batch_size=section.batch_size,
                claim_idle_s=section.claim_idle_s,
                lease_s=section.lease_s,
                max_event_bytes=section.max_event_bytes,
                dead_letters_kept=section.dead_letters_kept,
            ),
            runs=self.runs,
            executions=self.reinjector,
            agent_allowed=options.settings.agent_allowed,
            metrics=recorder,
            alive=self.lease.alive,
        )
        self.lanes = TerminalLanes(
            self.client,
            self.keys,
            options.consumer,
            self.registry,
            self.coach.on_terminal,
            self.settings,
        )
        self.terminals = self._consumer(self.keys.terminals, self.lanes.on_terminals)
        self.results = self._consumer(self.keys.results, self.coach.on_results)
        self.reconciler = Reconciler(
            self.store,
            self.requests,
            self.limits,
            self.coach,
            self.reinjector,
            dispatcher,
            self.registry,
            self.settings,
            self.runs,
        )
        self.housekeeper = Housekeeper(
            self.client, self.keys, section.saved_ttl_s, section.housekeeping_s
        )
        context = self._api_context(recorder)
        app = create_app(context)
        if options.extend_api is not None:
            options.extend_api(app, context)
        served = Concurrency(
            BodyLimit(app, api.max_body_bytes), api.max_concurrent_requests, api.busy_wait_s
        )
        bounds = ConnectionLimits(api.header_timeout_s, api.body_timeout_s, api.max_connections)
        self.http = HttpServer(served, api.host, api.port, bounds)
        self._stop_requested = anyio.Event()
        self._stopping = False

    def _api_context(self, recorder: MetricsRecorder) -> ApiContext:
        """What the routes work with, on the API's own Redis pool (not the loops')."""
        client = self.api_client
        section = self._settings.controller
        store = GraphStore(
            client,
            self.keys,
            cache_entries=section.node_cache_entries,
            cache_ttl_s=section.node_cache_ttl_s,
        )
        requests = RequestStore(client, self.keys, recorder, self._lease_s)
        limits = StageLimits(client, self.keys)
        budgets = Budgets(client, self.keys, lambda: self._settings.coaching)
        interventions = Interventions(
            store,
            requests,
            budgets,
            BranchRecorder(client, self.keys, store, recorder),
            self.settings,
            self.reinjector,
        )
        return ApiContext(
            client,
            self.keys,
            store,
            self.intake,
            limits,
            requests,
            budgets,
            interventions,
            self.options.api_token,
            self.metrics.render,
        )

    def settings(self) -> Settings:
        """The settings in force (reloaded on SIGHUP)."""
        return self._settings

    def _lease_s(self) -> float:
        return self._settings.coaching.lease_s

    def _consumer(self, stream: str, handler: Callable[..., object]) -> StreamConsumer:
        section = self._settings.controller
        options = ConsumerOptions(
            stream=stream,
            group=CONTROLLER_GROUP,
            consumer=self.options.consumer,
            batch_size=50,
            claim_idle_s=section.claim_idle_s,
            lease_s=section.lease_s,
        )
        return StreamConsumer(
            self.client,
            options,
            handler,  # type: ignore[arg-type]
            alive=self.lease.alive,
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until a signal (or `stop()`) and the graceful shutdown are done."""
        try:
            async with anyio.create_task_group() as tg:
                self._tasks = tg
                tg.start_soon(self._watch_signals, tg)
                await tg.start(self.lease.run)  # given up when the group ends
                await tg.start(self.saves.run, tg)
                await tg.start(self.runs.run)
                await tg.start(self.lanes.run)
                await tg.start(self.reinjector.run)
                loops = (self.intake, self.terminals, self.results, self.reconciler)
                for loop in (*loops, self.housekeeper, self.metrics):
                    await tg.start(loop.run)
                await tg.start(self.http.run)
                log.info(
                    "controller.ready",
                    api=f"http://{self._settings.api.host}:{self.http.port}",
                    consumer=self.options.consumer,
                )
                task_status.started()
                await self._wait_drained()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.http_client.aclose()
                await self.client.aclose()
                await self.api_client.aclose()
            log.info(
                "controller.stopped", **vars(self.intake.counters), **vars(self.coach.counters)
            )

    async def _wait_drained(self) -> None:
        await self._stop_requested.wait()
        loops: tuple[_Loop, ...] = (
            self.intake,
            self.terminals,
            self.lanes,
            self.results,
            self.http,
        )
        while any(loop.running for loop in loops):  # noqa: ASYNC110 - they are flags
            await anyio.sleep(0.05)
        await self.saves.close()  # the save loop writes what is queued, then ends

    def stop(self) -> None:
        """Begin the graceful shutdown: stop taking work, let work in hand finish."""
        if self._stopping:
            return
        self._stopping = True
        self._stop_requested.set()
        stopping = (
            self.intake,
            self.terminals,
            self.lanes,
            self.results,
            self.reconciler,
            self.http,
        )
        for loop in (*stopping, self.housekeeper, self.metrics):
            loop.stop()

    def reload(self) -> None:
        """Re-read the config file; budgets and routes apply from the next admission."""
        if self.options.reload is None:
            return
        try:
            fresh = self.options.reload()
        except ConfigError as error:
            log.error("config.reload_refused", problems=[str(p) for p in error.problems])
            return
        self._settings = self._settings.model_copy(update={"coaching": fresh.coaching})
        log.info("config.reloaded", limits=fresh.coaching.limits.model_dump())

    async def _watch_signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    self.reload()
                    continue
                if self._stopping:
                    log.warning("controller.forced_stop", signal=signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return
                log.info("controller.stopping", signal=signal.Signals(signum).name)
                self.stop()
                tg.start_soon(self._deadline, tg)

    async def _deadline(self, tg: TaskGroup) -> None:
        grace_s = self._settings.controller.grace_s
        await anyio.sleep(grace_s)
        named: dict[str, _Loop] = {
            "intake": self.intake,
            "terminals": self.terminals,
            "results": self.results,
        }
        busy = [name for name, loop in named.items() if loop.running]
        log.warning("controller.grace_expired", grace_s=grace_s, still_running=busy)
        tg.cancel_scope.cancel()


async def run_controller(options: ControllerOptions) -> None:
    """Run a controller until it is stopped by a signal."""
    await Controller(options).run()
