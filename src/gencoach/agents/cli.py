"""`gencoach agent serve` and `gencoach check-agent`, for the root command to register.

`agent_app` is the `agent` command group and `check_agent` the `check-agent` command;
`gencoach.cli` adds both to the root command.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from gencoach.agents.defaults import DEFAULT_AGENT_ID, DEFAULT_LLM_ENDPOINT

if TYPE_CHECKING:
    from gencoach.agents.reference.mistakes import MistakeRates


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
    """Who decides: scripted (the reference worlds), oracle (an adapter's, with --env), llm."""

    scripted = "scripted"
    oracle = "oracle"
    llm = "llm"


class AnswersChoice(StrEnum):
    """How the LLM policy answers: by tool calls, or with a JSON decision."""

    tools = "tools"
    json = "json"


agent_app = typer.Typer(no_args_is_help=True)


@agent_app.callback()
def agent() -> None:
    """The reference agent for the reference world, or an agent for any adapter's env."""


@agent_app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8751,
    policy: Annotated[
        PolicyChoice | None,
        typer.Option(
            help="Who decides: scripted (the reference worlds; the default without --env), "
            "oracle (the adapter's oracle with the mistake rates; the default with --env) or llm."
        ),
    ] = None,
    env: Annotated[
        str | None,
        typer.Option(
            "--env",
            metavar="MODULE:ADAPTER",
            help="Serve an agent for this Gymnasium adapter's env (a GymAdapter instance or "
            "class, e.g. gencoach.integrations.textrooms:rooms), its tools the adapter's.",
        ),
    ] = None,
    answers: Annotated[
        AnswersChoice,
        typer.Option(help="How the llm policy answers: tools (tool calling) or json."),
    ] = AnswersChoice.tools,
    seed: Annotated[
        int, typer.Option(help="Seed of the scripted or oracle policy's mistakes.")
    ] = 0,
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
    agent_id: Annotated[
        str,
        typer.Option(help="The agent_id /v1/info announces (with --env: gencoach-env-<adapter>)."),
    ] = (DEFAULT_AGENT_ID),
    structured_output: Annotated[
        StructuredOutputChoice,
        typer.Option(help="How JSON is asked for: the coach's backends, the llm's JSON answers."),
    ] = StructuredOutputChoice.auto,
) -> None:
    """Serve the reference agent, or with --env an agent for any adapter (protocol 2.0, every
    coaching kind), until Ctrl-C or SIGTERM."""
    from gencoach.agents.reference import MistakeRates, ReferenceOptions, serve_agent
    from gencoach.runtime.logs import configure_logging

    if policy is PolicyChoice.llm and not model:
        raise typer.BadParameter("the llm policy needs a model", param_hint="--model")
    rates = MistakeRates(
        wrong_argument=wrong_argument,
        skipped_prerequisite=skipped_prerequisite,
        malformed=malformed,
        detour=detour,
        no_action=no_action,
    )
    if env is not None:
        if world is not WorldChoice.reference or policy is PolicyChoice.scripted:
            raise typer.BadParameter(
                "--env plays the adapter's env: give --policy oracle or llm, and no --world",
                param_hint="--env",
            )
        configure_logging("info")
        _serve_env(env, host, port, policy or PolicyChoice.oracle, rates, seed, answers, model,
                   llm_endpoint, agent_id, structured_output)  # fmt: skip
        return
    if policy is PolicyChoice.oracle:
        raise typer.BadParameter(
            "the oracle policy plays an adapter: give --env", param_hint="--env"
        )
    chosen: Literal["scripted", "llm"] = "llm" if policy is PolicyChoice.llm else "scripted"
    options = ReferenceOptions(
        policy=chosen,
        world="babyai" if world is WorldChoice.babyai else "reference",
        rates=rates,
        seed=seed,
        llm_endpoint=llm_endpoint,
        model=model,
        agent_id=agent_id,
        structured_output=structured_output.value,
        answers="json" if answers is AnswersChoice.json else "tools",
    )
    configure_logging("info")
    serve_agent(host, port, options)


def _serve_env(
    path: str,
    host: str,
    port: int,
    policy: PolicyChoice,
    rates: MistakeRates,
    seed: int,
    answers: AnswersChoice,
    model: str | None,
    llm_endpoint: str,
    agent_id: str,
    structured_output: StructuredOutputChoice,
) -> None:
    """Serve the env agent for the adapter `path` names (needs the gym extra)."""
    try:
        from gencoach.agents.reference.serve import serve_app
        from gencoach.integrations.gymnasium.agent import EnvAgentOptions, env_app
        from gencoach.integrations.gymnasium.cli import load_adapter
    except ImportError as error:
        message = f"{error}; install the gym extra: pip install 'gencoach[gym]'"
        raise typer.BadParameter(message, param_hint="--env") from None
    try:
        adapter = load_adapter(path)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--env") from None
    options = EnvAgentOptions(
        policy="llm" if policy is PolicyChoice.llm else "oracle",
        rates=rates,
        seed=seed,
        llm_endpoint=llm_endpoint,
        model=model,
        answers="json" if answers is AnswersChoice.json else "tools",
        structured_output=structured_output.value,
        agent_id=agent_id if agent_id != DEFAULT_AGENT_ID else f"gencoach-env-{adapter.name}",
    )
    serve_app(env_app(adapter, options), host, port, env=adapter.name, policy=options.policy)


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
