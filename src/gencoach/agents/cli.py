"""`gencoach agent serve` and `gencoach check-agent`, for the root command to register.

```python
from gencoach.agents.cli import agent_app, check_agent

app.add_typer(agent_app, name="agent")
app.command("check-agent")(check_agent)
```
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

import typer

from gencoach.agents.defaults import DEFAULT_AGENT_ID, DEFAULT_LLM_ENDPOINT


class StructuredOutputChoice(StrEnum):
    """How a backend is asked for JSON (a backend's `structured_output`)."""

    auto = "auto"
    json_schema = "json_schema"
    json_object = "json_object"
    none = "none"


class WorldChoice(StrEnum):
    """Which world the scripted policy plays."""

    reference = "reference"
    babyai = "babyai"


class PolicyChoice(StrEnum):
    """Who decides in the reference agent."""

    scripted = "scripted"
    llm = "llm"


agent_app = typer.Typer(no_args_is_help=True)


@agent_app.callback()
def agent() -> None:
    """The reference agent for the reference world."""


@agent_app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8751,
    policy: Annotated[
        PolicyChoice, typer.Option(help="Who decides: scripted (the reference world) or llm.")
    ] = PolicyChoice.scripted,
    seed: Annotated[int, typer.Option(help="Seed of the scripted policy's mistakes.")] = 0,
    world: Annotated[
        WorldChoice,
        typer.Option(help="The world the scripted policy plays (babyai needs the gym extra)."),
    ] = WorldChoice.reference,
    wrong_argument: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Rate of calls with a wrong id.")
    ] = 0.0,
    skipped_prerequisite: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Rate of calls made before what they need.")
    ] = 0.0,
    malformed: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Rate of words with calls, or unknown tools.")
    ] = 0.0,
    detour: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Rate of a needless call (once a stage).")
    ] = 0.0,
    no_action: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Rate of answers without any call.")
    ] = 0.0,
    llm_endpoint: Annotated[
        str, typer.Option(help="The llm policy's full chat-completions URL.")
    ] = DEFAULT_LLM_ENDPOINT,
    model: Annotated[str | None, typer.Option(help="The llm policy's model.")] = None,
    agent_id: Annotated[str, typer.Option(help="The agent_id /v1/info announces.")] = (
        DEFAULT_AGENT_ID
    ),
    structured_output: Annotated[
        StructuredOutputChoice,
        typer.Option(help="How the coach asks its session's backends for JSON."),
    ] = StructuredOutputChoice.auto,
) -> None:
    """Serve the reference agent (protocol 2.0, every coaching kind) until Ctrl-C or SIGTERM."""
    from gencoach.agents.reference import MistakeRates, ReferenceOptions, serve_agent
    from gencoach.logs import configure_logging

    if policy is PolicyChoice.llm and not model:
        raise typer.BadParameter("the llm policy needs a model", param_hint="--model")
    chosen: Literal["scripted", "llm"] = "llm" if policy is PolicyChoice.llm else "scripted"
    rates = MistakeRates(
        wrong_argument=wrong_argument,
        skipped_prerequisite=skipped_prerequisite,
        malformed=malformed,
        detour=detour,
        no_action=no_action,
    )
    options = ReferenceOptions(
        policy=chosen,
        world="babyai" if world is WorldChoice.babyai else "reference",
        rates=rates,
        seed=seed,
        llm_endpoint=llm_endpoint,
        model=model,
        agent_id=agent_id,
        structured_output=structured_output.value,
    )
    configure_logging("info")
    serve_agent(host, port, options)


def check_agent_command(url: str, timeout_s: float, backend_endpoint: str | None = None) -> int:
    """Run every check against the agent at `url`, print one line each; the exit code."""
    from gencoach.agents.checker import run_check_agent

    return run_check_agent(url, timeout_s=timeout_s, backend_endpoint=backend_endpoint)


def check_agent(
    url: Annotated[str, typer.Argument(help="The agent's base URL, e.g. http://127.0.0.1:8751.")],
    timeout_s: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for each answer.")
    ] = 10.0,
    backend_endpoint: Annotated[
        str | None,
        typer.Option(
            help="A chat-completions URL the agent can reach, for the coaching session "
            "(default: a stub the checker serves on 127.0.0.1)."
        ),
    ] = None,
) -> None:
    """Check that an agent keeps protocol 2.0: one PASS/FAIL line per check, exit 1 on a failure."""
    raise typer.Exit(check_agent_command(url, timeout_s, backend_endpoint))
