"""Which runs reconciliation looks at: those fallen silent and those never registered.

`RunWatches` keeps a deadline per run in two sorted sets, `Keys.heard` (when an active run
last heard from its generator) and `Keys.registrations` (when to look at a registration
not ended), so a pass reads what came due since the last one and never every open run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Final, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from gencoach.constants import Keys
from gencoach.service.store.nodes import as_text

# A run.started's registration is looked for this long after it was applied (intake
# starts it at once; only a crash in between leaves it to a pass).
FIRST_LOOK_S: Final = 10.0
# A registration under way has its look renewed this often, this far ahead.
RENEW_S: Final = 3.0
LAPSE_S: Final = 15.0

# Move each member (ARGV: the new score, then member, score pairs) whose score is still
# the one given to the new score; returns the members moved.
_CLAIM: Final = """
local claimed = {}
for index = 2, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[index])
  if score and tonumber(score) == tonumber(ARGV[index + 1]) then
    redis.call('ZADD', KEYS[1], ARGV[1], ARGV[index])
    claimed[#claimed + 1] = ARGV[index]
  end
end
return claimed
"""

# Remove each member (ARGV: member, score pairs) whose score is still the one given.
_FORGET: Final = """
local removed = 0
for index = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[index])
  if score and tonumber(score) == tonumber(ARGV[index + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[index])
  end
end
return removed
"""

# A due member and the score it was read with.
Due = tuple[str, int]


def now_ms() -> int:
    """Now, in ms since the epoch (the scores' clock: the writer's)."""
    return int(time.time() * 1000)


class RunWatches:
    """Reads and writes the runs' silence and registration deadlines.

    Each set holds a deadline per run, so a pass reads what came due since the last one
    and never every open run (as RQ's scheduled and started registries do):

    - `Keys.heard`: every active run, scored by when it last heard from its generator as
      far as the set knows (ms since the epoch, by the writer's clock): its start, then
      when a pass last found it still going. A pass reads those scored before
      `now - abandon_idle_s`; the abandoning script decides on the run's own last event
      (which every event writes in the run's meta), by Redis's clock, and a run found not
      silent is moved to when that was. So a run's events cost the set nothing, and a run
      that keeps talking costs one look per `abandon_idle_s`.
    - `Keys.registrations`: every run whose agent's registration has not ended, scored by
      when to look at it: a few seconds after its `run.started` (`FIRST_LOOK_S`); while a
      controller registers it, that controller keeps the look `LAPSE_S` ahead (renewing it
      every `RENEW_S`, one command for all its registrations, as RQ's workers keep their
      jobs in the started registry), so the look comes only if that controller died. A
      look claims the run (the one whose score is still the one it read wins) before
      registering it, so two controllers never ask its agent at once.

    Both are written in the round trip that applies a run's `run.started`, just before the
    apply script (`Sequencer.apply`, through `started`): the script keeps to the run's hash
    slot, so the sets cannot be written inside it, and written first, a crash in between
    leaves at most a look too many, never an active run no pass looks at. A run leaves `heard` once
    its end is in the runs index, and `registrations` once its registration ended. Whatever
    a crash or a late event leaves behind (a finished run, one never started, one whose keys
    are gone) comes due like the rest, and the look removes it: only if its score did not
    change meanwhile, so an event that arrived in between keeps its run watched.
    """

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._forget = client.register_script(_FORGET)
        self._claim = client.register_script(_CLAIM)

    def started(self, pipe: Pipeline, run_id: str) -> None:
        """Add to `pipe`, ahead of the apply script of a batch holding the run's
        `run.started`, that the run heard from its generator now and when its registration
        is looked for."""
        at = now_ms()
        pipe.zadd(self.keys.heard, {run_id: at})
        # A re-delivered start never brings a later look closer.
        pipe.zadd(self.keys.registrations, {run_id: at + int(FIRST_LOOK_S * 1000)}, gt=True)

    async def silent(self, idle_s: float, limit: int) -> list[Due]:
        """The runs heard from last more than `idle_s` ago, longest silent first."""
        return await self._due(self.keys.heard, now_ms() - int(idle_s * 1000), limit)

    async def unregistered(self, limit: int) -> list[Due]:
        """The runs whose registration is due a look, the soonest due first."""
        return await self._due(self.keys.registrations, now_ms(), limit)

    async def _due(self, key: str, until_ms: int, limit: int) -> list[Due]:
        found = await self.client.zrangebyscore(
            key, "-inf", until_ms, start=0, num=limit, withscores=True
        )
        pairs = cast(list[tuple[bytes, float]], found)
        return [(as_text(member), int(score)) for member, score in pairs]

    async def still_heard(self, heard: dict[str, int]) -> None:
        """Move runs found still going to when each was really heard from last (never
        back: an event meanwhile moved its run on already)."""
        if heard:
            await self.client.zadd(self.keys.heard, heard, gt=True)

    async def ended(self, run_ids: Sequence[str]) -> None:
        """Runs whose end the runs index has: they fall silent no more."""
        if run_ids:
            await self.client.zrem(self.keys.heard, *run_ids)

    async def registering(self, run_ids: Sequence[str]) -> None:
        """Registrations under way here: look at each run only if they are not renewed
        within `LAPSE_S` (and only while it still waits for one)."""
        if run_ids:
            mapping = dict.fromkeys(run_ids, now_ms() + int(LAPSE_S * 1000))
            await self.client.zadd(self.keys.registrations, mapping, xx=True)

    async def claim_registrations(self, due: Sequence[Due]) -> list[str]:
        """Take due registrations for this controller: those whose look no other
        controller moved since `due` was read, each kept `LAPSE_S` ahead."""
        if not due:
            return []
        look = now_ms() + int(LAPSE_S * 1000)
        args = [look, *(item for run_id, score in due for item in (run_id, score))]
        claimed = await self._claim(keys=[self.keys.registrations], args=args)
        return [as_text(run_id) for run_id in claimed]

    def registered(self, pipe: Pipeline, run_id: str) -> None:
        """Add to `pipe`, after the run's `registered` flag, that its registration ended."""
        pipe.zrem(self.keys.registrations, run_id)

    async def forget_heard(self, due: Sequence[Due]) -> int:
        """Stop watching runs that are not active (unless heard from since they came due)."""
        return await self._forget_from(self.keys.heard, due)

    async def forget_registration(self, due: Sequence[Due]) -> int:
        """Stop watching runs that wait for no registration (unless moved since)."""
        return await self._forget_from(self.keys.registrations, due)

    async def _forget_from(self, key: str, due: Sequence[Due]) -> int:
        if not due:
            return 0
        args = [item for run_id, score in due for item in (run_id, score)]
        return int(await self._forget(keys=[key], args=args))
