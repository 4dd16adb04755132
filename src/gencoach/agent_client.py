"""Talking to an agent over HTTP: its announcement, coaching sessions, answers, repairs.

Every answer is validated strictly; anything the agent gets wrong becomes an
`AgentCallError` that names the agent URL and what was wrong with the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from gencoach.errors import AgentCallError, ContractError
from gencoach.protocol import (
    PROTOCOL_VERSION,
    AgentInfo,
    AgentRequest,
    AgentResponse,
    CoachingSessionConfig,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)
from gencoach.runtime.retrying import RetryPolicy


@dataclass(frozen=True)
class SessionOutcome:
    """What opening a coaching session gave: opened, or refused (409/503) with the reason."""

    status: Literal["opened", "conflict", "unavailable"]
    reason: str = ""


# An agent call that could not reach the agent (or found it overloaded) is asked again
# twice, 0.5 s then about 1 s later: a reinjection's turn and a repair job's coaching call
# (docs/operations.md, "Retries").
AGENT_RETRY: Final = RetryPolicy(timeout_s=None, attempts=3, wait_initial_s=0.5)
_JSON: Final = {"Content-Type": "application/json"}


def agent_unreachable(error: Exception) -> bool:
    """Whether an agent call may work later: the agent was unreachable or overloaded."""
    return isinstance(error, AgentCallError) and error.retryable


def session_path(run_id: str) -> str:
    """The coaching session route of a run, its id percent-encoded as one path segment."""
    return f"/v1/coaching/sessions/{quote(run_id, safe='')}"


def json_body(body: BaseModel) -> tuple[str, dict[str, str]]:
    """A call's JSON body and its content type, written by pydantic: a third to a sixth of
    the CPU of httpx's `json=` over the dumped model (`benchmarks/agent_bodies.py`)."""
    return body.model_dump_json(), _JSON


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])[:500]
    return response.text[:500]


class AgentClient:
    """One agent's HTTP API, through a client the caller owns."""

    def __init__(self, base_url: str, http: httpx.AsyncClient) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = http

    async def _call(self, method: str, path: str, body: BaseModel | None = None) -> httpx.Response:
        url = f"{self.base_url}{path}"
        content, headers = (None, None) if body is None else json_body(body)
        try:
            return await self.http.request(method, url, content=content, headers=headers)
        except httpx.HTTPError as error:
            reason = f"{method} {path} failed: {error!r}"
            raise AgentCallError(self.base_url, reason, retryable=True) from None
        except httpx.InvalidURL as error:  # not an HTTPError: a URL no request can be made to
            raise AgentCallError(self.base_url, f"{method} {path}: invalid URL: {error}") from None

    def _refuse(self, path: str, response: httpx.Response) -> AgentCallError:
        status = response.status_code
        retryable = (
            status >= httpx.codes.INTERNAL_SERVER_ERROR or status == httpx.codes.TOO_MANY_REQUESTS
        )
        return AgentCallError(
            self.base_url, f"{path} answered {status}: {_reason(response)}", retryable=retryable
        )

    async def info(self) -> AgentInfo:
        """`GET /v1/info`, strictly validated, protocol 2.0 only."""
        response = await self._call("GET", "/v1/info")
        if response.status_code != httpx.codes.OK:
            raise self._refuse("/v1/info", response)
        try:
            info = AgentInfo.parse_json(response.content)
        except ContractError as error:
            raise AgentCallError(self.base_url, f"/v1/info: {error}") from None
        if info.protocol_version != PROTOCOL_VERSION:
            raise AgentCallError(
                self.base_url,
                f"/v1/info: protocol_version is {info.protocol_version!r}; "
                f"gencoach speaks {PROTOCOL_VERSION!r}",
            )
        return info

    async def open_session(self, run_id: str, config: CoachingSessionConfig) -> SessionOutcome:
        """`PUT /v1/coaching/sessions/{run_id}`: 204 opened; 409 and 503 are reported."""
        path = session_path(run_id)
        response = await self._call("PUT", path, config)
        if response.status_code == httpx.codes.NO_CONTENT:
            return SessionOutcome("opened")
        if response.status_code == httpx.codes.CONFLICT:
            return SessionOutcome("conflict", _reason(response))
        if response.status_code == httpx.codes.SERVICE_UNAVAILABLE:
            return SessionOutcome("unavailable", _reason(response))
        raise self._refuse(path, response)

    async def close_session(self, run_id: str) -> None:
        """`DELETE /v1/coaching/sessions/{run_id}` (a session already gone is fine)."""
        path = session_path(run_id)
        response = await self._call("DELETE", path)
        if response.status_code not in (httpx.codes.NO_CONTENT, httpx.codes.NOT_FOUND):
            raise self._refuse(path, response)

    async def respond(self, request: AgentRequest) -> AgentResponse:
        """`POST /v1/responses`, checked for count, order and ids against the request."""
        response = await self._call("POST", "/v1/responses", request)
        if response.status_code != httpx.codes.OK:
            raise self._refuse("/v1/responses", response)
        try:
            answer = AgentResponse.parse_json(response.content)
            answer.validate_request(request)
        except ContractError as error:
            raise AgentCallError(self.base_url, f"/v1/responses: {error}") from None
        return answer

    async def coach(self, request: SpecializedCoachingRequest) -> SpecializedCoachingResponse:
        """`POST /v1/coaching`, checked against the request's id and reinjection points."""
        response = await self._call("POST", "/v1/coaching", request)
        if response.status_code != httpx.codes.OK:
            raise self._refuse("/v1/coaching", response)
        try:
            answer = SpecializedCoachingResponse.parse_json(response.content)
            answer.validate_request(request)
        except ContractError as error:
            raise AgentCallError(self.base_url, f"/v1/coaching: {error}") from None
        return answer
