"""One run of a Gymnasium env under gencoach: its situations, candidates and branch orders.

`GymRun` plays one seed against the agent and executes the branch orders it receives
(its docstring tells a run's life, resumed or not); `RunTally` counts what it did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from gencoach.__about__ import __version__
from gencoach.integrations.gymnasium.adapter import Action, GymAdapter
from gencoach.integrations.gymnasium.episode import GYM_STATE_KEY, GymEpisode, invalid_reason
from gencoach.protocol import AgentInput, BranchOrder, JsonObject
from gencoach.reporting.client import AsyncReporter
from gencoach.reporting.orders import Item, OrderReader
from gencoach.runtime.logs import get_logger
from gencoach.sim.agent_io import AgentAsker, Answer
from gencoach.sim.branches import Activity, until_run_may_end
from gencoach.sim.verdict import AnswerTally

log = get_logger("integrations.run")


@dataclass(frozen=True)
class Saved:
    """A situation a branch can restart from: the action prefix and the attempts above it."""

    actions: tuple[Action, ...]
    attempt_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Node:
    """A situation about to be reported and asked."""

    episode: GymEpisode
    parent_candidate_id: str | None
    instruction: dict[str, str]
    memory: JsonObject
    attempt_ids: tuple[int, ...] = ()


@dataclass
class RunTally(AnswerTally):
    """What one run did: its situations, its candidates (asked and coached apart), its
    orders and its time."""

    situations: int = 0
    orders_executed: int = 0
    orders_skipped: int = 0
    settle_timeouts: int = 0
    """Runs that ended on the bound rather than on gencoach's settled answer."""
    ending_s: float = 0.0
    """Seconds from a run's last batch of events to its end: the wait to end it."""
    env_steps: int = 0
    env_step_s: float = 0.0


class GymRun:
    """One seed of the env played against the agent, with the branch orders it receives.

    The run plays one episode (`reset(seed=seed)`). Each situation is saved (its seed and
    action prefix, as the run's book entry, remembered in the run's generator state, and
    as the situation's teacher state), reported, and asked for `branches` candidates; each
    candidate is executed on its own copy of the env and reported; the first one whose
    stage goes on continues the branch with the env's new observation as an `env`
    message. A branch order restores its anchor (a situation of this run, or one gencoach
    made for an earlier order: `order.situation_id` is recorded as soon as the order is
    accepted), executes the coached decision there and continues the branch, every node
    carrying the attempt id. Once every branch ended, the run waits for gencoach's settled
    answer (at most `settle_timeout_s`), then finishes.

    A run resumed after its generator restarted (`play(recalled=...)`) takes its book and
    its id counters back from the generator state, executes the orders its consumer had
    not acknowledged and any new one, and finishes; branches that were in progress when
    the generator died end where they were.
    """

    def __init__(
        self,
        adapter: GymAdapter,
        run_id: str,
        seed: int,
        reporter: AsyncReporter,
        asker: AgentAsker,
        *,
        agent_url: str,
        branches: int = 1,
        settle_timeout_s: float = 60.0,
        reader: OrderReader | None = None,
    ) -> None:
        self.adapter = adapter
        self.run_id = run_id
        self.seed = seed
        self.reporter = reporter
        self.asker = asker
        self.agent_url = agent_url
        self.branches = branches
        self.settle_timeout_s = settle_timeout_s
        self.reader = reader
        self.tally = RunTally()
        self.book: dict[str, Saved] = {}
        self.activity = Activity()
        self._situations = 0
        self._candidates = 0
        self._seen: set[str] = set()
        self._lock = anyio.Lock()
        self._last_batch_at = 0.0
        self._tg: TaskGroup | None = None
        self.target_steps = 0
        self.max_steps = 0
        self.instruction = ""

    async def play(
        self,
        orders: MemoryObjectReceiveStream[Item] | None,
        recalled: dict[str, Any] | None = None,
    ) -> RunTally:
        """Play the episode and the orders (or, `recalled`, resume the run), then finish it."""
        root = GymEpisode.start(self.adapter, self.seed)
        self.max_steps = _max_steps(self.adapter, root.env)
        self.target_steps = root.plan_length(self.max_steps) or self.max_steps
        instruction = self.instruction = self.adapter.instruction(root.env, root.observation)
        self._last_batch_at = anyio.current_time()
        if recalled:
            self._restore_book(recalled)
        else:
            await self._emit("run.started", **self._run_fields(instruction))
            await self._flush()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if not recalled:
                first = {"type": "user", "content": f"{instruction}\n\n{root.text()}"}
                self._spawn(self._explore, Node(root, None, first, {}))
            if orders is None:
                await self.activity.until(lambda count: count == 0)
            else:
                tg.start_soon(self._take_orders, orders)
                timeout_s = self.settle_timeout_s
                if not await until_run_may_end(self.activity, self.reporter, timeout_s):
                    self.tally.settle_timeouts += 1
                    log.warning("integrations.settle_timed_out", run_id=self.run_id)
            tg.cancel_scope.cancel()
        self.tally.ending_s += anyio.current_time() - self._last_batch_at
        await self._emit("run.finished", reason="every branch ended")
        self.reporter.remember("finished", True)
        await self._flush()
        return self.tally

    def _restore_book(self, recalled: dict[str, Any]) -> None:
        """Take back the situations and id counters a killed generator remembered."""
        ids = recalled.get("ids", {})
        self._situations = int(ids.get("situations", 0))
        self._candidates = int(ids.get("candidates", 0))
        for name, saved in recalled.items():
            if name.startswith(_SITUATION):
                actions, attempts = tuple(saved["actions"]), tuple(saved["attempt_ids"])
                self.book[name.removeprefix(_SITUATION)] = Saved(actions, attempts)

    def _save(self, situation_id: str, saved: Saved) -> None:
        """Book a situation, and remember it with the next batch (before its events)."""
        self.book[situation_id] = saved
        value = {"actions": list(saved.actions), "attempt_ids": list(saved.attempt_ids)}
        self.reporter.remember(f"{_SITUATION}{situation_id}", value)

    def _run_fields(self, instruction: str) -> dict[str, Any]:
        return {
            "agent_url": self.agent_url,
            "scenario": self.adapter.name,
            "target": instruction,
            "target_kind": "gym",
            "task_description": instruction,
            "env_options": {"adapter": self.adapter.name, "seed": self.seed},
            "generator": {"name": "gencoach-gym", "version": __version__},
            "single_agent": True,  # calls name `adapter.robot`; exports name none
        }

    def _stage(self) -> dict[str, Any]:
        return {
            "id": 0,
            "goal": self.instruction,
            "hint": "",
            "text_only": False,
            "target_tool_calls": self.target_steps,
            "max_tool_calls": self.max_steps,
            "linked_to_prev": False,
        }

    def _spawn(self, function: Any, *args: Any) -> None:
        assert self._tg is not None
        self.activity.spawn(self._tg, function, *args)

    async def _emit(self, event_type: str, **fields: Any) -> None:
        await self.reporter.emit(event_type, **fields)

    async def _flush(self) -> None:
        # Serialised, so a node never reaches gencoach before its parent; the id counters
        # go with every batch, so a restarted generator never reuses an id.
        async with self._lock:
            ids = {"situations": self._situations, "candidates": self._candidates}
            self.reporter.remember("ids", ids)
            await self.reporter.flush()
            self._last_batch_at = anyio.current_time()

    async def _explore(self, node: Node | None) -> None:
        while node is not None:
            node = await self._situation(node)

    async def _situation(self, node: Node) -> Node | None:
        number = self._situations
        self._situations += 1
        situation_id = f"s{number}"
        episode = node.episode
        actions = tuple(episode.actions)
        agent_input = AgentInput.model_validate(
            {
                "id": number,
                "instruction": node.instruction,
                "tools": [tool.to_magma() for tool in self.adapter.tools],
                "attributes": self.adapter.attributes(episode.env, self.seed, actions),
                "memory": node.memory,
                "num_outputs": self.branches,
                "extra_keys": {GYM_STATE_KEY: self._teacher_state(actions)},
            }
        )
        self._save(situation_id, Saved(actions, node.attempt_ids))
        await self.reporter.save_teacher_state(number, self._teacher_state(actions))
        await self._emit(
            "situation.created",
            situation_id=situation_id,
            parent_candidate_id=node.parent_candidate_id,
            link="next",
            stage=self._stage(),
            input=agent_input.model_dump(mode="json"),
            active_errors=[],
            coaching_attempt_ids=list(node.attempt_ids),
        )
        self.tally.situations += 1
        answers = await self.asker.ask(f"{self.run_id}:{situation_id}", agent_input)
        following: Node | None = None
        for index, raw in enumerate(answers):
            answer = self._judged(raw)
            candidate_id = f"c{self._candidates}"
            self._candidates += 1
            fields = answer.created_fields(candidate_id, situation_id, node.attempt_ids)
            await self._emit("candidate.created", **fields)
            copy = episode if index == len(answers) - 1 else self._restore(actions)
            after = await self._execute(candidate_id, answer, copy, node.attempt_ids, False)
            following = following or after
        await self._flush()
        return following

    def _teacher_state(self, actions: tuple[Action, ...]) -> dict[str, Any]:
        """What the oracle teacher rebuilds the situation from (see `teacher`)."""
        return {"adapter": self.adapter.options(), "seed": self.seed, "actions": list(actions)}

    def _judged(self, answer: Answer) -> Answer:
        if answer.decision is None:
            return answer
        reason = invalid_reason(self.adapter, answer.decision)
        return dataclasses.replace(answer, invalid_reason=reason)

    def _restore(self, actions: tuple[Action, ...]) -> GymEpisode:
        return GymEpisode.restore(self.adapter, self.seed, actions)

    async def _execute(
        self,
        candidate_id: str,
        answer: Answer,
        episode: GymEpisode,
        attempt_ids: tuple[int, ...],
        coached: bool,
    ) -> Node | None:
        """Execute and report one candidate (`coached`: a branch order's); the node that
        follows it if its branch goes on."""
        if answer.decision is None or answer.invalid_reason is not None:
            status = "invalid" if answer.invalid_reason is not None else "error"
            self.tally.count(coached=coached, status=status, error=answer.error)
            await self._emit(
                "candidate.executed",
                candidate_id=candidate_id,
                execution={},
                status=status,
                stage_end=None,
            )
            return None
        started = anyio.current_time()
        judged = episode.play(answer.decision)
        self.tally.env_step_s += anyio.current_time() - started
        self.tally.env_steps += len(judged.calls)
        end = judged.stage_end(self.target_steps)
        self.tally.count(coached=coached, status=judged.status(self.target_steps))
        await self._emit(
            "candidate.executed",
            candidate_id=candidate_id,
            execution=judged.execution(self.adapter.robot, self.target_steps),
            status=judged.status(self.target_steps),
            stage_end=end,
        )
        if end is not None:
            self.tally.end(end["event"])
            return None
        instruction = {"type": "env", "content": judged.feedback}
        return Node(episode, candidate_id, instruction, answer.memory, attempt_ids)

    async def _take_orders(self, orders: MemoryObjectReceiveStream[Item]) -> None:
        async for item in orders:
            if isinstance(item, BranchOrder):
                await self._accept(item)
            self.activity.poke()  # a settled answer (the reader gave it to the reporter)

    async def _accept(self, order: BranchOrder) -> None:
        if order.candidate_id in self._seen:
            log.info("integrations.order_repeated", run_id=self.run_id, branch=order.branch_id)
            await self._ack(order)
            return
        anchor = self.book.get(order.anchor.situation_id)
        if anchor is None or order.run_id != self.run_id:
            log.warning("integrations.order_skipped", anchor=order.anchor.situation_id)
            self.tally.orders_skipped += 1
            await self._ack(order)
            return
        self._seen.add(order.candidate_id)
        attempts = anchor.attempt_ids
        if order.attempt_id not in attempts:
            attempts = (*attempts, order.attempt_id)
        # A later order may anchor on the situation gencoach made for this one.
        self._save(order.situation_id, Saved(anchor.actions, attempts))
        self._spawn(self._branch, order, anchor.actions, attempts)

    async def _ack(self, order: BranchOrder) -> None:
        """Acknowledge an order this run will not execute (an executed one is acknowledged
        by the batch that reports its execution)."""
        if self.reader is not None:
            await self.reader.ack(order)

    async def _branch(
        self, order: BranchOrder, actions: tuple[Action, ...], attempts: tuple[int, ...]
    ) -> None:
        """Execute a branch order from its anchor's env, then continue the branch."""
        await self.reporter.save_teacher_state(
            order.input.id, self._teacher_state(actions), keep=True
        )
        answer = self._judged(Answer.of(order.candidate))
        following = await self._execute(
            order.candidate_id, answer, self._restore(actions), attempts, True
        )
        await self._flush()
        self.tally.orders_executed += 1
        log.info("integrations.order_executed", run_id=self.run_id, branch=order.branch_id)
        await self._explore(following)


_SITUATION = "situation:"  # the generator-state fields of the book: situation id -> Saved


def _max_steps(adapter: GymAdapter, env: Any) -> int:
    """The stage's step budget: the adapter's, else the env's time limit, else 100."""
    if adapter.max_steps is not None:
        return adapter.max_steps
    spec = getattr(env, "spec", None)
    limit = getattr(spec, "max_episode_steps", None) or getattr(env.unwrapped, "max_steps", None)
    return int(limit) if limit else 100
