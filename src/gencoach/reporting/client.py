"""The generator side: report a run's events to gencoach and read its branch orders.

`Reporter` (blocking) and `AsyncReporter` (async) emit a run's events, read its branch
orders and ask whether it is settled (docs/reporting.md shows a run reported); both only
do the I/O of `gencoach.reporting.outbox.Outbox`, which holds the shared logic.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx
import redis
import redis.asyncio
import redis.exceptions

from gencoach.constants import Keys
from gencoach.errors import GencoachError
from gencoach.protocol import BranchOrder, RunSettled
from gencoach.reporting.outbox import Ack, Outbox, Outgoing
from gencoach.runtime.retrying import (
    REDIS_TRANSIENT,
    Retrying,
    RetryPolicy,
    describe,
    no_client_retries,
    server_busy,
)
from gencoach.settling import SCRIPT


class ReportError(GencoachError):
    """gencoach refused or could not take a batch of events."""


class _Unavailable(Exception):  # noqa: N818 - a signal to retry, never seen by callers
    """The controller answered that it cannot take the batch now (502, 503, 504)."""


T = TypeVar("T")

# Failures worth sending the same batch again for: the peer, not the batch, is at fault.
# An OOM refusal lasts until Redis frees memory (keys expire, an operator raises
# maxmemory), like a connection that comes back.
TRANSIENT = (*REDIS_TRANSIENT, httpx.TransportError, _Unavailable)
_UNAVAILABLE_STATUSES = frozenset({502, 503, 504})


def _check_http(response: httpx.Response) -> None:
    if response.status_code in _UNAVAILABLE_STATUSES:
        raise _Unavailable(f"gencoach answered {response.status_code}: {response.text[:200]}")
    if response.status_code != httpx.codes.ACCEPTED:
        raise ReportError(f"gencoach refused the batch ({response.status_code}): {response.text}")


def _why(error: Exception) -> str:
    return describe(error)


class _ReporterBase:
    """What both reporters keep: the outbox, key names, retry policy."""

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
        attempts: int | None = None,
        retry_timeout_s: float = 30.0,
        shared_redis: bool = False,
    ) -> None:
        if (redis_url is None and not shared_redis) == (api_url is None):
            raise ValueError("give exactly one of redis_url (or a Redis client) or api_url")
        self._outbox = Outbox(run_id, Keys(key_prefix), start_seq, batch_size)
        self._keys = self._outbox.keys
        self._by_redis = api_url is None
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.attempts = attempts
        self.retry_timeout_s = retry_timeout_s
        self._reached = False  # retries are for a connection that worked and dropped

    def _retrying(self) -> Retrying:
        """The stamina retry context for one call (see `Reporter`)."""
        policy = RetryPolicy(timeout_s=self.retry_timeout_s, attempts=self.attempts)
        return policy.retrying(on=self._retryable)

    def _retryable(self, error: Exception) -> bool:
        # A refused connection before anything went through is a wrong address, not an
        # outage; a server that answered (loading, OOM, a 503) is there.
        if not isinstance(error, TRANSIENT):
            return False
        return self._reached or server_busy(error) or isinstance(error, _Unavailable)

    def _gave_up(self, batch: Outgoing, error: Exception) -> ReportError:
        self._outbox.put_back(batch)  # kept for the next flush
        tries = f"{self.attempts} attempts or " if self.attempts is not None else ""
        return ReportError(
            f"could not send {len(batch.events)} events of run {self.run_id} "
            f"after {tries}{self.retry_timeout_s:g} s of retries: {_why(error)}"
        )

    def _failed(self, what: str, error: Exception) -> ReportError:
        return ReportError(f"could not {what} of run {self.run_id}: {_why(error)}")

    def _need_redis(self, what: str) -> None:
        if not self._by_redis:
            raise ValueError(f"{what} Redis: create the reporter with redis_url (or redis)")

    @property
    def run_id(self) -> str:
        """The run this reporter reports."""
        return self._outbox.run_id

    @property
    def next_seq(self) -> int:
        """The seq the next event will carry."""
        return self._outbox.next_seq

    @property
    def settled(self) -> bool:
        """Whether gencoach has answered that no branch order can come through the last
        event sent (and no event waits to be sent)."""
        return self._outbox.settled

    def remember(self, name: str, value: Any) -> None:
        """Keep `value` (JSON) in the run's generator state under `name`, written with the
        next batch, before its events; `recall()` reads it back after a restart."""
        self._need_redis("the generator state is kept in")
        self._outbox.remember(name, value)

    def take_settled(self, answer: RunSettled) -> None:
        """Take in a settled answer read elsewhere (by an `OrderReader`)."""
        self._outbox.take_settled(answer)

    def expect_ack(self, candidate_id: str, ack: Ack) -> None:
        """Acknowledge an order read through a consumer group with the batch that reports
        its candidate's `candidate.executed` (an `OrderReader` calls this)."""
        self._need_redis("branch orders are acknowledged in")
        self._outbox.expect_ack(candidate_id, ack)


class Reporter(_ReporterBase):
    """Reports one run's events (blocking API).

    Each event is validated when emitted (a `ContractError` names the bad field), numbered
    with the run's next `seq`, and sent in batches: pipelined XADD to the events stream,
    or `POST /v1/events` with `api_url`. A generator that restarts passes `start_seq` so
    its new events do not reuse numbers gencoach has already applied (and would ignore).

    A batch that cannot be sent because the connection dropped, Redis is still loading
    its data set (`BusyLoadingError`) or refuses the write at its `maxmemory` (OOM), or
    the controller answered 502/503/504, is sent again with exponential backoff for up to
    `retry_timeout_s` (`attempts`, if given, bounds the tries too), and so is every other
    Redis call of the reporter (branch orders, teacher states, the settled probe); events
    are idempotent by `(run_id, seq)`, so a batch sent twice changes nothing
    (`gencoach.runtime.retrying` holds the policy). Then `ReportError` says why, and the
    batch stays buffered for the next `flush()`. A reporter that never reached gencoach
    fails at once with the connection's own error when the connection is refused (a
    wrong URL); a server that answered "loading" or "out of memory" is there, and is
    waited for.

    With Redis, each batch also records the run's next seq (and whatever the generator
    `remember`s) in the run's generator state, and acknowledges the branch orders read
    through a consumer group whose execution it reports
    (`gencoach.reporting.orders.OrderReader`); `recall()` gives a restarted generator its
    state back and numbers on from it.
    """

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
        attempts: int | None = None,
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
        self._redis = (
            redis.Redis.from_url(redis_url, retry=no_client_retries()) if redis_url else None
        )
        self._http = httpx.Client(base_url=api_url, headers=self._headers) if api_url else None
        self._settle = self._redis.register_script(SCRIPT) if self._redis else None

    def emit(self, event_type: str, **fields: Any) -> int:
        """Validate, number and buffer an event (sent when the batch fills); return its seq."""
        seq = self._outbox.next_seq
        if self._outbox.add(event_type, fields):
            self.flush()
        return seq

    def flush(self) -> None:
        """Send every buffered event (and what goes with them) now."""
        batch = self._outbox.take()
        if not batch:
            return
        try:
            for attempt in self._retrying():
                with attempt:
                    self._send(batch)
        except TRANSIENT as error:
            if not self._reached and not self._retryable(error):
                self._outbox.put_back(batch)  # never reached: the error as it is
                raise
            raise self._gave_up(batch, error) from error
        self._reached = True

    def _send(self, batch: Outgoing) -> None:
        if self._redis is not None:
            pipe = self._redis.pipeline(transaction=False)
            self._outbox.fill(pipe, batch)
            pipe.execute()
        elif self._http is not None and batch.events:
            _check_http(self._http.post("/v1/events", json=batch.events))

    def retried(self, operation: Callable[[], T], what: str) -> T:
        """Run a Redis call with the reporter's retries; ReportError says `what` failed."""
        try:
            for attempt in self._retrying():
                with attempt:
                    result = operation()
                    self._reached = True
                    return result
        except TRANSIENT as error:
            raise self._failed(what, error) from error
        raise AssertionError("unreachable: stamina either returns or raises")

    def _client(self, what: str) -> redis.Redis:
        self._need_redis(what)
        assert self._redis is not None
        return self._redis

    def save_teacher_state(self, input_id: int, state: Any, *, keep: bool = False) -> None:
        """Save the privileged state behind a situation's input for `type: python` teachers
        (Redis only; `keep`: only if none is saved; see docs/backends.md)."""
        client = self._client("teacher states are kept in")
        key, field, value = self._outbox.teacher_entry(input_id, state)
        write = client.hsetnx if keep else client.hset
        what = f"save the teacher state of input {input_id}"
        self.retried(lambda: write(key, field, value), what)

    def branch_orders(self, block_s: float = 0.0, count: int = 100) -> list[BranchOrder]:
        """Branch orders for this run published since the last call (Redis only)."""
        return self._outbox.take_held() or self._read(block_s, count)

    def _read(self, block_s: float, count: int = 100) -> list[BranchOrder]:
        client = self._client("branch orders are read from")
        streams, block = self._outbox.orders_query(block_s)
        reply = self.retried(
            lambda: client.xread(streams, count=count, block=block), "read the branch orders"
        )
        return self._outbox.read(reply)

    def ask_settled(self) -> None:
        """Send what is buffered and ask gencoach whether the run is settled; its answer
        comes on the branch stream (`settled` turns true as it is read)."""
        client = self._client("settled answers are read from")
        self.flush()
        if self._outbox.settled:
            return
        keys, args = self._outbox.probe()
        script = self._settle
        assert script is not None
        self.retried(lambda: script(keys=keys, args=args, client=client), "ask")

    def wait_settled(self, timeout_s: float) -> bool:
        """Send what is buffered and ask gencoach whether the run is settled: True once it
        answers that no branch order can come through the last event sent; False when
        orders came meanwhile (`branch_orders()` returns them) or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        if self._outbox.verdict(timeout_s) is None:
            self.ask_settled()
        while (verdict := self._outbox.verdict(deadline - time.monotonic())) is None:
            self._outbox.held.extend(self._read(deadline - time.monotonic()))
        return verdict

    def recall(self) -> dict[str, Any]:
        """The run's generator state as a restarted generator left it (what it remembered);
        the next event is numbered after the last one sent."""
        client = self._client("the generator state is kept in")
        key = self._keys.generator_state(self.run_id)
        return self._outbox.recalled(self.retried(lambda: client.hgetall(key), "recall"))

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
    """Reports one run's events (async API, for asyncio or trio via anyio), as `Reporter`
    does (batches, retries, generator state).

    `redis` is a client whose connection pool many reporters share (it stays open when
    the reporter closes); give it instead of `redis_url`.
    """

    def __init__(
        self,
        run_id: str,
        *,
        redis_url: str | None = None,
        redis: redis.asyncio.Redis | None = None,
        api_url: str | None = None,
        token: str | None = None,
        key_prefix: str = "gencoach",
        batch_size: int = 200,
        start_seq: int = 0,
        attempts: int | None = None,
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
            shared_redis=redis is not None,
        )
        self._owns_redis = redis is None
        self._redis = redis or (_async_redis(redis_url) if redis_url else None)
        headers = self._headers
        self._http = httpx.AsyncClient(base_url=api_url, headers=headers) if api_url else None
        self._settle = self._redis.register_script(SCRIPT) if self._redis else None

    async def emit(self, event_type: str, **fields: Any) -> int:
        """Validate, number and buffer an event (sent when the batch fills); return its seq."""
        seq = self._outbox.next_seq
        if self._outbox.add(event_type, fields):
            await self.flush()
        return seq

    async def flush(self) -> None:
        """Send every buffered event (and what goes with them) now."""
        batch = self._outbox.take()
        if not batch:
            return
        try:
            async for attempt in self._retrying():
                with attempt:
                    await self._send(batch)
        except TRANSIENT as error:
            if not self._reached and not self._retryable(error):
                self._outbox.put_back(batch)  # never reached: the error as it is
                raise
            raise self._gave_up(batch, error) from error
        self._reached = True

    async def _send(self, batch: Outgoing) -> None:
        if self._redis is not None:
            pipe = self._redis.pipeline(transaction=False)
            self._outbox.fill(pipe, batch)
            await pipe.execute()
        elif self._http is not None and batch.events:
            _check_http(await self._http.post("/v1/events", json=batch.events))

    async def retried(self, operation: Callable[[], Awaitable[T]], what: str) -> T:
        """Run a Redis call of the generator's own with the reporter's retries.

        A generator that keeps state beside its events (the reference simulator's world
        states) survives a Redis restart or an OOM refusal as its events do; giving up
        raises ReportError saying `what` could not be done and why.
        """
        try:
            async for attempt in self._retrying():
                with attempt:
                    result = await operation()
                    self._reached = True  # later batches are retried when it drops
                    return result
        except TRANSIENT as error:
            raise self._failed(what, error) from error
        raise AssertionError("unreachable: stamina either returns or raises")

    def _client(self, what: str) -> redis.asyncio.Redis:
        self._need_redis(what)
        assert self._redis is not None
        return self._redis

    async def save_teacher_state(self, input_id: int, state: Any, *, keep: bool = False) -> None:
        """Save the privileged state behind a situation's input for `type: python` teachers
        (Redis only; `keep`: only if none is saved; see docs/backends.md)."""
        client = self._client("teacher states are kept in")
        key, field, value = self._outbox.teacher_entry(input_id, state)
        write = client.hsetnx if keep else client.hset
        # Retried as events are: a Redis restart or an OOM refusal does not end the run.
        await self.retried(
            lambda: write(key, field, value), f"save the teacher state of input {input_id}"
        )

    async def branch_orders(self, block_s: float = 0.0, count: int = 100) -> list[BranchOrder]:
        """Branch orders for this run published since the last call (Redis only)."""
        return self._outbox.take_held() or await self._read(block_s, count)

    async def _read(self, block_s: float, count: int = 100) -> list[BranchOrder]:
        client = self._client("branch orders are read from")
        streams, block = self._outbox.orders_query(block_s)
        reply = await self.retried(
            lambda: client.xread(streams, count=count, block=block), "read the branch orders"
        )
        return self._outbox.read(reply)

    async def ask_settled(self) -> None:
        """Send what is buffered and ask gencoach whether the run is settled; its answer
        comes on the branch stream (`settled` turns true as it is read, here or by a
        `gencoach.reporting.orders.OrderReader`)."""
        client = self._client("settled answers are read from")
        await self.flush()
        if self._outbox.settled:
            return
        keys, args = self._outbox.probe()
        script = self._settle
        assert script is not None
        await self.retried(lambda: script(keys=keys, args=args, client=client), "ask")

    async def wait_settled(self, timeout_s: float) -> bool:
        """Send what is buffered and ask gencoach whether the run is settled: True once it
        answers that no branch order can come through the last event sent; False when
        orders came meanwhile (`branch_orders()` returns them) or after `timeout_s`."""
        deadline = anyio.current_time() + timeout_s
        if self._outbox.verdict(timeout_s) is None:
            await self.ask_settled()
        while (verdict := self._outbox.verdict(deadline - anyio.current_time())) is None:
            self._outbox.held.extend(await self._read(deadline - anyio.current_time()))
        return verdict

    async def recall(self) -> dict[str, Any]:
        """The run's generator state as a restarted generator left it (what it remembered);
        the next event is numbered after the last one sent."""
        client = self._client("the generator state is kept in")
        key = self._keys.generator_state(self.run_id)
        return self._outbox.recalled(await self.retried(lambda: client.hgetall(key), "recall"))

    async def aclose(self) -> None:
        """Send what is buffered and release connections."""
        try:
            await self.flush()
        finally:
            if self._redis is not None and self._owns_redis:
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


def _async_redis(url: str) -> redis.asyncio.Redis:
    return redis.asyncio.Redis.from_url(url, retry=no_client_retries())
