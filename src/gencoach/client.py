"""The generator side: report a run's events to gencoach and read its branch orders.

```python
from gencoach.client import Reporter

with Reporter("run-1", redis_url="redis://127.0.0.1:6379/0") as report:
    report.emit("run.started", agent_url="http://127.0.0.1:8751", scenario="buttons",
                target="sw0", target_kind="button", task_description="press sw0",
                generator={"name": "mysim", "version": "1.0"})
    report.emit("situation.created", situation_id="s0", parent_candidate_id=None,
                stage={"id": 0, "goal": "press sw0"},
                input={"id": 0, "instruction": {"type": "user", "content": "press sw0"}})
    ...
    for order in report.branch_orders(block_s=1.0):
        ...  # restore order.anchor.situation_id, execute order.candidate, report as usual
```

Each event is validated when emitted (a `ContractError` names the bad field), numbered
with the run's next `seq`, and sent in batches: pipelined XADD to the events stream, or
`POST /v1/events` with `api_url`. A generator that restarts passes `start_seq` so its
new events do not reuse numbers gencoach has already applied (and would ignore).

Once a batch has gone through, a batch that cannot be sent because the connection
dropped (or the controller answered 502/503/504) is sent again with exponential backoff,
up to `attempts` times within `retry_timeout_s`, and so is a read of the branch orders;
events are idempotent by `(run_id, seq)`, so a batch sent twice changes nothing. Then
`ReportError` says why, and the batch stays buffered for the next `flush()`. A reporter
that never reached gencoach (a wrong URL) fails at its first batch with the connection's
own error.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import httpx
import redis
import redis.asyncio
import redis.exceptions
import stamina

from gencoach.constants import EVENT_FIELD, ORDER_FIELD, Keys
from gencoach.errors import GencoachError
from gencoach.protocol import BranchOrder, parse_event


class ReportError(GencoachError):
    """gencoach refused or could not take a batch of events."""


class _Unavailable(Exception):  # noqa: N818 - a signal to retry, never seen by callers
    """The controller answered that it cannot take the batch now (502, 503, 504)."""


# Failures worth sending the same batch again for: the peer, not the batch, is at fault.
TRANSIENT = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    httpx.TransportError,
    _Unavailable,
)
_UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


class _Batch:
    """Numbering, validation and buffering shared by both reporters."""

    def __init__(self, run_id: str, start_seq: int, batch_size: int) -> None:
        self.run_id = run_id
        self.next_seq = start_seq
        self.batch_size = batch_size
        self.pending: list[dict[str, Any]] = []

    def add(self, event_type: str, fields: dict[str, Any]) -> bool:
        """Validate and buffer one event; True when the batch is full."""
        event = {"type": event_type, "run_id": self.run_id, "seq": self.next_seq, **fields}
        parse_event(event)
        self.pending.append(event)
        self.next_seq += 1
        return len(self.pending) >= self.batch_size

    def take(self) -> list[dict[str, Any]]:
        taken, self.pending = self.pending, []
        return taken


def _encode(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


def _check_http(response: httpx.Response) -> None:
    if response.status_code in _UNAVAILABLE_STATUSES:
        raise _Unavailable(f"gencoach answered {response.status_code}: {response.text[:200]}")
    if response.status_code != httpx.codes.ACCEPTED:
        raise ReportError(f"gencoach refused the batch ({response.status_code}): {response.text}")


def _orders(reply: Any) -> tuple[list[BranchOrder], str | None]:
    orders: list[BranchOrder] = []
    last: str | None = None
    for _, entries in reply or []:
        for entry_id, fields in entries:
            last = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            orders.append(BranchOrder.parse_json(fields[ORDER_FIELD.encode()]))
    return orders, last


class _ReporterBase:
    """What both reporters keep: numbering and batches, key names, the orders read so far."""

    def __init__(
        self,
        run_id: str,
        *,
        redis_url: str | None,
        api_url: str | None,
        token: str | None,
        key_prefix: str,
        batch_size: int,
        start_seq: int,
        attempts: int = 6,
        retry_timeout_s: float = 30.0,
    ) -> None:
        if (redis_url is None) == (api_url is None):
            raise ValueError("give exactly one of redis_url or api_url")
        self._batch = _Batch(run_id, start_seq, batch_size)
        self._keys = Keys(key_prefix)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._last_order = "0"
        self.attempts = attempts
        self.retry_timeout_s = retry_timeout_s
        self._reached = False  # retries are for a connection that worked and dropped

    def _retry_policy(self) -> dict[str, Any]:
        attempts = self.attempts if self._reached else 1
        return {"on": TRANSIENT, "attempts": attempts, "timeout": self.retry_timeout_s}

    def _gave_up(self, events: list[dict[str, Any]], error: Exception) -> ReportError:
        self._batch.pending[:0] = events  # kept for the next flush
        return ReportError(
            f"could not send {len(events)} events of run {self._batch.run_id} "
            f"after {self.attempts} attempts or {self.retry_timeout_s:g} s: {error}"
        )

    @property
    def next_seq(self) -> int:
        """The seq the next event will carry."""
        return self._batch.next_seq

    def _orders_query(self, block_s: float) -> tuple[dict[Any, Any], int | None]:
        stream = self._keys.branches(self._batch.run_id)
        return {stream: self._last_order}, int(block_s * 1000) if block_s > 0 else None

    def _read_orders(self, reply: Any) -> list[BranchOrder]:
        orders, last = _orders(reply)
        self._last_order = last or self._last_order
        return orders


class Reporter(_ReporterBase):
    """Reports one run's events (blocking API)."""

    def __init__(
        self,
        run_id: str,
        *,
        redis_url: str | None = None,
        api_url: str | None = None,
        token: str | None = None,
        key_prefix: str = "gencoach",
        batch_size: int = 200,
        start_seq: int = 0,
        attempts: int = 6,
        retry_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(
            run_id,
            redis_url=redis_url,
            api_url=api_url,
            token=token,
            key_prefix=key_prefix,
            batch_size=batch_size,
            start_seq=start_seq,
            attempts=attempts,
            retry_timeout_s=retry_timeout_s,
        )
        self._redis = redis.Redis.from_url(redis_url) if redis_url else None
        self._http = httpx.Client(base_url=api_url, headers=self._headers) if api_url else None

    def emit(self, event_type: str, **fields: Any) -> int:
        """Validate, number and buffer an event (sent when the batch fills); return its seq."""
        seq = self._batch.next_seq
        if self._batch.add(event_type, fields):
            self.flush()
        return seq

    def flush(self) -> None:
        """Send every buffered event now."""
        events = self._batch.take()
        if not events:
            return
        try:
            for attempt in stamina.retry_context(**self._retry_policy(), wait_max=5.0):
                with attempt:
                    self._send(events)
        except TRANSIENT as error:
            if not self._reached:  # never reached: the error as it is, nothing to retry
                self._batch.pending[:0] = events
                raise
            raise self._gave_up(events, error) from error
        self._reached = True

    def _send(self, events: list[dict[str, Any]]) -> None:
        if self._redis is not None:
            pipe = self._redis.pipeline(transaction=False)
            for event in events:
                pipe.xadd(self._keys.events, {EVENT_FIELD: _encode(event)})
            pipe.execute()
        elif self._http is not None:
            _check_http(self._http.post("/v1/events", json=events))

    def branch_orders(self, block_s: float = 0.0, count: int = 100) -> list[BranchOrder]:
        """Branch orders for this run published since the last call (Redis only)."""
        if self._redis is None:
            raise ValueError(
                "branch orders are read from Redis: create the Reporter with redis_url"
            )
        streams, block = self._orders_query(block_s)
        try:
            for attempt in stamina.retry_context(**self._retry_policy(), wait_max=5.0):
                with attempt:
                    reply = self._redis.xread(streams, count=count, block=block)
        except TRANSIENT as error:
            raise ReportError(
                f"could not read the branch orders of run {self._batch.run_id}: {error}"
            ) from error
        return self._read_orders(reply)

    def close(self) -> None:
        """Send what is buffered and release connections."""
        try:
            self.flush()
        finally:
            if self._redis is not None:
                self._redis.close()
            if self._http is not None:
                self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncReporter(_ReporterBase):
    """Reports one run's events (async API, for asyncio or trio via anyio)."""

    def __init__(
        self,
        run_id: str,
        *,
        redis_url: str | None = None,
        api_url: str | None = None,
        token: str | None = None,
        key_prefix: str = "gencoach",
        batch_size: int = 200,
        start_seq: int = 0,
        attempts: int = 6,
        retry_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(
            run_id,
            redis_url=redis_url,
            api_url=api_url,
            token=token,
            key_prefix=key_prefix,
            batch_size=batch_size,
            start_seq=start_seq,
            attempts=attempts,
            retry_timeout_s=retry_timeout_s,
        )
        self._redis = redis.asyncio.Redis.from_url(redis_url) if redis_url else None
        headers = self._headers
        self._http = httpx.AsyncClient(base_url=api_url, headers=headers) if api_url else None

    async def emit(self, event_type: str, **fields: Any) -> int:
        """Validate, number and buffer an event (sent when the batch fills); return its seq."""
        seq = self._batch.next_seq
        if self._batch.add(event_type, fields):
            await self.flush()
        return seq

    async def flush(self) -> None:
        """Send every buffered event now."""
        events = self._batch.take()
        if not events:
            return
        try:
            async for attempt in stamina.retry_context(**self._retry_policy(), wait_max=5.0):
                with attempt:
                    await self._send(events)
        except TRANSIENT as error:
            if not self._reached:  # never reached: the error as it is, nothing to retry
                self._batch.pending[:0] = events
                raise
            raise self._gave_up(events, error) from error
        self._reached = True

    async def _send(self, events: list[dict[str, Any]]) -> None:
        if self._redis is not None:
            pipe = self._redis.pipeline(transaction=False)
            for event in events:
                pipe.xadd(self._keys.events, {EVENT_FIELD: _encode(event)})
            await pipe.execute()
        elif self._http is not None:
            _check_http(await self._http.post("/v1/events", json=events))

    async def branch_orders(self, block_s: float = 0.0, count: int = 100) -> list[BranchOrder]:
        """Branch orders for this run published since the last call (Redis only)."""
        if self._redis is None:
            raise ValueError(
                "branch orders are read from Redis: create the Reporter with redis_url"
            )
        streams, block = self._orders_query(block_s)
        try:
            async for attempt in stamina.retry_context(**self._retry_policy(), wait_max=5.0):
                with attempt:
                    reply = await self._redis.xread(streams, count=count, block=block)
        except TRANSIENT as error:
            raise ReportError(
                f"could not read the branch orders of run {self._batch.run_id}: {error}"
            ) from error
        return self._read_orders(reply)

    async def aclose(self) -> None:
        """Send what is buffered and release connections."""
        try:
            await self.flush()
        finally:
            if self._redis is not None:
                await self._redis.aclose()
            if self._http is not None:
                await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
