"""The per-stage coaching limits: admission, leases, completion and proof, atomic in Redis.

`StageLimits` runs each operation as one Lua script (`lua/limits_*.lua`), so concurrent
controllers never overshoot; `Admission`, `StageCounts` and `StageBudget` are what it
answers. The counts, the limits, leases and human interventions: docs/budgets.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any, Final, Literal, cast

from pydantic import BaseModel, ConfigDict
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from gencoach.config import Limits
from gencoach.constants import Keys
from gencoach.runtime.logs import get_logger

log = get_logger("limits")

# The key parts of one stage, in the order of the scripts' KEYS (then the stage index).
STAGE_PARTS: Final = ("pending", "human", "completed", "proven", "attempts")
_LUA: Final = resources.files("gencoach").joinpath("lua")
_HASH_TAG_CHARS: Final = frozenset("{}")

RefusedBy = Literal["pending", "unproven", "completed"]
CompleteOutcome = Literal["completed", "late", "duplicate"]
AdmitOutcome = Literal["admitted", "renewed", "refused"]
Renewal = Literal["renewed", "expired", "absent"]


@functools.cache
def script_text(name: str) -> str:
    """The Lua of one limit script (`lua/limits_<name>.lua`), its shared head prepended
    (read once per process: a worker builds `StageLimits` for every lease renewal)."""
    common = _LUA.joinpath("limits_common.lua").read_text()
    return common + "\n" + _LUA.joinpath(f"limits_{name}.lua").read_text()


@dataclass(frozen=True)
class StageCounts:
    """A stage's counts at one instant; `pending` includes `human_pending`."""

    pending: int
    human_pending: int
    completed: int
    proven: int

    @property
    def unproven(self) -> int:
        """Pending requests plus completed attempts not (yet) proven."""
        return self.pending + self.completed - self.proven


@dataclass(frozen=True)
class Admission:
    """The answer to one admission, with the stage's counts right after it."""

    outcome: AdmitOutcome
    counts: StageCounts
    max_pending: int
    max_unproven: int
    refused_by: RefusedBy | None = None
    attempt_id: int | None = None
    """For `refused_by == "completed"`: the attempt the request already produced."""

    @property
    def admitted(self) -> bool:
        """Whether the request holds a lease now (new, or renewed by a repeated admission)."""
        return self.outcome != "refused"

    @property
    def reason(self) -> str:
        """Why it was refused, for the skipped-request record ("" when admitted)."""
        match self.refused_by:
            case "pending":
                return f"pending {self.counts.pending} of {self.max_pending}"
            case "unproven":
                return f"unproven {self.counts.unproven} of {self.max_unproven}"
            case "completed":
                return f"already completed as attempt {self.attempt_id}"
            case None:
                return ""


class StageBudget(BaseModel):
    """One stage's counts beside the limits in force, as `GET /v1/runs/{run_id}/stages` shows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage_id: int
    pending: int
    human_pending: int
    completed: int
    proven: int
    unproven: int
    max_pending: int
    max_unproven: int


@dataclass(frozen=True)
class LimitsReply:
    """What every limit script answers: its outcome and detail, and the stage's counts
    (zeros from the scripts that answer only an outcome: renew, lease, release, prove)."""

    outcome: str
    detail: str
    counts: StageCounts


def parse_reply(raw: Sequence[Any]) -> LimitsReply:
    outcome, detail, pending, human, completed, proven = raw
    return LimitsReply(
        outcome.decode(),
        detail.decode(),
        StageCounts(int(pending), int(human), int(completed), int(proven)),
    )


def _check_ids(run_id: str, stage_id: int, request_id: str | None = None) -> None:
    if not run_id or _HASH_TAG_CHARS & set(run_id):
        raise ValueError(f"run_id must be non-empty without '{{' or '}}', got {run_id!r}")
    if isinstance(stage_id, bool) or not isinstance(stage_id, int) or stage_id < 0:
        raise ValueError(f"stage_id must be an integer of at least 0, got {stage_id!r}")
    if request_id is not None and not request_id:
        raise ValueError("request_id must not be empty")


def stage_keys(keys: Keys, run_id: str, stage_id: int) -> list[str]:
    """The keys the limit scripts of one stage use, in their KEYS order."""
    _check_ids(run_id, stage_id)
    parts = [keys.stage(run_id, stage_id, part) for part in STAGE_PARTS]
    return [*parts, keys.stages(run_id)]


def lease_ms(lease_s: float) -> int:
    """A lease in whole milliseconds, as the scripts take it (at least 1)."""
    if not math.isfinite(lease_s) or lease_s <= 0:
        raise ValueError(f"lease_s must be a positive number of seconds, got {lease_s!r}")
    return max(1, math.ceil(lease_s * 1000))


def _check_attempt(attempt_id: int) -> None:
    if isinstance(attempt_id, bool) or not isinstance(attempt_id, int) or attempt_id < 0:
        raise ValueError(f"attempt_id must be an integer of at least 0, got {attempt_id!r}")


class StageLimits:
    """Admits coaching requests per stage and tracks their leases, attempts and proofs.

    Leases expire by the Redis server's clock unless renewed, so a dead holder never keeps
    a slot. A human request is never refused by the limits, but its lease and attempt
    count like any other, so automatic requests wait for the room it uses.
    """

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        # register_script runs EVALSHA and loads the script again after a NOSCRIPT
        # (server restart, failover, SCRIPT FLUSH).
        self._admit = client.register_script(script_text("admit"))
        self._renew = client.register_script(script_text("renew"))
        self._release = client.register_script(script_text("release"))
        self._complete = client.register_script(script_text("complete"))
        self._prove = client.register_script(script_text("prove"))
        self._counts = client.register_script(script_text("counts"))
        self._lease = client.register_script(script_text("lease"))

    def stage_keys(self, run_id: str, stage_id: int) -> list[str]:
        """The keys the scripts of one stage use, in their KEYS order."""
        return stage_keys(self.keys, run_id, stage_id)

    async def _call(
        self, script: AsyncScript, run_id: str, stage_id: int, args: Sequence[str | int]
    ) -> LimitsReply:
        raw = await script(keys=self.stage_keys(run_id, stage_id), args=list(args))
        return parse_reply(raw)

    async def admit(
        self,
        run_id: str,
        stage_id: int,
        request_id: str,
        limits: Limits,
        lease_s: float,
        *,
        human: bool = False,
    ) -> Admission:
        """Admit a request to its stage's limits in one round trip, or say why not.

        Admitting a request that holds a live lease renews it and answers `renewed`;
        one that already completed is refused with `refused_by == "completed"`. The
        limits are arguments of each admission, so a reloaded config applies to the next.
        """
        _check_ids(run_id, stage_id, request_id)
        args: list[str | int] = [
            request_id,
            lease_ms(lease_s),
            limits.max_pending_per_stage,
            limits.max_unproven_per_stage,
            int(human),
            stage_id,
        ]
        reply = await self._call(self._admit, run_id, stage_id, args)
        return admission_of(reply, limits)

    async def renew(self, run_id: str, stage_id: int, request_id: str, lease_s: float) -> bool:
        """Extend a live lease to `lease_s` from now; False if it is gone."""
        return await self.renewal(run_id, stage_id, request_id, lease_s) == "renewed"

    async def renewal(self, run_id: str, stage_id: int, request_id: str, lease_s: float) -> Renewal:
        """Extend a live lease to `lease_s` from now, or say why it cannot be: `expired`
        (it lapsed before this renewal) or `absent` (released, completed or reclaimed)."""
        _check_ids(run_id, stage_id, request_id)
        args: list[str | int] = [request_id, lease_ms(lease_s)]
        reply = await self._call(self._renew, run_id, stage_id, args)
        return "renewed" if reply.outcome == "renewed" else cast(Renewal, reply.detail)

    async def lease_alive(self, run_id: str, stage_id: int, request_id: str) -> bool:
        """Whether the request holds a live lease now (its holder renewed it in time)."""
        _check_ids(run_id, stage_id, request_id)
        reply = await self._call(self._lease, run_id, stage_id, [request_id])
        return reply.outcome == "alive"

    async def release(self, run_id: str, stage_id: int, request_id: str) -> bool:
        """Give the request's pending slot back; True if a live lease was dropped. Idempotent."""
        _check_ids(run_id, stage_id, request_id)
        reply = await self._call(self._release, run_id, stage_id, [request_id])
        return reply.outcome == "released"

    async def complete(
        self, run_id: str, stage_id: int, request_id: str, attempt_id: int
    ) -> CompleteOutcome:
        """Turn the request's lease into a completed attempt, once per request and attempt.

        `late` means the lease had expired or been released: the attempt is recorded all
        the same (the branch exists), which may push unproven past the limit and so delay
        the next admission. Call it before handing out the branch order: `prove` counts
        completed attempts. Raises ValueError when the request completed as another attempt, or the
        attempt belongs to another request; nothing is recorded then.
        """
        _check_ids(run_id, stage_id, request_id)
        _check_attempt(attempt_id)
        args: list[str | int] = [request_id, attempt_id, stage_id]
        reply = await self._call(self._complete, run_id, stage_id, args)
        match reply.outcome:
            case "conflict":
                raise ValueError(f"run {run_id} stage {stage_id}: {reply.detail}")
            case "late":
                log.warning(
                    "limits.late_completion",
                    run_id=run_id,
                    stage=stage_id,
                    request_id=request_id,
                    attempt_id=attempt_id,
                    unproven=reply.counts.unproven,
                )
                return "late"
            case "duplicate":
                return "duplicate"
            case _:
                return "completed"

    async def prove(self, run_id: str, stage_id: int, attempt_id: int) -> bool:
        """Count a completed attempt as proven; True only the first time for that attempt."""
        _check_ids(run_id, stage_id)
        _check_attempt(attempt_id)
        reply = await self._call(self._prove, run_id, stage_id, [attempt_id])
        return reply.outcome == "proven"

    async def counts(self, run_id: str, stage_id: int) -> StageCounts:
        """One stage's counts now (live leases only)."""
        _check_ids(run_id, stage_id)
        return (await self._call(self._counts, run_id, stage_id, [])).counts

    async def stage_ids(self, run_id: str) -> list[int]:
        """The run's stages that ever admitted a request or completed an attempt, ascending."""
        _check_ids(run_id, 0)
        members = await self.client.smembers(self.keys.stages(run_id))
        return sorted(int(member) for member in members)

    async def stage_budgets(self, run_id: str, limits: Limits) -> list[StageBudget]:
        """Every stage's counts beside the limits in force, in one round trip after the index."""
        stage_ids = await self.stage_ids(run_id)
        for tries_left in (1, 0):
            pipe = self.client.pipeline(transaction=False)
            for stage_id in stage_ids:
                await self._counts(keys=self.stage_keys(run_id, stage_id), args=[], client=pipe)
            try:
                replies = await pipe.execute()
                break
            except NoScriptError:
                # Redis restarted between the pipeline's SCRIPT LOAD and its EVALSHAs (the
                # script cache is empty again): the counts are only read, so read again.
                if not tries_left:
                    raise
        budgets = []
        for stage_id, raw in zip(stage_ids, replies, strict=True):
            counts = parse_reply(raw).counts
            budgets.append(
                StageBudget(
                    stage_id=stage_id,
                    **asdict(counts),
                    unproven=counts.unproven,
                    max_pending=limits.max_pending_per_stage,
                    max_unproven=limits.max_unproven_per_stage,
                )
            )
        return budgets

    async def run_keys(self, run_id: str) -> list[str]:
        """Every key holding limits state of this run, e.g. to expire them with its graph."""
        keys = [self.keys.stages(run_id)]
        for stage_id in await self.stage_ids(run_id):
            keys.extend(self.keys.stage(run_id, stage_id, part) for part in STAGE_PARTS)
        return keys


def admission_of(reply: LimitsReply, limits: Limits) -> Admission:
    """The admission an admit script's reply (or a move's, `limits_move.lua`) tells of."""
    # The admit script answers only these outcomes, and refusals as "pending",
    # "unproven" or "completed:<attempt id>".
    kind, _, attempt = reply.detail.partition(":")
    return Admission(
        outcome=cast(AdmitOutcome, reply.outcome),
        counts=reply.counts,
        max_pending=limits.max_pending_per_stage,
        max_unproven=limits.max_unproven_per_stage,
        refused_by=cast(RefusedBy, kind) if kind else None,
        attempt_id=int(attempt) if attempt else None,
    )
