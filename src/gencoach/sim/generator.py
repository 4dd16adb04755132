"""The reference generator: a scenario played against an agent, branch by branch.

`run_generation` runs a generation as its options say; `Generator` is one run (its
docstring tells a run's life, from its environments to `run.finished`); `Explorer`
(`gencoach.sim.explorer`) plays each situation.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import redis
from anyio.abc import TaskGroup

from gencoach.__about__ import __version__
from gencoach.protocol import BranchOrder
from gencoach.runtime.logs import bound, get_logger
from gencoach.runtime.retrying import RetryPolicy
from gencoach.sim.agent_io import AgentAsker, Answer
from gencoach.sim.branches import (
    Activity,
    Budget,
    SavedSituation,
    SituationBook,
    until_run_may_end,
)
from gencoach.sim.episode import Episode
from gencoach.sim.explorer import Explorer, Node, message
from gencoach.sim.options import GenerationOptions, GenerationReport
from gencoach.sim.reporting import EventSender, task_description
from gencoach.sim.scenarios import get_scenario

GENERATOR_NAME = "gencoach-sim"

log = get_logger("sim.generator")


class Generator:
    """One run: its branches, the branch orders it executes, the events it reports.

    `envs` environments (seeds `seed`, `seed + 1`, ...) start at once. Each situation is
    saved (world state under its input id, for the teacher), reported, and asked for
    `branches` candidates in one request. Every candidate is reported and executed on its
    own copy of the situation; the first `continue_per_situation` valid candidates whose
    stage goes on (or succeeded into the next stage) continue their branch, the others
    end as leaves. After a stage success the next situation carries the next stage's
    instruction as a `user` message; otherwise the agent reads the environment feedback
    `{"infos", "previous_tool_call", "failure_reason"}` as an `env` message. Memory is
    carried per candidate.

    Branch orders are executed as they arrive: the anchor's state is restored, the
    coached candidate executed and acknowledged by its `candidate.executed`, and the
    branch goes on as usual, every node below carrying the attempt id. Once every branch
    has ended, the run asks gencoach whether it is settled (`gencoach.settling`) and
    sends `run.finished` when the answer comes, or after `branch_grace_s` without one (a
    bound, logged), or at once when a budget is spent.
    """

    def __init__(
        self, options: GenerationOptions, run_id: str, recorder: EventSender, asker: AgentAsker
    ) -> None:
        self.options = options
        self.run_id = run_id
        self.recorder = recorder
        self.asker = asker
        self.scenario = get_scenario(options.scenario)
        self.book = SituationBook()
        self.activity = Activity()
        self.budget = Budget(options.max_decisions, options.max_wall_s)
        self.report = GenerationReport(
            run_id=run_id, scenario=options.scenario, log_path=recorder.log_path
        )
        self.explorer = Explorer(
            options, run_id, recorder, asker, self.book, self.budget, self.report
        )
        self._orders_seen: set[str] = set()
        # A read of the orders that Redis refused is tried again every `poll_s`.
        self._reading = RetryPolicy(
            timeout_s=None,
            wait_initial_s=options.poll_s,
            wait_max_s=options.poll_s,
            wait_jitter_s=0,
        )
        self._stopping = False
        self._orders_done = anyio.Event()
        self._tg: TaskGroup | None = None

    async def run(self) -> GenerationReport:
        """Play every environment, execute the branch orders, then finish the run."""
        await self.recorder.emit("run.started", **self._run_fields())
        await self.recorder.flush()
        log.info("sim.run_started", scenario=self.scenario.name, envs=self.options.envs)
        hard_s = math.inf
        if self.options.max_wall_s is not None:
            hard_s = self.options.max_wall_s + self.options.timeout_s + 5.0
        try:
            with anyio.move_on_after(hard_s):
                await self._play()
        except ExceptionGroup as group:
            # A branch that fails (Redis gone, gencoach refusing events) ends the run:
            # raise what went wrong, not the task group's wrapper.
            raise _first(group) from group
        self.report.finish_reason = self.budget.exhausted() or "every branch ended"
        self.report.elapsed_s = round(self.budget.elapsed_s, 3)
        await self.recorder.emit("run.finished", reason=self.report.finish_reason)
        await self.recorder.flush()
        log.info("sim.run_finished", **self.report.model_dump(mode="json"))
        return self.report

    async def _play(self) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for env in range(self.options.envs):
                self._spawn(self._root, env)
            if self.recorder.receives_orders:
                tg.start_soon(self._poll_orders)
            else:
                self._orders_done.set()
            await self._settle()
            self._stopping = True
            await self._orders_done.wait()
            await self.activity.until(lambda count: count == 0)
            tg.cancel_scope.cancel()

    def _run_fields(self) -> dict[str, Any]:
        options = self.options
        return {
            "agent_url": options.agent_url,
            "scenario": self.scenario.name,
            "target": self.scenario.description,
            "target_kind": "scenario",
            "task_description": task_description(self.scenario, options.seed),
            "env_options": {
                "scenario": self.scenario.name,
                "seed": options.seed,
                "envs": options.envs,
                "injection_probability": options.injection_probability,
                "branches": options.branches,
                "continue_per_situation": options.continue_per_situation,
            },
            "generator": {"name": GENERATOR_NAME, "version": __version__},
        }

    def _spawn(self, function: Callable[..., Awaitable[None]], *args: Any) -> None:
        assert self._tg is not None
        self.activity.spawn(self._tg, function, *args)

    async def _settle(self) -> None:
        """Return once no branch runs and gencoach says no order can come (or, as a bound,
        none came `branch_grace_s` after the last branch ended)."""
        if not self.recorder.receives_orders or self.budget.exhausted():
            await self.activity.until(lambda count: count == 0)
            return
        grace_s = self.options.branch_grace_s
        if not await until_run_may_end(self.activity, self.recorder, grace_s):
            self.report.settle_timeouts += 1
            log.warning("sim.settle_timed_out", run_id=self.run_id, waited_s=grace_s)

    async def _root(self, env: int) -> None:
        if self.budget.exhausted():
            return
        episode = Episode.start(
            self.scenario,
            self.options.seed + env,
            injection_probability=self.options.injection_probability,
        )
        await self._explore(Node(env, episode, None, message("user", episode.instruction()), {}))

    async def _explore(self, node: Node | None) -> None:
        while node is not None and not self.budget.exhausted():
            following = await self.explorer.situation(node)
            for extra in following[1:]:
                self._spawn(self._explore, extra)
            node = following[0] if following else None

    async def _poll_orders(self) -> None:
        try:
            while not self._stopping:
                orders: list[BranchOrder] = []
                async for attempt in self._reading.retrying(
                    on=redis.RedisError, log_as="sim.orders_unreadable"
                ):
                    with attempt:
                        if not self._stopping:
                            orders = await self.recorder.branch_orders(self.options.poll_s)
                for order in orders:
                    self._accept(order)
                self.activity.poke()  # a settled answer may have come with the read
        finally:
            self._orders_done.set()

    def _accept(self, order: BranchOrder) -> None:
        with bound(run_id=self.run_id, branch_id=order.branch_id):
            anchor = self.book.anchor(order.anchor)
            if order.candidate_id in self._orders_seen:
                log.info("sim.order_repeated", candidate_id=order.candidate_id)
                return
            if anchor is None or order.run_id != self.run_id:
                log.warning("sim.order_skipped", anchor=order.anchor.situation_id)
                self.report.orders_skipped += 1
                return
            self._orders_seen.add(order.candidate_id)
            self._spawn(self._branch, order, anchor)

    async def _branch(self, order: BranchOrder, anchor: SavedSituation) -> None:
        """Execute a branch order from its anchor's state, then continue the branch."""
        attempts = anchor.attempt_ids
        if order.attempt_id not in attempts:
            attempts = (*attempts, order.attempt_id)
        coached = SavedSituation(anchor.state, anchor.env, attempts, anchor.faulty)
        self.book.save(order.situation_id, coached)
        await self.recorder.save_state(order.input.id, anchor.state, keep=True)
        episode = Episode.restore(anchor.state)
        following = await self.explorer.execute(
            order.candidate_id, Answer.of(order.candidate), episode, coached, coached=True
        )
        await self.recorder.flush()
        self.report.orders_executed += 1
        log.info(
            "sim.order_executed",
            run_id=self.run_id,
            branch_id=order.branch_id,
            anchor=order.anchor.situation_id,
            continues=following is not None,
        )
        await self._explore(following)


def _first(group: ExceptionGroup[Exception]) -> Exception:
    """The first error a task group gathered, unwrapped from nested groups."""
    error: Exception = group.exceptions[0]
    while isinstance(error, ExceptionGroup):
        error = error.exceptions[0]
    return error


def new_run_id(scenario: str) -> str:
    """A fresh run id for a scenario: `sim-<scenario>-<8 hex digits>`."""
    return f"sim-{scenario}-{uuid.uuid4().hex[:8]}"


async def run_generation(options: GenerationOptions) -> GenerationReport:
    """Run a generation as the options say and report what it did.

    A standalone run (no `redis_url` nor `api_url`) writes its events to `log_path`,
    by default `<run_id>.events.jsonl` in the working directory.
    """
    run_id = options.run_id or new_run_id(options.scenario)
    log_path = options.log_path
    if log_path is None and options.standalone:
        log_path = Path(f"{run_id}.events.jsonl")
    recorder = EventSender(
        run_id,
        redis_url=options.redis_url,
        api_url=options.api_url,
        api_token=options.api_token,
        key_prefix=options.key_prefix,
        log_path=log_path,
    )
    limits = httpx.Limits(max_connections=options.concurrency)
    async with recorder, httpx.AsyncClient(timeout=options.timeout_s, limits=limits) as http:
        asker = AgentAsker(options.agent_url, http, options.concurrency, options.timeout_s)
        return await Generator(options, run_id, recorder, asker).run()
