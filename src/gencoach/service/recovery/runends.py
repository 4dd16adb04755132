"""What a run's end means for its coaching requests, and for runs whose generator fell silent.

When a run finishes, its generator executes no more branches: every request still
open is ended with a reason saying what the run's end interrupted, and its pending
slot is released. This waits `SETTLE_AFTER_S` after the end, so outcomes reported
just before `run.finished` (still on the terminals stream) prove their attempts first.

An active run whose generator sent nothing for `abandon_idle_s` (a generator that
crashed or lost its connection for good) is finished as abandoned, then saved like
any finished run.
"""

from __future__ import annotations

from typing import Final

from redis.asyncio import Redis

from gencoach.constants import Keys
from gencoach.funnel import funnel_row
from gencoach.logs import bound, get_logger
from gencoach.metrics.catalog import PROOFS
from gencoach.service.coaching.decider import RunEnded
from gencoach.service.coaching.lifecycle import TERMINAL
from gencoach.service.coaching.requests import RequestStore
from gencoach.service.store.graphstore import META
from gencoach.service.store.nodes import as_text
from gencoach.service.store.runindex import RunIndex

log = get_logger("runends")

SETTLE_AFTER_S: Final = 5.0

# Finish a run that is still active and has not heard from its generator for ARGV[1]
# seconds (Redis's clock); returns 1 when it did. Checked and written in one step, so
# an event applied in between keeps the run going.
ABANDON_SCRIPT: Final = """
local meta = KEYS[1]
if redis.call('HGET', meta, 'state') ~= 'active' then return 0 end
local last = tonumber(redis.call('HGET', meta, 'last_event_at')
  or redis.call('HGET', meta, 'started_at') or '0')
local now = redis.call('TIME')
if tonumber(now[1]) - last < tonumber(ARGV[1]) then return 0 end
redis.call('HSET', meta, 'state', 'finished', 'finished_at', now[1],
  'finished_seq', 'none (' .. ARGV[2] .. ')', 'finish_reason', ARGV[2])
return 1
"""


class RunEnds:
    """Ends the requests of finished runs and finishes runs that fell silent."""

    def __init__(self, client: Redis, keys: Keys, requests: RequestStore) -> None:
        self.client = client
        self.keys = keys
        self.requests = requests
        self._abandon = client.register_script(ABANDON_SCRIPT)
        self.index = RunIndex(client, keys)

    async def settle(self, run_id: str, *, after_s: float = SETTLE_AFTER_S) -> bool:
        """End every open request of a finished run; True once none is left open."""
        finished_at = await self.client.hget(self.keys.run(run_id, META), "finished_at")
        now_s, _ = await self.client.time()
        if finished_at is None or now_s - float(as_text(finished_at)) < after_s:
            return False
        for request in await self.requests.all(run_id):
            if request.state in TERMINAL:
                continue
            with bound(run_id=run_id, request_id=request.request_id):
                applied = await self.requests.apply(request, RunEnded())
                ended = applied.request
                if ended.state not in TERMINAL:
                    return False  # still open: the next pass looks again
                if not applied.stored:
                    continue  # another writer ended it
                if ended.state == "unproven":
                    row = funnel_row(ended.route, ended.human)
                    self.requests.metrics.inc(PROOFS, row, "unproven")
        return True

    async def abandon_if_idle(self, run_id: str, idle_s: float) -> bool:
        """Finish the run as abandoned if it heard nothing for `idle_s`; True if it did."""
        reason = f"abandoned: no event from the generator for {idle_s:g} s"
        done = await self._abandon(keys=[self.keys.run(run_id, META)], args=[idle_s, reason])
        if done:
            await self.index.moved(run_id, "finished")
            log.warning("run.abandoned", run_id=run_id, idle_s=idle_s)
        return bool(done)
