"""The python backend: an in-process function named by import path answers the chat."""

from __future__ import annotations

from typing import Any

import pytest

from gencoach.config.settings import BackendSettings
from gencoach.errors import BackendError, BackendRequestError, BackendUnavailable
from gencoach.protocol.llm import FailureDiagnosisAnswer
from gencoach.workers.backends import ChatMessage, PythonBackend, make_backend
from gencoach.workers.prompts import RewriteAnswer
from tests.workers import llm_functions

PROMPT = [ChatMessage.system("You diagnose."), ChatMessage.user("decision 1 was wrong")]


def python_settings(function: str, **options: Any) -> BackendSettings:
    """A python backend calling `tests.workers.llm_functions:<function>`."""
    endpoint = f"tests.workers.llm_functions:{function}"
    return BackendSettings.model_validate({"type": "python", "endpoint": endpoint, **options})


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    llm_functions.CALLS.clear()


@pytest.mark.parametrize("function", ["diagnose", "diagnose_async"])
@pytest.mark.asyncio
async def test_sync_and_async_functions_answer(function: str) -> None:
    """A plain or coroutine function gets the messages, schema and model, and its text is parsed."""
    settings = python_settings(function, default_model="rules-v1")
    backend = make_backend("rules", settings)
    assert isinstance(backend, PythonBackend)
    async with backend:
        answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert answer.value.reason == "decision 1 was wrong"
    assert answer.transcript[0].completion.model == "rules-v1"
    (call,) = llm_functions.CALLS
    assert call["messages"] == [message.as_json() for message in PROMPT]
    assert call["schema"] == FailureDiagnosisAnswer.model_json_schema()
    assert call["model"] == "rules-v1"


@pytest.mark.asyncio
async def test_a_function_answering_in_magma_gens_form_is_accepted() -> None:
    """A python backend written for MAGMA-GEN (expected decision as text) passes the contract."""
    async with make_backend("rules", python_settings("diagnose_as_magma")) as backend:
        answer = await backend.ask(PROMPT, FailureDiagnosisAnswer)
    assert answer.value.expected_decision == "press_button(id='sw0') with panda"


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("tests.workers.no_such_module:diagnose", "No module named 'tests.workers.no_such_module'"),
        ("tests.workers.llm_functions:missing", "has no attribute 'missing'"),
        ("tests.workers.llm_functions:NOT_A_FUNCTION", "is a int, not a function"),
    ],
)
@pytest.mark.asyncio
async def test_an_endpoint_that_does_not_import_is_refused(endpoint: str, message: str) -> None:
    """An import path that fails raises BackendRequestError naming the path and the reason."""
    settings = BackendSettings.model_validate({"type": "python", "endpoint": endpoint})
    with pytest.raises(BackendRequestError) as caught:
        async with make_backend("rules", settings):
            pass
    assert endpoint in str(caught.value)
    assert message in str(caught.value)


@pytest.mark.asyncio
async def test_a_raising_function_becomes_a_backend_error() -> None:
    """An exception in the function raises BackendError with its type, message and frame."""
    async with make_backend("rules", python_settings("broken")) as backend:
        with pytest.raises(BackendError) as caught:
            await backend.complete(PROMPT, schema=None)
    text = str(caught.value)
    assert "ValueError: the coach function is broken" in text
    assert "llm_functions.py" in text
    assert "in broken" in text


@pytest.mark.asyncio
async def test_a_slow_function_times_out() -> None:
    """A function that outlasts timeout_s raises BackendUnavailable without waiting for it."""
    async with make_backend("rules", python_settings("slow", timeout_s=0.1)) as backend:
        with pytest.raises(BackendUnavailable, match=r"within 0\.1 s"):
            await backend.complete(PROMPT, schema=None)


@pytest.mark.asyncio
async def test_a_function_must_return_text() -> None:
    """A function returning something other than a str raises BackendError saying so."""
    async with make_backend("rules", python_settings("not_text")) as backend:
        with pytest.raises(BackendError, match="returned dict, not the answer's text"):
            await backend.complete(PROMPT, schema=None)


@pytest.mark.asyncio
async def test_a_function_taking_context_receives_the_jobs() -> None:
    """A function with a `context` keyword gets what the asking job passes; others do not."""
    backend = make_backend("teacher", python_settings("knows_the_job"))
    async with backend:
        answer = await backend.ask(PROMPT, RewriteAnswer, context={"run_id": "r-7"})
    assert answer.value.say == "run r-7"
