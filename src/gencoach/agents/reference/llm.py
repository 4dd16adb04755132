"""The LLM policy: an OpenAI-compatible chat-completions server decides.

`LLMPolicy` asks the server (its docstring says how each way of answering works);
`function_tools`, `chat_messages` and `read_decision` make the request and read the
answer; `tabletop_system` is the reference world's system prompt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any, Literal

import anyio
import httpx
from pydantic import Field

from gencoach.agents.memory import Memory, entry_decision
from gencoach.agents.policy import Decided
from gencoach.agents.sessions import StructuredOutput
from gencoach.config.settings import BackendSettings
from gencoach.errors import BackendAnswerError, BackendError, BackendUnavailable
from gencoach.protocol import AgentDecision, AgentInput, ContractModel, JsonObject, ToolCall
from gencoach.protocol.decision_text import format_decision
from gencoach.workers.backends.chat import ChatMessage
from gencoach.workers.backends.openai import OpenAIBackend, public_url, server_message

Answers = Literal["tools", "json"]
SystemPrompt = Callable[[AgentInput], str]

_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
_SYSTEM = (
    "You control robots on a tabletop through function calls. To act, call tools, each "
    "naming the robot that runs it in target_robot_name; to answer a question, reply with "
    "text alone and call no tool. Never mix text and tool calls.\n"
    "Robots: {robots}\nWhat you see of the world (JSON): {world}"
)


class MalformedAnswerError(ValueError):
    """The model's message cannot be read as a decision."""


class RobotCall(ContractModel):
    """One call in a single-agent JSON answer: the robot is the env's one."""

    name: str = Field(min_length=1)
    arguments: JsonObject = Field(default_factory=dict)


class RobotDecision(ContractModel):
    """A single-agent decision as JSON: words, or calls naming no robot."""

    say: str = ""
    tool_calls: list[RobotCall] = Field(default_factory=list)


def function_tools(
    tools: list[JsonObject], robots: list[str], *, robot_parameter: bool = True
) -> list[dict[str, Any]]:
    """The MAGMA tools as OpenAI function tools, each with a `target_robot_name` parameter
    unless `robot_parameter` is False (a single-agent env)."""
    functions = []
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            continue
        arguments = tool.get("arguments")
        properties: dict[str, Any] = {}
        for param, spec in (arguments if isinstance(arguments, dict) else {}).items():
            spec = spec if isinstance(spec, dict) else {}
            properties[param] = {
                "type": _JSON_TYPES.get(str(spec.get("type")), "string"),
                "description": str(spec.get("description", "")),
            }
        if robot_parameter:
            robot: dict[str, Any] = {
                "type": "string",
                "description": "the robot that runs the call",
            }
            if robots:
                robot["enum"] = robots
            properties["target_robot_name"] = robot
        functions.append(
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": str(tool.get("description", "")),
                    "parameters": {
                        "type": "object",
                        "properties": properties,
                        "required": list(properties),
                    },
                },
            }
        )
    return functions


def tabletop_system(agent_input: AgentInput) -> str:
    """The reference world's system prompt: robots and what is seen of the world."""
    attributes = agent_input.attributes
    robots = attributes.get("known_robots", [])
    return _SYSTEM.format(robots=robots, world=json.dumps(attributes))


def chat_messages(
    agent_input: AgentInput, memory: Memory, system_prompt: SystemPrompt = tabletop_system
) -> list[dict[str, str]]:
    """The prompt: instructions and world, rules, the history, then the current instruction."""
    system = system_prompt(agent_input)
    if memory.memory_list:
        system += "\nRules to follow:\n" + "\n".join(f"- {rule}" for rule in memory.memory_list)
    messages = [{"role": "system", "content": system}]
    for entry in memory.history:
        decision = entry_decision(entry)
        if decision is not None:
            messages.append({"role": "assistant", "content": format_decision(decision)})
        elif entry.author == "SYSTEM":
            messages.append({"role": "user", "content": f"Environment feedback: {entry.content}"})
        elif entry.author == "USER":
            messages.append({"role": "user", "content": entry.content})
    current = agent_input.instruction
    prefix = "" if current.type == "user" else "Environment feedback: "
    messages.append({"role": "user", "content": prefix + current.content})
    return messages


def read_decision(message: object, robots: list[str]) -> AgentDecision:
    """The decision an assistant message holds, or MalformedAnswerError."""
    if not isinstance(message, dict):
        raise MalformedAnswerError("the answer holds no assistant message")
    content = message.get("content")
    calls = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise MalformedAnswerError(f"a tool call without a function name: {raw!r}")
        arguments = function.get("arguments") or {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                raise MalformedAnswerError(f"arguments are not JSON: {arguments!r}") from None
        if not isinstance(arguments, dict):
            raise MalformedAnswerError(f"arguments are not an object: {arguments!r}")
        robot = arguments.pop("target_robot_name", None) or (
            robots[0] if len(robots) == 1 else None
        )
        if not isinstance(robot, str) or not robot:
            raise MalformedAnswerError(f"call {function['name']} names no target_robot_name")
        calls.append(
            ToolCall(name=str(function["name"]), arguments=arguments, target_robot_name=robot)
        )
    say = content.strip() if isinstance(content, str) else ""
    return AgentDecision(say=say, tool_calls=calls)


class LLMPolicy:
    """Asks an OpenAI-compatible server (Ollama, vLLM, llama.cpp…) for each decision.

    With `answers="tools"` (the default) each MAGMA tool `{name, description, arguments:
    {param: {description, type}}}` becomes a function tool whose parameters add
    `target_robot_name`; the model's `tool_calls` become the decision's calls and its text
    content the decision's `say`. With `answers="json"` the model answers the decision as
    a JSON object instead, asked through gencoach's own backend client
    (`OpenAIBackend.ask`): the same structured-output fallback as the workers' backends
    (`structured_output: auto` tries json_schema, then json_object with the schema, then
    the schema in the prompt), and one re-ask naming why an answer was refused. For
    servers or models without tool calling.

    For a single-agent env, `robot` names the one robot: no `target_robot_name` parameter
    is offered and every call addresses it. `system_prompt` replaces the tabletop's
    system prompt. One request is sent per candidate, concurrently. An unreachable server
    or an unreadable answer becomes an error candidate (`backend_unavailable`,
    `backend_error`, `malformed_output`).
    """

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float = 120.0,
        temperature: float = 0.7,
        transport: httpx.AsyncBaseTransport | None = None,
        answers: Answers = "tools",
        structured_output: StructuredOutput = "auto",
        robot: str | None = None,
        system_prompt: SystemPrompt = tabletop_system,
    ) -> None:
        self.endpoint = endpoint
        self.model = model
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.answers: Answers = answers
        self.structured_output: StructuredOutput = structured_output
        self.robot = robot
        self.system_prompt = system_prompt
        self._transport = transport

    def robots(self, agent_input: AgentInput) -> list[str]:
        """The robots a call may address: the one robot, or the world's."""
        return [self.robot] if self.robot is not None else _robots(agent_input)

    def body(self, agent_input: AgentInput, memory: Memory) -> dict[str, Any]:
        """The chat-completions request for one candidate (tool calling)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(agent_input, memory, self.system_prompt),
            "temperature": self.temperature,
        }
        robots = self.robots(agent_input)
        tools = function_tools(agent_input.tools, robots, robot_parameter=self.robot is None)
        if tools:
            body["tools"] = tools
            # Some servers (llama.cpp's) pass tools to the model only with an explicit choice.
            body["tool_choice"] = "auto"
        return body

    async def decide(self, agent_input: AgentInput, memory: Memory, count: int) -> list[Decided]:
        """`count` candidates, one request each, sent concurrently."""
        if self.answers == "json":
            return await self._json_candidates(agent_input, memory, count)
        body = self.body(agent_input, memory)
        decided: list[Decided] = [Decided.failed("cancelled", "not answered")] * count
        async with httpx.AsyncClient(
            headers=self.headers, timeout=self.timeout_s, transport=self._transport
        ) as http:

            async def one(index: int) -> None:
                decided[index] = await self._candidate(http, body, self.robots(agent_input))

            async with anyio.create_task_group() as group:
                for index in range(count):
                    group.start_soon(one, index)
        return decided

    def json_backend(self) -> OpenAIBackend:
        """The backend client that asks for JSON decisions (unopened)."""
        settings = BackendSettings.model_validate(
            {
                "type": "openai",
                "endpoint": self.endpoint,
                "default_model": self.model,
                "headers": self.headers,
                "timeout_s": self.timeout_s,
                "max_retries": 0,
                "structured_output": self.structured_output,
                "temperature": self.temperature,
            }
        )
        return OpenAIBackend("policy", settings)

    def json_messages(self, agent_input: AgentInput, memory: Memory) -> list[ChatMessage]:
        """The prompt of a JSON answer: the chat, and the decision's shape to answer in."""
        messages = chat_messages(agent_input, memory, self.system_prompt)
        tools = json.dumps(agent_input.tools)
        shape = (
            '{"say": "", "tool_calls": [{"name": TOOL, "arguments": {...}}]}'
            if self.robot is not None
            else '{"say": "", "tool_calls": [{"name": TOOL, "arguments": {...}, '
            '"target_robot_name": ROBOT}]}'
        )
        messages[0]["content"] += (
            f"\nTools: {tools}\nAnswer with only a JSON object {shape}: tool calls to act "
            '(say empty), or {"say": TEXT, "tool_calls": []} to answer in words.'
        )
        roles = {"system": ChatMessage.system, "user": ChatMessage.user}
        return [roles.get(m["role"], ChatMessage.assistant)(m["content"]) for m in messages]

    async def _json_candidates(
        self, agent_input: AgentInput, memory: Memory, count: int
    ) -> list[Decided]:
        messages = self.json_messages(agent_input, memory)
        decided: list[Decided] = [Decided.failed("cancelled", "not answered")] * count
        async with self.json_backend() as backend:

            async def one(index: int) -> None:
                decided[index] = await self._json_candidate(backend, messages)

            async with anyio.create_task_group() as group:
                for index in range(count):
                    group.start_soon(one, index)
        return decided

    async def _json_candidate(self, backend: OpenAIBackend, messages: list[ChatMessage]) -> Decided:
        contract: type[RobotDecision | AgentDecision] = (
            RobotDecision if self.robot is not None else AgentDecision
        )
        try:
            answer = await backend.ask(messages, contract)
        except BackendAnswerError as error:
            return Decided.failed("malformed_output", str(error), component="llm")
        except BackendUnavailable as error:
            return Decided.failed("backend_unavailable", str(error), component="llm")
        except BackendError as error:
            return Decided.failed("backend_error", str(error), component="llm")
        exchange = answer.transcript[-1]
        step: JsonObject = {
            "id": f"llm-{uuid.uuid4().hex}",
            "component": "llm",
            "origin": "model",
            "full_prompt": json.dumps([m.as_json() for m in exchange.prompt]),
            "input_elements": {"model": self.model, "answers": "json"},
            "output_raw": exchange.answer,
        }
        value = answer.value
        if isinstance(value, AgentDecision):
            return Decided.of(value, internal_steps=[step])
        assert self.robot is not None
        calls = [
            ToolCall(name=call.name, arguments=call.arguments, target_robot_name=self.robot)
            for call in value.tool_calls
        ]
        decision = AgentDecision(say=value.say.strip(), tool_calls=calls)
        return Decided.of(decision, internal_steps=[step])

    async def _candidate(
        self, http: httpx.AsyncClient, body: dict[str, Any], robots: list[str]
    ) -> Decided:
        where = public_url(self.endpoint)
        try:
            response = await http.post(self.endpoint, json=body)
        except httpx.HTTPError as error:
            return Decided.failed("backend_unavailable", f"{where}: {error!r}", component="llm")
        if not response.is_success:
            message = f"{where} answered {response.status_code}: {server_message(response)}"
            return Decided.failed("backend_error", message, component="llm")
        step: JsonObject = {
            "id": f"llm-{uuid.uuid4().hex}",
            "component": "llm",
            "origin": "model",
            "full_prompt": json.dumps(body["messages"]),
            "input_elements": {"model": self.model},
            "output_raw": response.text,
        }
        try:
            message = response.json()["choices"][0]["message"]
            decision = read_decision(message, robots)
        except (ValueError, LookupError, TypeError) as error:
            return Decided.failed(
                "malformed_output",
                str(error) or repr(error),
                component="llm",
                internal_steps=[step],
            )
        return Decided.of(decision, internal_steps=[step])


def _robots(agent_input: AgentInput) -> list[str]:
    robots = agent_input.attributes.get("known_robots")
    return [str(robot) for robot in robots] if isinstance(robots, list) else []
