"""`gencoach demo`: the whole system on a laptop, from Redis to proven corrections.

`run_demo` starts an embedded Redis (unless given one), the controller, the workers and
the agent as child processes, generates in this process, shows live progress and a
summary; `DemoOptions` says what it plays. See docs/running.md and docs/integrations.md.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import httpx
import yaml
from rich.console import Console

from gencoach.demo.causes import causes
from gencoach.demo.display import print_summary, watch
from gencoach.demo.interrupts import Interrupts
from gencoach.demo.invocation import own_command
from gencoach.demo.pacing import Pacing
from gencoach.demo.processes import Child, ChildError
from gencoach.demo.progress import Snapshot, snapshot
from gencoach.runtime.embedded_redis import EmbeddedRedis
from gencoach.runtime.ports import free_port
from gencoach.runtime.terminal import fit_to_output
from gencoach.sim.generator import run_generation
from gencoach.sim.options import GenerationOptions, GenerationReport
from gencoach.sim.scenarios import SCENARIOS

if TYPE_CHECKING:  # gymnasium is an extra: imported only where an env is played
    from gencoach.integrations.gymnasium import GymAdapter

TEACHER = "gencoach.sim.teacher:diagnose"
BABYAI_TEACHER = "gencoach.integrations.minigrid:teacher"
BABYAI_MISTAKES = {
    "wrong-argument": 0.1,
    "skipped-prerequisite": 0.25,
    "malformed": 0.05,
    "no-action": 0.05,
}
# The env agent's mistakes on an adapter's env (it has no detour to make).
ADAPTER_MISTAKES = {"wrong-argument": 0.3, "malformed": 0.1, "no-action": 0.05}
MUST_PROVE = ("format", "failure", "suboptimal")


def adapter_teacher(path: str) -> str:
    """The oracle teacher of the adapter `MODULE:ADAPTER`: its module's `teacher`, which
    must exist (ValueError naming what to add otherwise)."""
    import importlib

    module_name = path.partition(":")[0]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name}: {error}") from error
    if not callable(getattr(module, "teacher", None)):
        raise ValueError(
            f"{module_name} has no teacher: add `teacher = OracleTeacher(YourAdapter)` "
            "(gencoach.integrations.gymnasium) to it"
        )
    return f"{module_name}:teacher"


@dataclass(frozen=True)
class DemoOptions:
    """What the demo runs; the defaults finish in about half a minute on two idle cores."""

    output_dir: Path = Path("output")
    redis_url: str | None = None
    env: str = "reference"
    """`babyai`: BabyAI levels through the Gymnasium integration, coached by the bot;
    `MODULE:ADAPTER`: any Gymnasium adapter's env with the env agent (`agent serve --env`:
    its oracle policy with mistakes, or the model with `--llm-endpoint`), coached by the
    adapter module's oracle teacher (`adapter_teacher`, e.g.
    `gencoach.integrations.textrooms:teacher`)."""
    scenarios: tuple[str, ...] = tuple(SCENARIOS)
    envs: int = 2
    branches: int = 2
    seed: int = 7
    injection_probability: float = 0.1
    mistakes: dict[str, float] = field(
        default_factory=lambda: {
            "wrong-argument": 0.2,
            "skipped-prerequisite": 0.1,
            "malformed": 0.15,
            "detour": 0.4,
            "no-action": 0.05,
        }
    )
    llm_endpoint: str | None = None
    model: str | None = None
    structured_output: str = "auto"
    coach_with_llm: bool = False
    """Keep the scripted agent; coach with the model instead of the teacher."""
    pacing: Pacing = field(default_factory=Pacing)

    @property
    def adapter(self) -> str | None:
        """The `MODULE:ADAPTER` the demo plays, if it plays one."""
        return self.env if ":" in self.env else None

    @property
    def llm_decides(self) -> bool:
        """Whether the model, not the scripted policy, makes the agent's decisions."""
        return self.llm_endpoint is not None and not self.coach_with_llm


def _config(options: DemoOptions, folder: Path, redis_url: str, api_port: int) -> Path:
    pacing = options.pacing
    if options.llm_endpoint:
        backend = {
            "type": "openai",
            "endpoint": options.llm_endpoint,
            "default_model": options.model,
            "timeout_s": pacing.llm_timeout_s,
            "structured_output": options.structured_output,
        }
    else:
        teacher = BABYAI_TEACHER if options.env == "babyai" else TEACHER
        if options.adapter is not None:
            teacher = adapter_teacher(options.adapter)
        backend = {"type": "python", "endpoint": teacher, "timeout_s": 30}
    config = {
        "redis": {"url": redis_url},
        "output_dir": str(folder / "graphs"),
        "api": {"port": api_port},
        "coaching": {
            "enabled": True,
            "lease_s": 15,
            "max_pending_per_stage": 8,
            "max_unproven_per_stage": 8,
            "max_alternatives_per_situation": 4,
            "examples": {"register_successful": True, "cache_dir": str(folder / "cases")},
        },
        "backends": {"teacher" if not options.llm_endpoint else "llm": backend},
        "workers": {"processes": 2, "job_timeout_s": pacing.job_timeout_s},
        "controller": {"consumer": "demo", "grace_s": 5},
        "log": {"level": "info", "format": "json"},
    }
    path = folder / "gencoach.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextlib.contextmanager
def _redis(options: DemoOptions, folder: Path) -> Iterator[str]:
    if options.redis_url is not None:
        yield options.redis_url
        return
    with EmbeddedRedis(folder / "redis", persist=False) as server:
        assert server.url is not None
        yield server.url


def _agent_args(options: DemoOptions, port: int) -> list[str]:
    args = ["agent", "serve", "--port", str(port), "--seed", str(options.seed)]
    args += ["--structured-output", options.structured_output]
    if options.adapter is not None:
        args += ["--env", options.adapter]
    if options.llm_decides:
        endpoint, model = str(options.llm_endpoint), str(options.model)
        return [*args, "--policy", "llm", "--llm-endpoint", endpoint, "--model", model]
    mistakes = options.mistakes
    if options.env == "babyai":
        args += ["--world", "babyai"]
        mistakes = BABYAI_MISTAKES
    if options.adapter is not None:
        args += ["--policy", "oracle"]
        mistakes = ADAPTER_MISTAKES
    for name, rate in mistakes.items():
        args += [f"--{name}", str(rate)]
    return args


async def _generate(options: DemoOptions, redis_url: str, agent_url: str) -> list[str]:
    """Play every scenario (or BabyAI level); each run's summary line."""
    if options.env == "babyai":
        return await _generate_babyai(options, redis_url, agent_url)
    if options.adapter is not None:
        return [await _generate_adapter(options.adapter, options, redis_url, agent_url)]
    reports: list[GenerationReport] = []

    async def one(index: int, scenario: str) -> None:
        generation = GenerationOptions(
            scenario=scenario,
            agent_url=agent_url,
            redis_url=redis_url,
            seed=options.seed + index,
            envs=options.envs,
            branches=options.branches,
            max_wall_s=options.pacing.max_wall_s,
            injection_probability=options.injection_probability,
            timeout_s=options.pacing.agent_timeout_s,
            branch_grace_s=options.pacing.branch_grace_s,
        )
        reports.append(await run_generation(generation))

    async with anyio.create_task_group() as tg:
        for index, scenario in enumerate(options.scenarios):
            tg.start_soon(one, index, scenario)
    return [report.summary() for report in reports]


async def _generate_babyai(options: DemoOptions, redis_url: str, agent_url: str) -> list[str]:
    """The BabyAI levels (PickupDist strict, so a wrong pickup fails), `envs` runs each."""
    from gencoach.integrations.minigrid import LEVELS, BabyAIAdapter

    summaries: list[str] = []

    async def one(level: str) -> None:
        adapter = BabyAIAdapter(level, strict=level == "PickupDist")
        summaries.append(await _campaign(adapter, options, redis_url, agent_url))

    async with anyio.create_task_group() as tg:
        for level in LEVELS:
            tg.start_soon(one, level)
    return summaries


async def _generate_adapter(path: str, options: DemoOptions, redis_url: str, agent_url: str) -> str:
    """`envs` runs of the adapter's env (a campaign); its summary line."""
    from gencoach.integrations.gymnasium.cli import load_adapter

    return await _campaign(load_adapter(path), options, redis_url, agent_url)


async def _campaign(
    adapter: GymAdapter, options: DemoOptions, redis_url: str, agent_url: str
) -> str:
    """`envs` runs of one adapter's env, as the demo paces them; its summary line."""
    from gencoach.integrations.gymnasium import CampaignOptions, run_campaign

    campaign = CampaignOptions(
        adapter=adapter,
        agent_url=agent_url,
        redis_url=redis_url,
        runs=options.envs,
        concurrency=options.envs,
        seed=options.seed,
        branches=options.branches,
        settle_timeout_s=options.pacing.branch_grace_s,
        timeout_s=options.pacing.agent_timeout_s,
        campaign=f"demo-{adapter.name}-{uuid.uuid4().hex[:6]}",
    )
    report = await run_campaign(campaign)
    return f"{adapter.name}: {report.summary()}"


async def _watch(api: str, console: Console, done: anyio.Event) -> None:
    with httpx.Client(timeout=5) as client:
        await watch(functools.partial(snapshot, api, client), console, done)


async def _drive(
    options: DemoOptions,
    redis_url: str,
    agent_url: str,
    api: str,
    console: Console,
    interrupts: Interrupts,
) -> Snapshot:
    interrupts.check()
    done = anyio.Event()

    async def generate_then_settle() -> None:
        try:
            for summary in await _generate(options, redis_url, agent_url):
                console.print(summary)
            async with httpx.AsyncClient(timeout=5) as client:
                with anyio.move_on_after(30):
                    while True:  # until every finished run is saved
                        listed = (await client.get(f"{api}/v1/runs", params={"limit": 1})).json()
                        if listed["counts"]["saved"] == listed["total"]:
                            break
                        await anyio.sleep(0.5)
        finally:
            done.set()

    async def watch() -> None:
        await _watch(api, console, done)

    async with anyio.create_task_group() as outer:
        outer.start_soon(interrupts.cancel_on_sigint, outer.cancel_scope)
        async with anyio.create_task_group() as tg:
            tg.start_soon(generate_then_settle)
            tg.start_soon(watch)
        outer.cancel_scope.cancel()
    interrupts.check()
    with httpx.Client(timeout=5) as client:
        return await anyio.to_thread.run_sync(snapshot, api, client)


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo: 0 when it ran to its summary, 1 when a part failed, 130 on Ctrl-C.
    Every process it started is stopped on the way out, also on Ctrl-C."""
    fit_to_output(console)
    if options.adapter is not None:
        try:
            adapter_teacher(options.adapter)
        except ValueError as error:
            console.print(f"[red]demo failed:[/] --env {options.adapter}: {error}")
            return 1
    folder = (options.output_dir / time.strftime("demo-%Y%m%d-%H%M%S")).resolve()
    folder.mkdir(parents=True)
    started = time.monotonic()
    interrupts = Interrupts()
    try:
        with interrupts.installed():
            seen = coach_scenarios(options, folder, console, interrupts)
    except ChildError as error:
        console.print(f"[red]demo failed:[/] {error}")
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the demo started was stopped[/]")
        return 130
    print_summary(console, seen, time.monotonic() - started)
    graphs = folder / "graphs"
    export = f"{own_command()} export {graphs} --format chat"
    console.print(f"saved graphs: {graphs}  (then: {export})")
    missing = [route for route in MUST_PROVE if seen.proven(route) == 0]
    if missing:
        console.print(f"[yellow]no proven correction this time for: {', '.join(missing)}[/]")
        logs = [folder / "controller.log", folder / "workers.log"]
        found = causes(logs)
        for cause in found:
            console.print(f"[yellow]  cause: {cause}[/]")
        if not found:
            console.print(
                "[yellow]  the logs show no error: the runs may have been too short "
                "(raise --max-wall-s)[/]"
            )
    return 0


def coach_scenarios(
    options: DemoOptions, folder: Path, console: Console, interrupts: Interrupts | None = None
) -> Snapshot:
    """Run every part in `folder` and coach the scenarios; what the controller saw at the
    end. Raises ChildError when a part fails, KeyboardInterrupt on Ctrl-C; every process
    started is stopped."""
    with _redis(options, folder) as redis_url:
        return _with_children(options, folder, redis_url, console, interrupts or Interrupts())


def _with_children(
    options: DemoOptions, folder: Path, redis_url: str, console: Console, interrupts: Interrupts
) -> Snapshot:
    api_port, agent_port = free_port(), free_port()
    api, agent_url = f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{agent_port}"
    config = str(_config(options, folder, redis_url, api_port))
    agent = Child("agent", _agent_args(options, agent_port), folder / "agent.log")
    controller = Child("controller", ["--config", config, "serve"], folder / "controller.log")
    workers = Child("workers", ["--config", config, "worker"], folder / "workers.log")
    children = [agent, controller, workers]
    try:
        for child in children:
            child.start()
        agent.wait_healthy(f"{agent_url}/health")
        controller.wait_healthy(f"{api}/health")
        console.print(f"[bold]gencoach demo[/] in {folder} (controller {api}, agent {agent_url})")
        return anyio.run(_drive, options, redis_url, agent_url, api, console, interrupts)
    finally:
        for child in reversed(children):  # workers, controller, then the agent
            child.stop()
