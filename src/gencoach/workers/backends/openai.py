"""An OpenAI-compatible chat-completions client (OpenAI, vLLM, Ollama, llama.cpp, hosted APIs)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import redis.asyncio
from pydantic import BaseModel

from gencoach.config.settings import BackendSettings
from gencoach.constants import Keys
from gencoach.errors import BackendError, BackendRequestError, BackendUnavailable
from gencoach.logs import get_logger
from gencoach.protocol.base import JsonObject
from gencoach.workers.backends.base import DEFAULT_CONCURRENCY, Backend, Reply
from gencoach.workers.backends.chat import ChatMessage, Usage
from gencoach.workers.backends.retries import RETRY_EXCEPTIONS, RetryPolicy, retryable_status
from gencoach.workers.backends.schemas import response_format
from gencoach.workers.backends.wakeups import SlotWakeups
from gencoach.workers.tls import shared_ssl_context

log = get_logger("backends.openai")

_SHOWN_CHARS = 500  # of a server's error message, in logs and errors


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
    times, waiting as `retry` says (honouring `Retry-After`); any other 4xx fails at once.
    Each try is bounded by `settings.timeout_s` as a whole.
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
    ) -> None:
        super().__init__(
            name,
            settings,
            redis=redis,
            keys=keys,
            slot_wait_s=slot_wait_s,
            concurrency=concurrency,
            wakeups=wakeups,
        )
        self.endpoint = public_url(settings.endpoint)
        self.retry = retry or RetryPolicy()
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
        headers = httpx.Headers(
            {name: value.get_secret_value() for name, value in self.settings.headers.items()}
        )
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
    ) -> dict[str, Any]:
        """The JSON body of a chat-completions request."""
        body: dict[str, Any] = {
            "model": model or self.settings.default_model,
            "messages": [message.as_json() for message in messages],
            "temperature": 0,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        structured = response_format(self.settings.structured_output, schema)
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
        body = self.body(messages, schema=schema, model=model, max_tokens=max_tokens)
        tries = self.settings.max_retries + 1
        for attempt in range(1, tries + 1):
            status: int | None = None
            retry_after: str | None = None
            try:
                async with self._slot():
                    response = await self._post(body)
            except RETRY_EXCEPTIONS as error:
                cause = _describe(error, self.settings.timeout_s)
            else:
                if response.is_success:
                    return self._reply(response, body["model"], attempt)
                status = response.status_code
                cause = f"HTTP {status}: {server_message(response)}"
                if not retryable_status(status):
                    log.error("backend.refused", backend=self.name, attempt=attempt, cause=cause)
                    raise BackendRequestError(
                        self.name, cause, attempts=attempt, endpoint=self.endpoint, status=status
                    )
                retry_after = response.headers.get("Retry-After")
            if attempt == tries:
                log.error(
                    "backend.gave_up",
                    backend=self.name,
                    endpoint=self.endpoint,
                    attempt=attempt,
                    status=status,
                    cause=cause,
                )
                raise BackendUnavailable(
                    self.name,
                    f"gave up: {cause}",
                    attempts=attempt,
                    endpoint=self.endpoint,
                    status=status,
                )
            wait_s = self.retry.wait_s(attempt, retry_after)
            log.warning(
                "backend.retry",
                backend=self.name,
                attempt=attempt,
                status=status,
                cause=cause,
                retry_after=retry_after,
                wait_s=round(wait_s, 3),
            )
            await self.retry.sleep(wait_s)
        raise AssertionError("unreachable: the last try returns or raises")

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        assert self._client is not None
        # httpx's timeout bounds each read; this bounds the whole request, so that the
        # slot lease (timeout_s plus a margin) always outlasts it.
        with anyio.fail_after(self.settings.timeout_s):
            return await self._client.post(self.settings.endpoint, json=body)

    def _reply(self, response: httpx.Response, model: str, attempt: int) -> Reply:
        try:
            data = response.json()
            message = data["choices"][0]["message"]
            content = message.get("content")
        except (ValueError, LookupError, TypeError, AttributeError) as error:
            shown = response.text[:_SHOWN_CHARS]
            log.error("backend.bad_reply", backend=self.name, attempt=attempt, reply=shown)
            raise BackendError(
                self.name,
                f"reply from {self.endpoint} is not a chat completion "
                f"({type(error).__name__}: {error}): {shown!r}",
                attempts=attempt,
            ) from None
        text = content if isinstance(content, str) else ""
        served = data.get("model")
        return Reply(
            text=text,
            model=served if isinstance(served, str) and served else model,
            usage=Usage.from_json(data.get("usage")),
            attempts=attempt,
        )
