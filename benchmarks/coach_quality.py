"""Coach quality: how often a backend blames the truly faulty decision, and who made the
corrections that were proven.

The demo's parts (embedded Redis, controller, workers, the reference agent with its
seeded mistakes, the reference generator on every scenario) coach with one backend; the
generator names the decision it knows to be at fault on each stage end, so every
diagnosis is compared with the truth. Per route it prints: diagnoses judged, blamed the
right decision / a wrong one / declined / no diagnosis, requests admitted and proven,
corrections made by a model / by the agent's fallback / otherwise, proven corrections by
decision source, the median seconds from a proven request's opening to its correction,
and the tokens gencoach's own backends spent on the route per proven correction (see
`gencoach.demo.quality`): the tokens the agent's coach spends on its session backend
(the agent's repair model) are not reported to gencoach and not counted.

    .venv/bin/python -m benchmarks.coach_quality --backend teacher [--seeds 3]
    .venv/bin/python -m benchmarks.coach_quality --backend scripted
    .venv/bin/python -m benchmarks.coach_quality --backend llm \\
        --llm-endpoint http://127.0.0.1:8080/v1/chat/completions --model smollm2

`scripted` is a scripted LLM on loopback answering in MAGMA-GEN's format: it blames the
last decision with a free-text expected decision, blames the first decision of a
suboptimal stage, and repairs with words alone. `llm` is any OpenAI-compatible endpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from gencoach.demo.pacing import demo_pacing
from gencoach.demo.quality import COLUMNS, Quality, table_rows
from gencoach.demo.run import DemoOptions, coach_scenarios
from gencoach.runtime.logs import configure_logging
from tests.support.llm_server import ScriptedLLMServer, ScriptedReply, json_reply

MAGMA_EXPECTED = "redo the step with the arguments the stage goal names"
TOKENS_NOTE = (
    "gencoach tokens/proven: tokens of gencoach's own backends (diagnoses, rewrites); the "
    "agent's repair-model calls on its session backend are not counted"
)


def scripted_answer(body: Any) -> ScriptedReply:
    """The scripted LLM's answer to one chat request, by the contract it is asked for."""
    response_format = (body or {}).get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get(
        "schema"
    )
    title = (schema or {}).get("title")
    if title == "FailureDiagnosisAnswer":
        last = schema["properties"]["decision_index"].get("maximum", 1)
        return json_reply(
            {
                "decision_index": last,
                "reason": "the last decision preceded the failure",
                "expected_decision": MAGMA_EXPECTED,
            }
        )
    if title == "SuboptimalDiagnosisAnswer":
        return json_reply(
            {"suboptimal": True, "decision_idx": 1, "reason": "the first decision was wasteful"}
        )
    if title == "CaseSelectionAnswer":
        return json_reply([])
    if title == "AgentDecision":
        return json_reply({"say": "I cannot tell which decision to make.", "tool_calls": []})
    return json_reply({"say": "I do not know."})


@contextmanager
def backend_options(args: argparse.Namespace) -> Iterator[DemoOptions]:
    """The demo's options for the chosen backend (the scripted LLM served meanwhile)."""
    given = {"max_wall_s": args.max_wall_s} if args.max_wall_s is not None else {}
    endpoint = args.llm_endpoint if args.backend == "llm" else None
    pacing, _ = demo_pacing(endpoint, args.model if endpoint else None, given)
    options = DemoOptions(seed=args.seed, pacing=pacing)
    if args.backend == "teacher":
        yield options
    elif args.backend == "scripted":
        with ScriptedLLMServer(responder=scripted_answer) as server:
            yield replace(
                options,
                llm_endpoint=server.endpoint,
                model="scripted-magma",
                coach_with_llm=True,
                structured_output="json_schema",
            )
    else:
        yield replace(
            options,
            llm_endpoint=args.llm_endpoint,
            model=args.model,
            coach_with_llm=True,
            structured_output=args.structured_output,
        )


def measure(args: argparse.Namespace, console: Console) -> Quality:
    """Coach the demo's scenarios with the backend once per seed; every run's requests."""
    quality = Quality()
    with tempfile.TemporaryDirectory() as folder:
        for number in range(args.seeds):
            seeded = argparse.Namespace(**{**vars(args), "seed": args.seed + number})
            with backend_options(seeded) as options:
                seen = coach_scenarios(options, Path(folder) / f"seed-{seeded.seed}", console)
            quality.merge(seen.quality)
    return quality


def markdown(quality: Quality) -> str:
    """The table as Markdown, as BENCHMARKS.md records it."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(quality)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("scripted", "teacher", "llm"), default="teacher")
    parser.add_argument("--llm-endpoint", help="an OpenAI-compatible chat-completions URL")
    parser.add_argument("--model", help="the model the endpoint serves")
    parser.add_argument(
        "--structured-output",
        default="auto",
        choices=("auto", "json_schema", "json_object", "none"),
    )
    parser.add_argument("--seed", type=int, default=7, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="demo runs, seeds seed, seed+1, …")
    parser.add_argument("--max-wall-s", type=float, help="each scenario's time budget")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    args = parser.parse_args(argv)
    if args.backend == "llm" and not (args.llm_endpoint and args.model):
        parser.error("--backend llm needs --llm-endpoint and --model")
    configure_logging("warning", "console")
    console = Console(stderr=True)
    quality = measure(args, console)
    model = {"teacher": "gencoach.sim.teacher", "scripted": "scripted-magma"}.get(
        args.backend, args.model
    )
    print(f"coach quality: backend {args.backend} ({model}), seeds {args.seeds}")
    print(markdown(quality))
    print(TOKENS_NOTE)
    if args.json:
        print(json.dumps([dict(zip(COLUMNS, row, strict=True)) for row in table_rows(quality)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
