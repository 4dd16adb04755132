"""The controller daemon: one task group running intake, saves and the HTTP API.

Shutdown has two phases. On SIGTERM or SIGINT the controller stops taking work
(intake finishes and acknowledges the batch in hand, the API stops accepting
connections, queued saves are written), waiting up to `grace_s`; whatever is still
running then is cancelled and named in the log. A second signal cancels at once.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.logs import get_logger
from gencoach.protocol import AnyEvent, RunFinished
from gencoach.service.api import ApiContext, create_app
from gencoach.service.graphstore import Applied, GraphStore
from gencoach.service.httpserver import HttpServer
from gencoach.service.intake import Intake, IntakeOptions
from gencoach.service.persist import Persister

log = get_logger("controller")


@dataclass(frozen=True)
class ControllerOptions:
    """Everything the controller needs from the settings, resolved at the edge."""

    redis_url: str
    key_prefix: str
    output_dir: Path
    intake: IntakeOptions
    api_host: str
    api_port: int
    api_token: str | None
    saved_ttl_s: int
    grace_s: float


class Controller:
    """The daemon's parts and their lifetimes."""

    def __init__(self, options: ControllerOptions) -> None:
        self.options = options
        self.keys = Keys(options.key_prefix)
        self.client = Redis.from_url(options.redis_url)
        self.store = GraphStore(self.client, self.keys)
        self.persister = Persister(self.store, options.output_dir, options.saved_ttl_s)
        self.intake = Intake(
            self.client, self.keys, self.store, options.intake, on_applied=self._after_apply
        )
        context = ApiContext(self.client, self.keys, self.store, self.intake, options.api_token)
        self.http = HttpServer(create_app(context), options.api_host, options.api_port)
        self._saves: MemoryObjectSendStream[str]
        self._saves_out: MemoryObjectReceiveStream[str]
        self._saves, self._saves_out = anyio.create_memory_object_stream[str](1000)
        self._stopping = False
        self._stop_requested = anyio.Event()
        self._saves_done = anyio.Event()

    async def _after_apply(self, done: list[tuple[AnyEvent, Applied]]) -> None:
        for event, _ in done:
            if isinstance(event, RunFinished):
                await self._saves.send(event.run_id)

    async def _save_loop(self, *, task_status: TaskStatus[None]) -> None:
        # Finished runs a previous controller acknowledged but never saved come first.
        for run_id in await self.store.runs_in_state("finished"):
            await self._saves.send(run_id)
        task_status.started()
        async with self._saves_out:
            async for run_id in self._saves_out:
                try:
                    await self.persister.save(run_id)
                except Exception:  # one bad save must not stop the others
                    log.exception("run.save_failed", run_id=run_id)
        self._saves_done.set()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run until a signal (or `stop()`) and the graceful shutdown are done."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_signals, tg)
                await tg.start(self._save_loop)
                await tg.start(self.intake.run)
                await tg.start(self.http.run)
                log.info(
                    "controller.ready",
                    api=f"http://{self.options.api_host}:{self.http.port}",
                    consumer=self.options.intake.consumer,
                )
                task_status.started()
                await self._wait_drained()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.client.aclose()
            log.info("controller.stopped", **vars(self.intake.counters))

    async def _wait_drained(self) -> None:
        await self._stop_requested.wait()
        while self.intake.running or self.http.running:  # noqa: ASYNC110 - both are flags
            await anyio.sleep(0.05)
        await self._saves.aclose()  # the save loop writes what is queued, then ends
        await self._saves_done.wait()

    def stop(self) -> None:
        """Begin the graceful shutdown: stop taking work, let work in hand finish."""
        if self._stopping:
            return
        self._stopping = True
        self._stop_requested.set()
        self.intake.stop()
        self.http.stop()

    async def _watch_signals(self, tg: anyio.abc.TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                if self._stopping:
                    log.warning("controller.forced_stop", signal=signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return
                log.info("controller.stopping", signal=signal.Signals(signum).name)
                self.stop()
                tg.start_soon(self._deadline, tg)

    async def _deadline(self, tg: anyio.abc.TaskGroup) -> None:
        await anyio.sleep(self.options.grace_s)
        busy = [
            name
            for name, running in (("intake", self.intake.running), ("api", self.http.running))
            if running
        ]
        log.warning("controller.grace_expired", grace_s=self.options.grace_s, still_running=busy)
        tg.cancel_scope.cancel()


async def run_controller(options: ControllerOptions) -> None:
    """Run a controller until it is stopped by a signal."""
    await Controller(options).run()


async def save_run(options: ControllerOptions, run_id: str) -> Path | None:
    """Save one run now (a finished one is also marked saved); None for an unknown run."""
    client = Redis.from_url(options.redis_url)
    try:
        store = GraphStore(client, Keys(options.key_prefix))
        return await Persister(store, options.output_dir, options.saved_ttl_s).save(run_id)
    finally:
        await client.aclose()
