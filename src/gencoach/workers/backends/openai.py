"""An OpenAI-compatible chat-completions client (OpenAI, vLLM, Ollama, llama.cpp, hosted APIs)."""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import replace
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import redis.asyncio
from pydantic import BaseModel

from gencoach.config.settings import BackendSettings
from gencoach.constants import Keys
from gencoach.errors import (
    BackendError,
    BackendRequestError,
    BackendTruncatedError,
    BackendUnavailable,
)
from gencoach.metrics import MetricsRecorder
from gencoach.protocol.base import JsonObject
from gencoach.runtime.logs import get_logger
from gencoach.runtime.retrying import RetryPolicy
from gencoach.workers.backends.backend import DEFAULT_CONCURRENCY, Backend, Reply
from gencoach.workers.backends.chat import ChatMessage, Usage
from gencoach.workers.backends.modes import ModeMemory
from gencoach.workers.backends.schemas import (
    FALLBACKS,
    StructuredOutput,
    refuses_format,
    response_format,
    schema_prompt,
)
from gencoach.workers.backends.wakeups import SlotWakeups
from gencoach.workers.tls import shared_ssl_context

log = get_logger("backends.openai")

_SHOWN_CHARS = 500  # of a server's error message, in logs and errors

# A backend call's tries: 0.5 s doubling to 20 s (plus up to 0.5 s of jitter) between
# them, or what the server's Retry-After asks, up to RETRY_AFTER_MAX_S; the backend's
# `max_retries` setting bounds them.
BACKEND_RETRY: Final = RetryPolicy(
    timeout_s=None, wait_initial_s=0.5, wait_max_s=20.0, wait_jitter_s=0.5
)
RETRY_AFTER_MAX_S = 60.0

# Failures worth another try: the request may not have reached the model, or the server
# dropped it (refused, reset or closed connections, timeouts). Misconfigurations such as
# an unsupported URL scheme are not among them.
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    TimeoutError,
)


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another try: 408, 429 and every 5xx."""
    return status in (408, 429) or 500 <= status <= 599


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks to wait (delay or HTTP date, at most
    RETRY_AFTER_MAX_S); None if absent or odd."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            return None
        seconds = when.timestamp() - now
    if seconds != seconds:  # NaN
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)


class _TransientError(Exception):
    """A try that failed in a way worth another (a transport error, a retryable status)."""

    def __init__(
        self, cause: str, attempt: int, status: int | None = None, wait_s: float | None = None
    ) -> None:
        super().__init__(cause)
        self.cause = cause
        self.attempt = attempt
        self.status = status
        self.wait_s = wait_s  # what the server's Retry-After asked, if it did


def _retried(error: Exception) -> bool | float:
    """BACKEND_RETRY's rule: a failed try is tried again, after the wait the server asked
    for if it did; anything else (a refusal, a bad reply) is raised at once."""
    if not isinstance(error, _TransientError):
        return False
    return True if error.wait_s is None else error.wait_s


class _FormatRefusedError(Exception):
    """The server refused the request's response_format (never retried as transient)."""

    def __init__(self, cause: str, status: int, attempt: int) -> None:
        super().__init__(cause)
        self.cause = cause
        self.status = status
        self.attempt = attempt


def public_url(url: str) -> str:
    """The URL without credentials or query string, fit for logs and error messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def server_message(response: httpx.Response) -> str:
    """What an error response says, from OpenAI's `{"error": {"message"}}` shape or its text."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:_SHOWN_CHARS] or response.reason_phrase
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            return str(error)[:_SHOWN_CHARS]
    return text[:_SHOWN_CHARS]


def _describe(error: BaseException, timeout_s: float) -> str:
    if isinstance(error, TimeoutError | httpx.TimeoutException):
        return f"no answer within {timeout_s} s ({type(error).__name__})"
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect: {error}"
    return f"{type(error).__name__}: {error}"


class OpenAIBackend(Backend):
    """POSTs chats to `settings.endpoint`, the full `.../v1/chat/completions` URL.

    Retries connection errors, timeouts, 408, 429 and 5xx up to `settings.max_retries`
    times, waiting as `retry` (BACKEND_RETRY) says or as long as a `Retry-After` asks;
    any other 4xx fails at once.
    Each try is bounded by `settings.timeout_s` as a whole. Every call carries the
    backend's `max_tokens` and `temperature`; an answer cut at `max_tokens` raises
    BackendTruncatedError.

    Structured output follows `settings.structured_output`. An explicit mode is used as
    is, and a server refusing it (a 4xx, or a 5xx naming the response format) fails at
    once with an error naming the setting to change. `auto` tries `json_schema`, then
    `json_object` with the schema, then `none` with the schema in the prompt (where
    `Backend.ask` re-asks once on a parse failure), and remembers the first mode the
    server takes per endpoint and model, in Redis when it has one (logged once).
    """

    def __init__(
        self,
        name: str,
        settings: BackendSettings,
        *,
        redis: redis.asyncio.Redis | None = None,
        keys: Keys | None = None,
        slot_wait_s: float = 300.0,
        retry: RetryPolicy | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        wakeups: SlotWakeups | None = None,
        metrics: MetricsRecorder | None = None,
    ) -> None:
        super().__init__(
            name,
            settings,
            redis=redis,
            keys=keys,
            slot_wait_s=slot_wait_s,
            concurrency=concurrency,
            wakeups=wakeups,
            metrics=metrics,
        )
        self.endpoint = public_url(settings.endpoint)
        self.retry = replace(retry or BACKEND_RETRY, attempts=settings.max_retries + 1)
        modes_key = (keys or Keys()).backend_structured_output(name)
        self.modes = ModeMemory(name, self.endpoint, redis, modes_key)
        self._client: httpx.AsyncClient | None = None

    async def _open(self) -> None:
        self._client = httpx.AsyncClient(
            headers=self.headers(),
            timeout=httpx.Timeout(self.settings.timeout_s),
            verify=shared_ssl_context(),
        )

    async def _close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    def headers(self) -> httpx.Headers:
        """The configured headers, the API key as a bearer token, and the JSON content type."""
        headers = httpx.Headers(self.settings.header_values())
        api_key = self.settings.api_key
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
        headers["Content-Type"] = "application/json"
        return headers

    def body(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        model: str | None = None,
        max_tokens: int | None = None,
        mode: StructuredOutput | None = None,
    ) -> dict[str, Any]:
        """The JSON body of a chat-completions request (`mode`: the setting's, `auto`'s first)."""
        configured = self.settings.structured_output
        mode = mode or (FALLBACKS[0] if configured == "auto" else configured)
        sent = [message.as_json() for message in messages]
        if schema is not None and mode == "none":
            sent.append(ChatMessage.user(schema_prompt(schema)).as_json())
        body: dict[str, Any] = {
            "model": model or self.settings.default_model,
            "messages": sent,
            "temperature": self.settings.temperature,
            "max_tokens": max_tokens or self.settings.max_tokens,
        }
        structured = response_format(mode, schema)
        if structured is not None:
            body["response_format"] = structured
        return body

    async def _complete(
        self,
        messages: list[ChatMessage],
        *,
        schema: type[BaseModel] | None,
        model: str | None,
        max_tokens: int | None,
        context: JsonObject | None = None,
    ) -> Reply:
        configured = self.settings.structured_output
        if schema is None:
            return await self._send(
                self.body(messages, schema=None, model=model, max_tokens=max_tokens)
            )
        served = model or self.settings.default_model or ""
        modes = [configured] if configured != "auto" else await self.modes.to_try(served)
        for mode in modes:
            body = self.body(messages, schema=schema, model=model, max_tokens=max_tokens, mode=mode)
            try:
                reply = await self._send(body)
            except _FormatRefusedError as refused:
                if configured != "auto":
                    raise self._strict_refusal(mode, refused) from None
                log.warning(
                    "backend.structured_output_refused",
                    backend=self.name,
                    mode=mode,
                    cause=refused.cause,
                )
                continue
            except BackendTruncatedError:
                if configured == "auto":  # the server took the format; its answer was cut
                    await self.modes.learnt(served, mode)
                raise
            if configured == "auto":
                await self.modes.learnt(served, mode)
            return reply
        raise AssertionError("unreachable: mode none sends no response_format to refuse")

    def _strict_refusal(self, mode: str, refused: _FormatRefusedError) -> BackendRequestError:
        later = FALLBACKS[FALLBACKS.index(mode) + 1 :] if mode in FALLBACKS else ()
        advice = f"set structured_output: {later[0]} (or auto)" if later else "check the server"
        cause = f"{refused.cause}; it refuses structured_output {mode}: {advice}"
        log.error("backend.refused", backend=self.name, attempt=refused.attempt, cause=cause)
        return BackendRequestError(
            self.name,
            cause,
            attempts=refused.attempt,
            endpoint=self.endpoint,
            status=refused.status,
        )

    async def _send(self, body: dict[str, Any]) -> Reply:
        """POST one body with the retries transient failures deserve."""
        tries = self.retry.retrying(on=_retried, log_as="backend.retry", backend=self.name)
        try:
            async for attempt in tries:
                with attempt:
                    return await self._try(body, attempt.num)
        except _TransientError as failed:
            log.error(
                "backend.gave_up",
                backend=self.name,
                endpoint=self.endpoint,
                attempt=failed.attempt,
                status=failed.status,
                cause=failed.cause,
            )
            raise BackendUnavailable(
                self.name,
                f"gave up: {failed.cause}",
                attempts=failed.attempt,
                endpoint=self.endpoint,
                status=failed.status,
            ) from None
        raise AssertionError("unreachable: the last try returns or raises")

    async def _try(self, body: dict[str, Any], attempt: int) -> Reply:
        """POST once: the reply, or _TransientError if another try may do better."""
        try:
            async with self._slot():
                response = await self._post(body)
        except RETRY_EXCEPTIONS as error:
            raise _TransientError(_describe(error, self.settings.timeout_s), attempt) from error
        if response.is_success:
            return self._reply(response, body, attempt)
        status = response.status_code
        message = server_message(response)
        cause = f"HTTP {status}: {message}"
        if "response_format" in body and refuses_format(status, message):
            raise _FormatRefusedError(cause, status, attempt)
        if not retryable_status(status):
            log.error("backend.refused", backend=self.name, attempt=attempt, cause=cause)
            raise BackendRequestError(
                self.name, cause, attempts=attempt, endpoint=self.endpoint, status=status
            )
        wait_s = retry_after_s(response.headers.get("Retry-After"), time.time())
        raise _TransientError(cause, attempt, status, wait_s)

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        assert self._client is not None
        # httpx's timeout bounds each read; this bounds the whole request, so that the
        # slot lease (timeout_s plus a margin) always outlasts it.
        with anyio.fail_after(self.settings.timeout_s):
            return await self._client.post(self.settings.endpoint, json=body)

    def _reply(self, response: httpx.Response, body: dict[str, Any], attempt: int) -> Reply:
        model = body["model"]
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
            finish = choice.get("finish_reason")
        except (ValueError, LookupError, TypeError, AttributeError) as error:
            shown = response.text[:_SHOWN_CHARS]
            log.error("backend.bad_reply", backend=self.name, attempt=attempt, reply=shown)
            raise BackendError(
                self.name,
                f"reply from {self.endpoint} is not a chat completion "
                f"({type(error).__name__}: {error}): {shown!r}",
                attempts=attempt,
            ) from None
        if finish == "length":
            tail = content[-_SHOWN_CHARS:] if isinstance(content, str) else None
            log.error(
                "backend.truncated", backend=self.name, max_tokens=body["max_tokens"], tail=tail
            )
            raise BackendTruncatedError(self.name, body["max_tokens"], attempts=attempt)
        text = content if isinstance(content, str) else ""
        served = data.get("model")
        return Reply(
            text=text,
            model=served if isinstance(served, str) and served else model,
            usage=Usage.from_json(data.get("usage")),
            attempts=attempt,
        )
