"""Export throughput and peak memory, next to a plain JSON read of the same save files.

A source of generated saves (by default 5,000 runs of 20 situations: 100,000 situations)
is written to a temporary folder. Each phase then runs in its own fresh process, so its
peak resident memory is its own: first a plain read (`json.loads` of every `config.json`
and situation file, nothing kept), then `gencoach export` in each format asked for. Each
run is a chain of 10 situations, one stage per two situations, each answered by a
succeeding and a failing (diagnosed faulty) candidate, and each with a coached
alternative that succeeds: every situation yields examples, and every coached copy a pair.

    .venv/bin/python -m benchmarks.export [--runs 5000] [--formats chat,full-history,preference]
        [--chat-options '{"reasoning": false, "dedupe": false}']

Only `chat` is exported by default, to keep the run under three minutes on two cores.
When MAGMA-GEN is installed (`make .venv-magma/.installed`; `--magma PYTHON` to name
another interpreter), its own `magma_gen.launch_export` runs on the same source too, with
a minimal exporter plugin (one small row per example), in a process of its own whose CPU
time and peak memory are read from the kernel (`wait4`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

CHAIN = 10  # main situations per run; each has a coached copy, so 20 situations per run
TASKS = 100


def _peak_rss_mb() -> float:
    """This process's peak resident memory. ru_maxrss survives exec (a spawned child would
    report its parent's peak), so Linux's VmHWM, which starts afresh, is read first."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _template() -> tuple[str, list[tuple[int, str]]]:
    """One run as JSON text, with `@RUN@` where the run index goes."""
    from gencoach.graph import ScoredCandidate, descendant_scores, outcome_of
    from tests.support.saved_runs import candidate, executed, press, run_config, say, situation

    members: dict[int, list[int]] = {}
    scoring: dict[int, ScoredCandidate] = {}
    layout: list[dict[str, Any]] = []
    for index in range(CHAIN):
        main, copy = 2 * index, 2 * index + 1
        good, bad, coached = 3 * index, 3 * index + 1, 3 * index + 2
        stage_id = index // 2
        last = index == CHAIN - 1
        status = "optimal" if index % 2 or last else "ongoing"
        members[main], members[copy] = [good, bad], [coached]
        nexts = [] if last else [main + 2]
        scoring[good] = ScoredCandidate(stage_id, outcome_of(status), nexts)
        scoring[bad] = ScoredCandidate(stage_id, outcome_of("error"))
        scoring[coached] = ScoredCandidate(stage_id, outcome_of("optimal"))
        layout.append({"index": index, "status": status, "nexts": nexts, "stage": stage_id})
    scores = {
        cid: {key: value.model_dump(by_alias=True) for key, value in score.items()}
        for cid, score in descendant_scores(members, scoring).items()
    }
    files: list[tuple[int, str]] = []
    for item in layout:
        index, stage_id = item["index"], item["stage"]
        main, copy = 2 * index, 2 * index + 1
        good, bad, coached = 3 * index, 3 * index + 1, 3 * index + 2
        parent = None if index == 0 else 3 * (index - 1)
        kind, content = ("user", "press the buttons @RUN@") if index == 0 else ("env", "ok")
        answer = say("done") if index == CHAIN - 1 else press(f"sw{index}")
        # The next situation and its coached copy both hang off this answer.
        links = [(n, "next") for n in item["nexts"]] + [
            (n + 1, "alternative") for n in item["nexts"]
        ]
        steps = [{"reasoning": f"step {index} of run @RUN@"}]
        main_record = situation(
            main,
            parent,
            [
                candidate(good, answer, item["status"], scores[good], links=links,
                          execution=executed(f"sw{index}"), internal_steps=steps),
                candidate(bad, press("sw99"), "error", scores[bad], faulty=True,
                          execution=executed("sw99", "bad_call")),
            ],
            content=content, kind=kind, stage_id=stage_id,
        )  # fmt: skip
        copy_record = situation(
            copy,
            parent,
            [candidate(coached, answer, "optimal", scores[coached], attempts=[index + 1],
                       origin="coaching", execution=executed(f"sw{index}"))],
            content=content, kind=kind, stage_id=stage_id, input_id=main,
        )  # fmt: skip
        for record in (main_record, copy_record):
            files.append((record.id, record.model_dump_json(by_alias=True)))
    # The first situation has no parent answer: it and its coached copy are both roots.
    config = run_config("bench-@RUN@", scenario="bench", target="t@TASK@", roots=[0, 1])
    return config.model_dump_json(by_alias=True), files


def generate(folder: Path, runs: int) -> int:
    """Write `runs` saves below `folder`; return the number of situation files."""
    config, situations = _template()
    count = 0
    for run in range(runs):
        save = os.path.join(folder, f"run-{run:06d}")
        os.makedirs(save)
        for sid, text in situations:
            with open(os.path.join(save, f"{sid}.json"), "w", encoding="utf-8") as handle:
                handle.write(text.replace("@RUN@", str(run)))
            count += 1
        filled = config.replace("@RUN@", str(run)).replace("@TASK@", str(run % TASKS))
        with open(os.path.join(save, "config.json"), "w", encoding="utf-8") as handle:
            handle.write(filled)
    return count


def plain_read(source: str) -> dict[str, float]:
    """Parse every JSON file of every save, keeping nothing: the floor any reader pays."""
    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    cpu = time.process_time()
    files = 0
    for root, _, names in os.walk(source):
        for name in sorted(names):
            if name.endswith(".json"):
                with open(os.path.join(root, name), "rb") as handle:
                    json.loads(handle.read())
                files += 1
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "files": files,
        "rows": 0,
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


def export(source: str, fmt: str, options: str = "{}") -> dict[str, float]:
    """One export of the whole source, in a fresh process (`options`: a JSON object)."""
    from gencoach.export import ExportSettings, run_export

    start_rss = _peak_rss_mb()
    started = time.perf_counter()
    cpu = time.process_time()
    settings = ExportSettings(source=Path(source), format=fmt, options=json.loads(options))
    outcome = run_export(settings)
    if outcome.skipped or outcome.failures:
        raise RuntimeError(f"generated saves were refused: {outcome.skipped or outcome.failures}")
    return {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "files": 0,
        "rows": sum(outcome.rows.values()),
        "start_rss": start_rss,
        "peak_rss": _peak_rss_mb(),
    }


PLUGIN = '''
"""A minimal MAGMA exporter: one small row per example."""
from magma_core.protocol.agent_export import (
    DatasetRenderer, ExportRecord, ExportResult, GenExporter,
)


class Renderer(DatasetRenderer):
    filenames = {"rows": "rows.json"}

    def render(self, channel, example):
        return example


class BenchExporter(GenExporter):
    agent_id = "reference-agent"
    agent_version = "1.0.0"

    def __init__(self):
        self.renderer = Renderer()

    def export(self, examples, *, options=None):
        return [
            ExportResult(
                example_id=e.example_id,
                status="exported",
                records=[ExportRecord(record_id=e.example_id, dataset="rows",
                                      data={"id": e.example_id, "say": e.candidate.output.say})],
            )
            for e in examples
        ]
'''


def magma_export(python: str, source: Path, plugins: Path) -> dict[str, float]:
    """MAGMA-GEN's own `launch_export` of the source with the minimal plugin."""
    info = plugins / "bench_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (plugins / "bench_plugin.py").write_text(PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[magma.export.gen]\nbench = bench_plugin:BenchExporter\n"
    )
    env = {**os.environ, "PYTHONPATH": str(plugins)}
    command = [python, "-m", "magma_gen.launch_export", str(source), "--agent", "bench"]
    started = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    out, err = child.communicate()
    if status != 0:
        raise RuntimeError(f"launch_export failed: {out.decode()} {err.decode()}")
    rows = json.loads((source / "datasets" / "rows.json").read_text())
    shutil.rmtree(source / "datasets")
    return {
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "files": 0,
        "rows": len(rows),
        "start_rss": 0.0,
        "peak_rss": usage.ru_maxrss / 1024,
    }


def _magma_python() -> str | None:
    default = Path(".venv-magma/bin/python")
    return str(default) if default.exists() else None


def _memory_folder() -> str | None:
    shm = Path("/dev/shm")  # noqa: S108 - only the parent of a private mkdtemp folder
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _isolated(function: Callable[..., dict[str, float]], *args: str) -> dict[str, float]:
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def main() -> None:
    """Generate the source, measure each phase, print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=5000, help="saves to generate (20 situations each)"
    )
    parser.add_argument("--formats", default="chat", help="comma-separated: chat,full-history,…")
    parser.add_argument(
        "--tmp-dir",
        default=_memory_folder(),
        help="where the source is generated (default: /dev/shm when there is one, so the "
        "figures measure the work, not a disk shared with other jobs)",
    )
    parser.add_argument(
        "--magma",
        default=_magma_python(),
        help="a Python with magma-gen 2.0.0 (default: .venv-magma/bin/python when present)",
    )
    parser.add_argument(
        "--chat-options",
        default="{}",
        help='a JSON object of chat options, e.g. \'{"reasoning": false, "dedupe": false}\'',
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gencoach-bench-export-", dir=args.tmp_dir) as folder:
        source = Path(folder) / "source"
        started = time.perf_counter()
        situations = generate(source, args.runs)
        size = sum(f.stat().st_size for f in source.rglob("*.json")) / 1e6
        print(
            f"source: {situations:,} situations in {args.runs:,} saves, {size:,.0f} MB, "
            f"generated in {time.perf_counter() - started:.1f} s under {folder}"
        )
        plain = _isolated(plain_read, str(source))
        results = {"plain JSON read": plain}
        if args.magma:
            magma = magma_export(args.magma, source, Path(folder) / "plugins")
            results["magma-gen launch_export"] = magma
        for fmt in args.formats.split(","):
            options = args.chat_options if fmt == "chat" else "{}"
            results[f"export {fmt}"] = _isolated(export, str(source), fmt, options)
    magma_result = results.get("magma-gen launch_export")
    header = f"{'phase':<26}{'wall s':>8}{'CPU s':>8}{'situations/s':>14}{'rows':>10}"
    header += f"{'peak RSS MB':>13}{'CPU ×plain':>12}{'RSS ×plain':>12}"
    print(header + (f"{'CPU ×magma':>12}{'RSS ×magma':>12}" if magma_result else ""))
    for name, result in results.items():
        cpu = result["cpu"]
        line = (
            f"{name:<26}{result['seconds']:>8.1f}{cpu:>8.1f}{situations / cpu:>14,.0f}"
            f"{int(result['rows']):>10,}{result['peak_rss']:>13.0f}"
            f"{cpu / plain['cpu']:>12.1f}{result['peak_rss'] / plain['peak_rss']:>12.1f}"
        )
        if magma_result:
            line += f"{cpu / magma_result['cpu']:>12.2f}"
            line += f"{result['peak_rss'] / magma_result['peak_rss']:>12.2f}"
        print(line)


if __name__ == "__main__":
    main()
